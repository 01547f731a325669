"""ReplicaScorerPolicy: equivariance, near-uniform start, any replica count, temperature, act, router."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from schedulers.rl.scorer_network import ReplicaScorerPolicy
from schedulers.rl.ppo_router import PPORouter

torch.set_num_threads(1)


def make_policy(n_features: int = 5, seed: int = 0, **kwargs) -> ReplicaScorerPolicy:
    torch.manual_seed(seed)
    return ReplicaScorerPolicy(n_features, **kwargs)


def random_obs(batch: int, replicas: int, features: int = 5, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, replicas, features, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shared", [False, True])
def test_permuting_replicas_permutes_probabilities_and_keeps_value(shared: bool) -> None:
    policy = make_policy(shared_encoder=shared)
    # Make the policy far from uniform so that equivariance is tested on non-trivial logits.
    with torch.no_grad():
        policy.score_head.weight.mul_(300.0)
    obs = random_obs(8, 6)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    logits, value = policy(obs)
    logits_p, value_p = policy(obs[:, perm])
    assert logits.std() > 0.1
    torch.testing.assert_close(logits_p, logits[:, perm])
    torch.testing.assert_close(value_p, value)
    probs = torch.softmax(logits, -1)
    torch.testing.assert_close(torch.softmax(logits_p, -1), probs[:, perm])


@pytest.mark.parametrize("replicas", [2, 4, 8, 16])
def test_initial_policy_is_near_uniform(replicas: int) -> None:
    policy = make_policy()
    obs = random_obs(64, replicas) * 3.0
    entropy = policy.distribution(obs).entropy()
    assert torch.all(entropy > 0.999 * math.log(replicas))
    assert torch.all(entropy <= math.log(replicas) + 1e-6)


def test_orthogonal_init_gains() -> None:
    policy = make_policy(hidden_sizes=(32, 16))
    # A (1 x H) orthogonal matrix with gain g has a row of norm g.
    assert policy.score_head.weight.norm().item() == pytest.approx(0.01, rel=1e-5)
    assert policy.value_head.weight.norm().item() == pytest.approx(1.0, rel=1e-5)
    first = policy.actor_encoder[0].weight  # (32, 5): orthonormal columns scaled by sqrt(2)
    torch.testing.assert_close(first.T @ first, 2.0 * torch.eye(5), atol=1e-5, rtol=0)
    assert torch.count_nonzero(policy.score_head.bias) == 0


def test_same_weights_serve_any_number_of_replicas() -> None:
    policy = make_policy()
    four = random_obs(3, 4)
    eight = torch.cat([four, random_obs(3, 4, seed=9)], dim=1)
    logits4, _ = policy(four)
    logits8, value8 = policy(eight)
    assert logits8.shape == (3, 8) and value8.shape == (3,)
    # Per-row scoring: the first four replicas' scores do not depend on the others.
    torch.testing.assert_close(policy.scores(eight)[:, :4], policy.scores(four))
    assert logits4.shape == (3, 4)


def test_temperature_divides_logits_and_is_saved() -> None:
    policy = make_policy()
    obs = random_obs(4, 5)
    scores = policy.scores(obs)
    policy.temperature = 0.25
    torch.testing.assert_close(policy.logits(obs), scores * 4.0)
    clone = ReplicaScorerPolicy.from_checkpoint_dict(policy.to_checkpoint())
    assert clone.temperature == pytest.approx(0.25)
    torch.testing.assert_close(clone.logits(obs), policy.logits(obs))
    with pytest.raises(ValueError, match="temperature"):
        policy.temperature = 0.0
    with pytest.raises(ValueError, match="temperature"):
        policy.temperature = float("nan")


def test_act_shapes_deterministic_and_seeded_sampling() -> None:
    policy = make_policy()
    with torch.no_grad():
        policy.score_head.weight.mul_(100.0)
    obs = random_obs(16, 4)
    step = policy.act(obs, deterministic=True)
    assert step.action.shape == (16,) and step.log_prob.shape == (16,) and step.value.shape == (16,)
    torch.testing.assert_close(step.action, policy.logits(obs).argmax(-1))
    single = policy.act(obs[0].numpy(), deterministic=True)
    assert single.action.dim() == 0 and int(single.action) == int(step.action[0])
    a = policy.act(obs, generator=torch.Generator().manual_seed(7)).action
    b = policy.act(obs, generator=torch.Generator().manual_seed(7)).action
    assert torch.equal(a, b)
    log_prob = policy.distribution(obs).log_prob(a)
    torch.testing.assert_close(policy.act(obs, generator=torch.Generator().manual_seed(7)).log_prob, log_prob)


def test_sampling_follows_the_probabilities() -> None:
    policy = make_policy(n_features=1)
    with torch.no_grad():
        policy.score_head.weight.mul_(50.0)
    obs = torch.tensor([[[0.0], [1.0], [2.0]]]).repeat(4000, 1, 1)
    probs = torch.softmax(policy.logits(obs[:1]), -1)[0]
    actions = policy.act(obs, generator=torch.Generator().manual_seed(0)).action
    share = torch.bincount(actions, minlength=3).double() / len(actions)
    torch.testing.assert_close(share, probs.double(), atol=0.03, rtol=0)


def test_bad_observations_raise() -> None:
    policy = make_policy()
    obs = np.zeros((4, 5), dtype=np.float32)
    obs[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        policy.act(obs)
    with pytest.raises(ValueError, match="shape"):
        policy.act(np.zeros(5, dtype=np.float32))
    with pytest.raises(ValueError, match="activation"):
        ReplicaScorerPolicy(5, activation="sigmoid")
    with pytest.raises(ValueError, match="hidden_sizes"):
        ReplicaScorerPolicy(5, hidden_sizes=())


def test_router_from_checkpoint(tmp_path) -> None:
    policy = make_policy(n_features=3)
    with torch.no_grad():
        policy.score_head.weight.mul_(100.0)
    path = tmp_path / "policy.pt"
    torch.save(policy.to_checkpoint(), path)
    obs = random_obs(1, 8, features=3)[0].numpy()

    router = PPORouter.from_checkpoint(path)
    action = router.decide(None, rows=obs)
    assert isinstance(action, int) and 0 <= action < 8
    assert action == int(policy.logits(torch.from_numpy(obs)[None]).argmax())

    sampler = PPORouter.from_checkpoint(path, deterministic=False)
    sampler.reset(seed=101)
    first = [sampler.decide(None, rows=obs) for _ in range(30)]
    sampler.reset(seed=101)
    assert [sampler.decide(None, rows=obs) for _ in range(30)] == first
    assert len(set(first)) > 1  # really sampling (the policy is not one-hot)

    hot = PPORouter.from_checkpoint(path, temperature=1e-3)
    assert hot.probabilities(obs).max().item() > 0.99

    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        PPORouter.from_checkpoint(tmp_path / "missing.pt")
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="policy_kwargs"):
        PPORouter.from_checkpoint(tmp_path / "other.pt")


def test_the_checkpoint_is_the_ppo_policy_behind_the_seam(tmp_path) -> None:
    from schedulers.routing.policy import Policy
    from schedulers.routing.policy import make_policy as make_router_policy

    path = tmp_path / "policy.pt"
    torch.save(make_policy(n_features=3).to_checkpoint(), path)
    router = make_router_policy("ppo", path, deterministic=False, seed=3)
    assert isinstance(router, PPORouter) and isinstance(router, Policy) and router.name == "ppo"
    assert not router.deterministic


def test_linear_scores_start_at_zero_stay_equivariant_and_are_saved() -> None:
    plain, linear = make_policy(), make_policy(linear_scores=True)
    obs = random_obs(8, 6) * 3.0
    torch.testing.assert_close(linear.scores(obs), plain.scores(obs))  # the linear term starts at zero
    with torch.no_grad():
        linear.linear_score.weight.copy_(torch.tensor([[0.0, -5.0, 0.0, 0.0, 0.0]]))
    # far outside the tanh encoder's range, the score still follows feature 1 exactly
    big = random_obs(4, 6) * 100.0
    torch.testing.assert_close(linear.scores(big) - plain.scores(big), -5.0 * big[..., 1])
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    torch.testing.assert_close(linear.scores(big[:, perm]), linear.scores(big)[:, perm])
    rebuilt = ReplicaScorerPolicy.from_checkpoint_dict(linear.to_checkpoint())
    torch.testing.assert_close(rebuilt.scores(big), linear.scores(big))
    assert ReplicaScorerPolicy.from_checkpoint_dict(plain.to_checkpoint()).linear_score is None
