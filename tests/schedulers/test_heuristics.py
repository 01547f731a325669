"""Heuristics on crafted replica states, the cluster tracker, and registration into Vidur."""

from __future__ import annotations

import sys
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from schedulers.routing.heuristics import (
    HEURISTICS,
    HEURISTIC_NAMES,
    ReplicaSnapshot,
    argmin_random,
    choose,
    jsq,
    least_kv,
    least_prefill,
    least_tokens,
    lor,
    power_of_two,
    random_choice,
    round_robin,
)


@pytest.fixture
def crafted() -> ReplicaSnapshot:
    """Four replicas on which each heuristic has a different unique answer."""
    return ReplicaSnapshot.build(
        waiting=[0, 2, 1, 0],
        running=[5, 0, 2, 1],  # outstanding requests [5, 2, 3, 1] -> jsq: 3
        kv_blocks=[60, 10, 40, 90],  # least_kv: 1
        prefill_tokens=[0, 3000, 100, 2000],  # least_prefill: 0
        decoded_tokens=[900, 0, 700, 50],  # outstanding tokens [900, 3000, 800, 2050] -> least_tokens: 2
    )


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_each_heuristic_on_a_crafted_state(crafted):
    assert jsq(crafted, rng()) == 3
    assert least_kv(crafted, rng()) == 1
    assert least_tokens(crafted, rng()) == 2
    assert least_prefill(crafted, rng()) == 0
    assert lor(crafted) == 0  # waiting [0, 2, 1, 0]: tie between 0 and 3 goes to the lowest index
    assert [round_robin(k, 4) for k in range(6)] == [0, 1, 2, 3, 0, 1]
    assert {name: choose(name, crafted, rng(), decision_index=5) for name in ("round_robin", "jsq", "least_kv")} == {
        "round_robin": 1,
        "jsq": 3,
        "least_kv": 1,
    }


def test_least_tokens_counts_generated_output_not_future_output():
    # replica 0: a long prompt still to prefill; replica 1: many tokens already generated
    snap = ReplicaSnapshot.build(prefill_tokens=[1500, 0], decoded_tokens=[0, 1600])
    assert least_tokens(snap, rng()) == 0
    assert least_prefill(snap, rng()) == 1
    assert np.array_equal(snap.outstanding_tokens, [1500, 1600])


def test_ties_are_broken_uniformly_and_reproducibly():
    snap = ReplicaSnapshot.build(waiting=[1, 0, 1, 0], running=[0, 1, 0, 1], kv_blocks=[5, 9, 5, 5])
    picks = Counter(jsq(snap, g) for g in [rng(7)] for _ in range(4000))
    assert set(picks) == {0, 1, 2, 3} and all(abs(c / 4000 - 0.25) < 0.03 for c in picks.values())
    kv = Counter(least_kv(snap, g) for g in [rng(7)] for _ in range(3000))
    assert set(kv) == {0, 2, 3} and all(abs(c / 3000 - 1 / 3) < 0.04 for c in kv.values())
    g1, g2 = rng(3), rng(3)
    assert [jsq(snap, g1) for _ in range(50)] == [jsq(snap, g2) for _ in range(50)]
    unique = ReplicaSnapshot.build(waiting=[3, 2, 1, 4])
    assert all(argmin_random(unique.waiting, rng(s)) == 2 for s in range(20))


def test_power_of_two_picks_the_less_loaded_of_a_random_pair():
    snap = ReplicaSnapshot.build(waiting=[0, 1, 2, 3])
    g = rng(11)
    counts = Counter(power_of_two(snap, g) for _ in range(6000))
    # pairs {0,x}: 3 of 6 -> 0 wins half the time; {1,2},{1,3}: 1/3; {2,3}: 1/6; 3 never wins
    assert counts[3] == 0
    for replica, share in ((0, 1 / 2), (1, 1 / 3), (2, 1 / 6)):
        assert abs(counts[replica] / 6000 - share) < 0.03
    assert power_of_two(ReplicaSnapshot.build(waiting=[9, 0]), rng()) == 1
    assert power_of_two(ReplicaSnapshot.build(waiting=[4]), rng()) == 0


