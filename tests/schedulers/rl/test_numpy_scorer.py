"""NumpyScorer: the actor in NumPy scores as torch does and a deterministic PPORouter picks as ``act`` does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from schedulers.rl.numpy_scorer import NumpyScorer  # noqa: E402
from schedulers.rl.ppo_router import PPORouter  # noqa: E402
from schedulers.rl.scorer_network import ReplicaScorerPolicy  # noqa: E402


def trained_like(n_features: int, hidden: list[int], activation: str, linear: bool, seed: int) -> ReplicaScorerPolicy:
    """A policy with weights of a trained one's size (the score head's init gain 0.01 would make every score ~0)."""
    torch.manual_seed(seed)
    policy = ReplicaScorerPolicy(n_features, hidden_sizes=hidden, activation=activation, linear_scores=linear)
    with torch.no_grad():
        for p in policy.parameters():
            p.normal_(0.0, 0.5)
    return policy.eval()


@settings(max_examples=60, deadline=None)
@given(n_features=st.integers(1, 12), hidden=st.lists(st.integers(1, 48), min_size=1, max_size=3),
       activation=st.sampled_from(["tanh", "relu"]), linear=st.booleans(), replicas=st.integers(1, 9),
       seed=st.integers(0, 10_000), temperature=st.floats(0.05, 5.0))
def test_scores_and_picks_match_torch(n_features, hidden, activation, linear, replicas, seed, temperature):
    policy = trained_like(n_features, hidden, activation, linear, seed)
    policy.temperature = temperature
    rows = np.random.default_rng(seed).normal(0.0, 2.0, size=(replicas, n_features)).astype(np.float32)
    with torch.no_grad():
        expected = policy.scores(policy.as_tensor(rows))[0].numpy()
    got = NumpyScorer.from_policy(policy).scores(rows)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    router = PPORouter(policy)
    assert router.scorer is not None
    top = np.sort(expected)[::-1]
    if replicas == 1 or top[0] - top[1] > 1e-4:  # not a near-tie that rounding may break either way
        assert router.decide(None, rows=rows) == int(policy.act(rows, deterministic=True).action)


def test_exact_ties_go_to_the_lowest_index_as_in_torch():
    """Torch's argmax takes the lowest index on exact ties, and so does the NumPy scorer on scores that are
    exactly equal. Identical rows need not score exactly equal in NumPy: BLAS may round them apart in the
    last bits by how it blocks the product (seen on a fresh CI run), and then the higher score wins."""
    policy = trained_like(4, [8], "tanh", False, 1)
    rows = np.tile(np.arange(4, dtype=np.float32), (3, 1))
    assert int(policy.act(rows, deterministic=True).action) == 0
    scores = NumpyScorer.from_policy(policy).scores(rows)
    assert PPORouter(policy).decide(None, rows=rows) == int(np.flatnonzero(scores == scores.max())[0])
    assert NumpyScorer.from_policy(policy).pick(np.array([[1.0, 2.0, 3.0, 4.0]] * 2, dtype=np.float32)[:1]) == 0


def test_non_finite_rows_and_wrong_shapes_raise_as_the_torch_path_does():
    router = PPORouter(trained_like(3, [4], "relu", True, 2))
    with pytest.raises(ValueError, match="NaN or infinite"):
        router.decide(None, rows=np.array([[0.0, np.nan, 1.0]]))
    with pytest.raises(ValueError, match=r"\(replicas, 3\)"):
        router.decide(None, rows=np.zeros((2, 4)))


def test_gelu_policies_and_sampling_routers_keep_the_torch_path():
    gelu = PPORouter(trained_like(3, [4], "gelu", False, 3))
    assert gelu.scorer is None
    rows = np.random.default_rng(0).normal(size=(4, 3))
    assert gelu.decide(None, rows=rows) == int(gelu.policy.act(rows, deterministic=True).action)
    sampling = PPORouter(trained_like(3, [4], "tanh", False, 3), deterministic=False, seed=5)
    picks = {sampling.decide(None, rows=rows) for _ in range(40)}
    assert len(picks) > 1  # sampled, not the arg-max every time


def test_refresh_scorer_follows_weights_changed_in_place():
    policy = trained_like(2, [4], "tanh", False, 4)
    router = PPORouter(policy)
    rows = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    with torch.no_grad():
        policy.score_head.bias.zero_()
        policy.score_head.weight.zero_()
        policy.actor_encoder[0].weight.zero_()
        policy.actor_encoder[0].bias.copy_(torch.tensor([1.0, 0, 0, 0]))
    router.refresh_scorer()
    np.testing.assert_allclose(router.scorer.scores(rows), [0.0, 0.0])
