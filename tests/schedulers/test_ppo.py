"""PPO pieces against hand-computed values: GAE (termination vs truncation), losses, KL, controllers."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from rewardkit.normalizers import RunningMeanStd
from schedulers.rl.scorer_network import ReplicaScorerPolicy
from schedulers.rl.ppo import (
    EntropyController,
    RewardScaler,
    UpdateSettings,
    categorical_kl,
    explained_variance,
    ppo_loss,
    ppo_update,
)
from schedulers.rl.rollout import RolloutBatch, RolloutBuffer, compute_gae

torch.set_num_threads(1)

GAMMA, LAM = 0.9, 0.8
REWARDS = torch.tensor([1.0, 2.0, 3.0])
VALUES = torch.tensor([0.5, 1.0, 1.5])
LAST = torch.tensor(2.0)


def gae(terminated=(0, 0, 0), truncated=(0, 0, 0), final=(0.0, 0.0, 0.0)):
    return compute_gae(
        REWARDS, VALUES, torch.tensor(terminated, dtype=torch.bool), torch.tensor(truncated, dtype=torch.bool),
        LAST, torch.tensor(final), GAMMA, LAM,
    )


# ---- GAE -----------------------------------------------------------------------------------------
def test_gae_without_episode_end() -> None:
    # deltas: 1 + .9*1 - .5 = 1.4; 2 + .9*1.5 - 1 = 2.35; 3 + .9*2 - 1.5 = 3.3; gamma*lam = .72
    adv, ret = gae()
    expected = torch.tensor([1.4 + 0.72 * (2.35 + 0.72 * 3.3), 2.35 + 0.72 * 3.3, 3.3])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + VALUES)


def test_gae_termination_does_not_bootstrap() -> None:
    # Episode terminates at t=1: delta_1 = 2 - 1 = 1 and nothing flows back from t=2.
    adv, _ = gae(terminated=(0, 1, 0))
    torch.testing.assert_close(adv, torch.tensor([1.4 + 0.72 * 1.0, 1.0, 3.3]))


def test_gae_truncation_bootstraps_with_final_observation_value() -> None:
    # Truncated at t=1 with V(final obs) = 10: delta_1 = 2 + .9*10 - 1 = 10; V(s_2) (next episode) unused.
    adv, _ = gae(truncated=(0, 1, 0), final=(0.0, 10.0, 0.0))
    torch.testing.assert_close(adv, torch.tensor([1.4 + 0.72 * 10.0, 10.0, 3.3]))
    # The final value is ignored where the step was not truncated.
    adv2, _ = gae(truncated=(0, 1, 0), final=(99.0, 10.0, 99.0))
    torch.testing.assert_close(adv2, adv)


def test_gae_termination_wins_over_truncation_and_last_step_truncation() -> None:
    both, _ = gae(terminated=(0, 1, 0), truncated=(0, 1, 0), final=(0.0, 10.0, 0.0))
    term, _ = gae(terminated=(0, 1, 0))
    torch.testing.assert_close(both, term)
    # Truncation on the last step: bootstrap with the final value, not last_values.
    adv, _ = gae(truncated=(0, 0, 1), final=(0.0, 0.0, 4.0))
    assert adv[2].item() == pytest.approx(3 + 0.9 * 4.0 - 1.5)


def test_gae_vectorized_matches_per_env() -> None:
    g = torch.Generator().manual_seed(0)
    T, E = 7, 3
    r, v, fv = torch.randn(T, E, generator=g), torch.randn(T, E, generator=g), torch.randn(T, E, generator=g)
    term = torch.rand(T, E, generator=g) < 0.2
    trunc = torch.rand(T, E, generator=g) < 0.2
    last = torch.randn(E, generator=g)
    adv, ret = compute_gae(r, v, term, trunc, last, fv, 0.99, 0.95)
    for e in range(E):
        a_e, r_e = compute_gae(r[:, e], v[:, e], term[:, e], trunc[:, e], last[e], fv[:, e], 0.99, 0.95)
        torch.testing.assert_close(adv[:, e], a_e)
        torch.testing.assert_close(ret[:, e], r_e)


def test_gae_lambda_one_gives_discounted_returns() -> None:
    _, ret = compute_gae(REWARDS, VALUES, torch.zeros(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool),
                         LAST, torch.zeros(3), GAMMA, 1.0)
    assert ret[0].item() == pytest.approx(1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 2.0)


def test_gae_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="gamma"):
        compute_gae(REWARDS, VALUES, torch.zeros(3), torch.zeros(3), LAST, torch.zeros(3), 1.5, 0.9)
    with pytest.raises(ValueError, match="share a shape"):
        compute_gae(REWARDS, VALUES[:2], torch.zeros(3), torch.zeros(3), LAST, torch.zeros(3), 0.9, 0.9)


# ---- losses --------------------------------------------------------------------------------------
def test_clipped_surrogate_by_hand() -> None:
    ratios = torch.tensor([1.5, 0.5, 1.1, 0.9])
    old = torch.full((4,), math.log(0.5))
    new = (old + ratios.log()).requires_grad_(True)
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    zeros = torch.zeros(4)
    out = ppo_loss(new, old, adv, zeros, zeros, zeros, torch.zeros(4), clip_coef=0.2, normalize_advantages=False)
    # per sample: -min(rA, clip(r)A) = -1.2, -0.5, 1.1, 0.9
    assert out.policy_loss.item() == pytest.approx((-1.2 - 0.5 + 1.1 + 0.9) / 4)
    assert out.clip_fraction.item() == pytest.approx(0.5)
    expected_kl = sum((r - 1) - math.log(r) for r in ratios.tolist()) / 4
    assert out.approx_kl.item() == pytest.approx(expected_kl, rel=1e-5)
    out.policy_loss.backward()
    # The clipped sample (ratio 1.5 with A > 0) gets no gradient; ratio 0.5 with A > 0 does.
    assert new.grad[0].item() == 0.0
    assert new.grad[1].item() == pytest.approx(-0.5 / 4)


def test_advantage_normalization_per_minibatch() -> None:
    old = torch.zeros(3)
    new = torch.tensor([0.1, -0.1, 0.05])
    adv = torch.tensor([3.0, -1.0, 7.0])
    zeros = torch.zeros(3)
    a = ppo_loss(new, old, adv, zeros, zeros, zeros, zeros, 0.2, normalize_advantages=True)
    b = ppo_loss(new, old, 10 * adv + 4, zeros, zeros, zeros, zeros, 0.2, normalize_advantages=True)
    manual = (adv - adv.mean()) / (adv.std() + 1e-8)
    c = ppo_loss(new, old, manual, zeros, zeros, zeros, zeros, 0.2, normalize_advantages=False)
    assert a.policy_loss.item() == pytest.approx(b.policy_loss.item(), rel=1e-5)
    assert a.policy_loss.item() == pytest.approx(c.policy_loss.item(), rel=1e-6)


def test_value_loss_plain_and_clipped() -> None:
    z = torch.zeros(1)
    plain = ppo_loss(z, z, z, torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([0.9]), z, 0.2)
    assert plain.value_loss.item() == pytest.approx(0.5 * 0.01)
    # Clipped value = 0 + clip(1 - 0, -0.2, 0.2) = 0.2; error 0.7^2 is the larger one.
    clipped = ppo_loss(z, z, z, torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([0.9]), z, 0.2, clip_value=0.2)
    assert clipped.value_loss.item() == pytest.approx(0.5 * 0.49)


def test_categorical_kl_by_hand() -> None:
    p = torch.log(torch.tensor([[0.5, 0.5]]))
    q = torch.log(torch.tensor([[0.25, 0.75]]))
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert categorical_kl(p, q).item() == pytest.approx(expected, rel=1e-6)
    assert categorical_kl(p, p).item() == pytest.approx(0.0, abs=1e-7)
    # Shifting logits by a constant does not change the distribution.
    assert categorical_kl(p + 3.0, q - 1.0).item() == pytest.approx(expected, rel=1e-6)


def test_explained_variance() -> None:
    ret = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(ret, ret) == pytest.approx(1.0)
    assert explained_variance(torch.zeros(4), ret) == pytest.approx(0.0)
    assert math.isnan(explained_variance(ret, torch.ones(4)))


# ---- controllers and scalers ---------------------------------------------------------------------
def test_entropy_controller_moves_toward_target_within_bounds() -> None:
    c = EntropyController(target=0.5, mode="coef", rate=0.5, bounds=(0.1, 4.0))
    log4 = math.log(4)
    assert c.update(0.25 * log4, 4) > 1.0  # too little entropy: push the coefficient up
    up = c.scale
    assert c.update(0.5 * log4, 4) == pytest.approx(up)  # on target: unchanged
    for _ in range(100):
        c.update(0.0, 4)
    assert c.scale == pytest.approx(4.0)  # clamped
    for _ in range(100):
        c.update(log4, 4)
    assert c.scale == pytest.approx(0.1)
    state = c.state_dict()
    d = EntropyController(0.5)
    d.load_state_dict(state)
    assert d.scale == pytest.approx(0.1)
    with pytest.raises(ValueError):
        EntropyController(target=1.5)
    with pytest.raises(ValueError):
        EntropyController(target=0.5, mode="beta")


def test_running_mean_std_matches_batch_statistics() -> None:
    g = torch.Generator().manual_seed(0)
    data = torch.randn(1000, generator=g) * 3 + 5
    rms = RunningMeanStd(epsilon=0.0)
    for chunk in data.double().split(37):  # float64 in: statistics exact to float64 rounding
        rms.update(chunk)
    assert float(rms.mean) == pytest.approx(data.double().mean().item(), rel=1e-9)
    assert float(rms.var) == pytest.approx(data.double().var(unbiased=False).item(), rel=1e-9)
    single = RunningMeanStd(epsilon=0.0)
    for chunk in data.split(37):  # float32 in: statistics held in float32 (the dtype policy)
        single.update(chunk)
    assert single.var.dtype == torch.float32
    assert float(single.var) == pytest.approx(data.double().var(unbiased=False).item(), rel=1e-5)


def test_reward_scaler_divides_by_return_std_without_centring() -> None:
    g = torch.Generator().manual_seed(0)
    scaler = RewardScaler(n_envs=2, gamma=0.0)  # gamma 0: the "return" is the reward itself
    out = torch.stack([scaler(torch.randn(2, generator=g) * 100 + 50, torch.zeros(2)) for _ in range(3000)])
    assert scaler.std == pytest.approx(100, rel=0.1)  # the std of the returns...
    assert out.std().item() == pytest.approx(1.0, rel=0.1)  # ...becomes 1
    assert out.mean().item() == pytest.approx(0.5, abs=0.1)  # rewards are not centred: 50 / 100
    state = scaler.state_dict()
    other = RewardScaler(2, 0.0)
    other.load_state_dict(state)
    assert other.std == pytest.approx(scaler.std)


def test_reward_scaler_resets_returns_at_episode_end() -> None:
    scaler = RewardScaler(n_envs=2, gamma=1.0)
    scaler(torch.tensor([1.0, 1.0]), torch.tensor([False, True]))
    assert scaler.returns.tolist() == [1.0, 0.0]


# ---- rollout buffer and update -------------------------------------------------------------------
def test_rollout_buffer_fills_and_flattens() -> None:
    buf = RolloutBuffer(n_steps=2, n_envs=3, obs_shape=(4, 2))
    with pytest.raises(RuntimeError, match="holds 0 of 2"):
        buf.compute_advantages(torch.zeros(3), 0.9, 0.9)
    for t in range(2):
        buf.add(torch.full((3, 4, 2), float(t)), torch.tensor([0, 1, 1]), torch.zeros(3), torch.zeros(3),
                torch.ones(3), torch.zeros(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool), torch.zeros(3))
    with pytest.raises(RuntimeError, match="full"):
        buf.add(*([torch.zeros(3)] * 8))
    buf.compute_advantages(torch.zeros(3), 0.5, 1.0)
    torch.testing.assert_close(buf.returns[0], torch.full((3,), 1.5))
    batch = buf.batch()
    assert len(batch) == 6 and batch.obs.shape == (6, 4, 2)
    assert buf.action_shares(3) == pytest.approx([2 / 6, 4 / 6, 0.0])


def _bandit_batch(policy: ReplicaScorerPolicy, n: int = 256) -> RolloutBatch:
    """Replica 2 is always right (advantage +1), the others wrong (-1)."""
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(n, 4, 3, generator=g)
    obs[:, 2, 0] = 2.0  # a feature that marks the good replica
    with torch.no_grad():
        step = policy.act(obs, generator=g)
    adv = torch.where(step.action == 2, 1.0, -1.0)
    return RolloutBatch(obs, step.action, step.log_prob, step.value, adv, step.value + adv)


def test_ppo_update_improves_the_good_action() -> None:
    torch.manual_seed(0)
    policy = ReplicaScorerPolicy(3)
    batch = _bandit_batch(policy)
    p_before = policy.distribution(batch.obs).probs[:, 2].mean().item()
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    settings = UpdateSettings(n_epochs=4, minibatch_size=64, clip_coef=0.2, vf_coef=0.5, ent_coef=0.0)
    metrics = ppo_update(policy, opt, batch, settings, generator=torch.Generator().manual_seed(0))
    p_after = policy.distribution(batch.obs).probs[:, 2].mean().item()
    assert p_after > p_before + 0.02
    assert metrics["epochs"] == 4 and metrics["grad_steps"] == 16 and metrics["early_stop"] == 0
    assert metrics["approx_kl"] >= 0 and 0 <= metrics["clip_fraction"] <= 1
    for key in ("policy_loss", "value_loss", "entropy", "grad_norm", "kl_ref"):
        assert math.isfinite(metrics[key])


def test_ppo_update_target_kl_stops_early_and_grad_clip_bounds_steps() -> None:
    torch.manual_seed(0)
    policy = ReplicaScorerPolicy(3)
    batch = _bandit_batch(policy)
    opt = torch.optim.SGD(policy.parameters(), lr=1.0)
    before = [p.detach().clone() for p in policy.parameters()]
    settings = UpdateSettings(n_epochs=5, minibatch_size=256, clip_coef=0.2, vf_coef=0.5, ent_coef=0.0,
                              max_grad_norm=1e-3, target_kl=1e-12)
    metrics = ppo_update(policy, opt, batch, settings)
    # Epoch 1's only minibatch starts at ratio 1 (KL 0) and steps; epoch 2's exceeds the target.
    assert metrics["grad_steps"] == 1 and metrics["epochs"] == 1 and metrics["early_stop"] == 1
    # One SGD step of lr 1 with the global gradient norm clipped to 1e-3 moves parameters by at most 1e-3.
    moved = torch.sqrt(sum(((p.detach() - b) ** 2).sum() for p, b in zip(policy.parameters(), before, strict=True)))
    assert moved.item() <= 1e-3 * 1.0001


def test_kl_penalty_keeps_policy_near_reference() -> None:
    def run(kl_coef: float) -> float:
        torch.manual_seed(0)
        policy = ReplicaScorerPolicy(3)
        reference = copy.deepcopy(policy).requires_grad_(False)
        batch = _bandit_batch(policy)
        opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
        settings = UpdateSettings(n_epochs=8, minibatch_size=64, clip_coef=10.0, vf_coef=0.5, ent_coef=0.0, kl_coef=kl_coef)
        ppo_update(policy, opt, batch, settings, reference=reference, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            return categorical_kl(policy.logits(batch.obs), reference.logits(batch.obs)).mean().item()

    free, anchored = run(0.0), run(50.0)
    assert anchored < 0.5 * free