def test_random_choice_is_uniform_and_seeded():
    g = rng(5)
    counts = Counter(random_choice(3, g) for _ in range(3000))
    assert set(counts) == {0, 1, 2} and all(abs(c / 3000 - 1 / 3) < 0.04 for c in counts.values())
    assert [random_choice(3, rng(1)) for _ in range(5)] == [random_choice(3, rng(1)) for _ in range(5)]


def test_snapshot_helpers_and_validation(crafted):
    after = crafted.with_assignment(1, 700)
    assert after.waiting[1] == crafted.waiting[1] + 1
    assert after.prefill_tokens[1] == crafted.prefill_tokens[1] + 700
    assert after.waiting_prefill_tokens[1] == crafted.waiting_prefill_tokens[1] + 700
    assert crafted.waiting[1] == 2  # the original is unchanged
    assert np.allclose(crafted.kv_fraction, np.array([60, 10, 40, 90]) / 1000)
    with pytest.raises(ValueError, match="expected shape"):
        ReplicaSnapshot.build(waiting=[1, 2], running=[1, 2, 3])
    with pytest.raises(TypeError, match="unknown snapshot fields"):
        ReplicaSnapshot.build(waiting=[1], future_output=[3])
    with pytest.raises(ValueError, match="unknown heuristic 'fastest'"):
        choose("fastest", crafted, rng())
    assert set(HEURISTICS) <= set(HEURISTIC_NAMES) and {"round_robin", "random", "lor"} <= set(HEURISTIC_NAMES)


# ---- the tracker that builds snapshots from Vidur objects ------------------------------------------------
def _request(prompt: int, output: int, arrived_at: float = 0.0):
    from vidur.entities import Request

    return Request(arrived_at=arrived_at, num_prefill_tokens=prompt, num_decode_tokens=output)


def _replica(queue=(), allocated=None, blocks=0, capacity=1000, batches=0):
    return SimpleNamespace(
        _request_queue=list(queue),
        _allocation_map=dict(allocated or {}),
        _num_allocated_blocks=blocks,
        _cache_config=SimpleNamespace(num_blocks=capacity),
        _num_running_batches=batches,
    )


@pytest.mark.vidur
def test_tracker_snapshot_from_vidur_requests():
    from schedulers.sim.tracker import ClusterTracker

    waiting = _request(300, 50)  # queued on replica 0
    partial = _request(100, 10)  # replica 0: 40 of 100 prompt tokens processed
    partial._num_processed_tokens = 40
    decoding = _request(50, 999)  # replica 1: prefill done (+1 first token) and 4 more generated
    decoding._num_processed_tokens = 55
    decoding._is_prefill_complete = True
    restarted = _request(30, 20)  # replica 1: preempted after generating 8 tokens
    replicas = [
        _replica(queue=[waiting], allocated={partial.id: 7}, blocks=7, batches=1),
        _replica(queue=[restarted], allocated={decoding.id: 4}, blocks=4),
    ]
    tracker = ClusterTracker(replicas, recent_window_s=10.0)
    for req, replica in ((waiting, 0), (partial, 0), (decoding, 1), (restarted, 1)):
        tracker.assign(req, replica)
    restarted._num_processed_tokens = 38
    restarted.restart()  # Vidur folds the 38 processed tokens into the prompt
    snap = tracker.snapshot()
    assert list(snap.waiting) == [1, 1] and list(snap.running) == [1, 1]
    assert list(snap.kv_blocks) == [7, 4] and list(snap.busy) == [1, 0]
    assert list(snap.prefill_tokens) == [300 + 60, 0 + 38]
    assert list(snap.decoded_tokens) == [0, 5 + 8]
    assert list(snap.waiting_prefill_tokens) == [300, 38]
    # the future output length is never read
    for req in (waiting, partial, decoding, restarted):
        req._num_decode_tokens += 1000
    again = tracker.snapshot()
    for name in ReplicaSnapshot.__dataclass_fields__:
        assert np.array_equal(getattr(again, name), getattr(snap, name)), name


@pytest.mark.vidur
def test_tracker_completions_first_tokens_and_area():
    from schedulers.sim.tracker import ClusterTracker

    a, b = _request(10, 5, arrived_at=1.0), _request(10, 5, arrived_at=2.0)
    tracker = ClusterTracker([_replica(), _replica()], recent_window_s=5.0)
    tracker.sync(1.0)
    tracker.assign(a, 0)
    tracker.sync(2.0)
    tracker.assign(b, 1)
    a._prefill_completed_at, a._completed, a._completed_at = 2.5, True, 3.0
    b._prefill_completed_at = 3.5
    result = tracker.sync(4.0)
    assert result.completed == [a] and result.first_tokens == [a, b]
    assert result.dt == 2.0
    assert result.in_system_area == pytest.approx((3.0 - 2.0) + (4.0 - 2.0))
    assert tracker.in_system == 1 and tracker.num_completed == 1
    assert list(tracker.snapshot().recent_completions) == [1, 0]
    assert list(tracker.recent_ttft) == [(2.5, 1.5), (3.5, 1.5)]
    tracker.sync(8.5)  # a completed at 3.0, now outside the 5 s window
    assert list(tracker.snapshot().recent_completions) == [0, 0]
    assert not tracker.recent_e2e


# ---- registration into Vidur ---------------------------------------------------------------------------
@pytest.mark.vidur
def test_schedulers_registered_with_vidur():
    from vidur.config import BaseGlobalSchedulerConfig
    from vidur.scheduler import GlobalSchedulerRegistry

    from schedulers.sim import registration as reg

    for name, (key, config_cls, scheduler_cls) in reg.REGISTERED.items():
        assert str(key) == name
        assert GlobalSchedulerRegistry.get_class(key) is scheduler_cls
        assert config_cls.get_type() is key
        assert BaseGlobalSchedulerConfig.create_from_type(key).__class__ is config_cls
        assert isinstance(reg.global_scheduler_config(name), config_cls)
    assert reg.global_scheduler_config("lor").get_type().name == "LOR"
    with pytest.raises(ValueError, match="unknown global scheduler 'best'"):
        reg.global_scheduler_config("best")


@pytest.mark.vidur
def test_vidur_cli_accepts_registered_scheduler(tmp_path, monkeypatch):
    """Vidur's own argument parser builds a config with our scheduler and the PPO checkpoint option."""
    import schedulers.sim.registration as reg
    from vidur.config import SimulationConfig

    argv = [
        "vidur",
        "--global_scheduler_config_type",
        "ppo",
        "--ppo_global_scheduler_config_checkpoint",
        "runs/x/policy.pt",
        "--metrics_config_output_dir",
        str(tmp_path),
        "--no-metrics_config_store_plots",
        "--no-metrics_config_enable_chrome_trace",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    config = SimulationConfig.create_from_cli_args()
    gs = config.cluster_config.global_scheduler_config
    assert isinstance(gs, reg.PpoGlobalSchedulerConfig) and gs.checkpoint == "runs/x/policy.pt"
    monkeypatch.setattr(sys, "argv", argv[:1] + ["--global_scheduler_config_type", "least_prefill"] + argv[5:])
    config = SimulationConfig.create_from_cli_args()
    assert isinstance(config.cluster_config.global_scheduler_config, reg.LeastPrefillGlobalSchedulerConfig)


def test_make_router_hook():
    from schedulers.routing.router import HeuristicRouter, Router, make_router, register_router, router_names

    router = make_router("least_tokens")
    assert isinstance(router, HeuristicRouter) and isinstance(router, Router)
    assert "ppo" in router_names()

    class Fixed:
        name = "fixed"

        def __init__(self, replica):
            self.replica = replica

        def reset(self, seed=None):
            pass

        def act(self, obs, env):
            return self.replica

    register_router("fixed_test", Fixed, replace=True)
    assert make_router("fixed_test", replica=1).act(None, None) == 1
    with pytest.raises(ValueError, match="unknown router 'nope'"):
        make_router("nope")
    with pytest.raises(TypeError, match="takes no options"):
        make_router("jsq", checkpoint="x")
