"""``LiveClusterView``: measured speed from live decode rates, the same snapshot routers read in Vidur."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from schedulers.shared.prometheus import kv_capacity_tokens
from schedulers.live.view import LiveClusterView
from schedulers.routing.policy import make_policy


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def serve(view: LiveClusterView, clock: Clock, replica: int, tokens: int, per_token_s: float) -> None:
    """One request on ``replica``: its first token now, then one every ``per_token_s``."""
    key = view.sent(replica, prompt_tokens=10)
    clock.now += 0.01
    view.token(key)
    for _ in range(tokens - 1):
        clock.now += per_token_s
        view.token(key)
    view.finished(key)


def test_a_replica_decoding_at_half_its_peers_pace_reads_half_its_declared_speed():
    clock = Clock()
    view = LiveClusterView(3, [1.0, 1.0, 2.0], clock=clock)
    assert view.measured_speeds().tolist() == [1.0, 1.0, 2.0]  # nothing measured: declared
    for _ in range(5):
        serve(view, clock, 0, 20, 0.01)   # 100 tokens/s at declared 1
        serve(view, clock, 1, 20, 0.02)   # 50 tokens/s at declared 1: slowed to half
        serve(view, clock, 2, 20, 0.005)  # 200 tokens/s at declared 2: as declared
    measured = view.measured_speeds()
    assert measured == pytest.approx([1.0, 0.5, 2.0], rel=1e-6)
    assert view.snapshot().measured_speed.tolist() == pytest.approx(measured.tolist())
    # a slowed replica with an empty queue: cap_least_prefill (declared speeds) sends the next request
    # there, adaptive (expected wait over the measured speeds) does not
    same = LiveClusterView(3, clock=clock)
    for _ in range(5):
        serve(same, clock, 0, 20, 0.01)
        serve(same, clock, 1, 20, 0.02)
        serve(same, clock, 2, 20, 0.01)
    same.sent(0, prompt_tokens=100)
    same.sent(2, prompt_tokens=100)  # waiting: 100 prompt tokens queued on replicas 0 and 2
    snap = same.snapshot()
    cap, adaptive = make_policy("cap_least_prefill", seed=0), make_policy("adaptive", seed=0)
    assert {cap.decide(snap, 500) for _ in range(10)} == {1}
    assert {adaptive.decide(snap, 500) for _ in range(20)} == {0, 2}
    assert LiveClusterView(3, [1.0, 1.0, 2.0], clock=clock, measure_speed=False).measured_speeds().tolist() == [1, 1, 2]


def test_slow_replicas_do_not_drag_the_reference_down():
    """Two fast replicas (declared 1) decode at 100 tokens/s, two slow ones (declared 0.5) at 10: the fast ones
    read 1 (not 1.8, as a median over all four would make them), the slow ones their true 0.1."""
    clock = Clock()
    view = LiveClusterView(4, [1.0, 1.0, 0.5, 0.5], clock=clock)
    for _ in range(5):
        for replica, per_token in ((0, 0.01), (1, 0.01), (2, 0.1), (3, 0.1)):
            serve(view, clock, replica, 20, per_token)
    assert view.measured_speeds() == pytest.approx([1.0, 1.0, 0.1, 0.1], rel=1e-6)


def test_failed_or_single_token_requests_do_not_move_the_estimate():
    clock = Clock()
    view = LiveClusterView(2, clock=clock)
    key = view.sent(0, 10)
    view.token(key)
    clock.now += 1.0
    view.finished(key)  # one token: no decode rate
    key = view.sent(1, 10)
    view.token(key)
    clock.now += 0.1
    view.token(key)
    view.finished(key, completed=False)  # cancelled: not a completion
    assert np.isnan(view.decode_rate).all()


# ---- engines' scraped numbers plus what was sent since ---------------------------------------
def scraped(view: LiveClusterView, replica: int, kv: float, waiting: float = 0, running: float = 0) -> None:
    view.engine_reported(replica, {"vllm:kv_cache_usage_perc": kv, "vllm:num_requests_waiting": waiting,
                                   "vllm:num_requests_running": running})


def test_requests_sent_after_a_scrape_count_on_top_of_the_engines_numbers():
    clock = Clock()
    view = LiveClusterView(2, block_size=16, kv_capacity=100, clock=clock)
    before = view.sent(0, prompt_tokens=64)  # the engine has it (running) when it is scraped
    view.token(before)
    clock.now = 1.0
    scraped(view, 0, kv=0.25, running=1)
    scraped(view, 1, kv=0.0)
    clock.now = 1.1
    view.sent(0, prompt_tokens=160)  # after the scrape: 10 blocks the engine has not reported
    snap = view.snapshot()
    assert snap.kv_blocks[0] == pytest.approx(25 + 10)  # 0.25 x 100, the earlier request not counted twice
    assert snap.waiting[0] == 1 and snap.running[0] == 1
    assert snap.kv_blocks[1] == 0


def test_least_kv_spreads_the_requests_that_arrive_between_two_scrapes():
    """Every engine reported an empty cache; the next requests must not all go to one replica."""
    clock = Clock()
    view = LiveClusterView(3, block_size=16, clock=clock)
    for i in range(3):
        scraped(view, i, kv=0.0)
    least_kv = make_policy("least_kv", seed=0)
    chosen = []
    for _ in range(3):
        clock.now += 0.01
        replica = least_kv.decide(view.snapshot(), 64)
        view.sent(replica, prompt_tokens=64)
        chosen.append(replica)
    assert sorted(chosen) == [0, 1, 2]


def test_the_engines_own_kv_capacity_replaces_the_default():
    clock = Clock()
    view = LiveClusterView(2, block_size=16, kv_capacity=1024, clock=clock)
    view.engine_capacity(0, 16 * 200)
    view.engine_capacity(1, float("nan"))  # nothing usable: the default stays
    scraped(view, 0, kv=0.5)
    snap = view.snapshot()
    assert list(snap.kv_capacity) == [200, 1024] and snap.kv_blocks[0] == pytest.approx(100)


def test_kv_capacity_is_read_from_vllms_cache_config_info():
    text = ('# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n'
            'vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="512"} 1.0\n')
    assert kv_capacity_tokens(text) == 16 * 512
    assert kv_capacity_tokens("vllm:num_requests_running 2\n") is None
    assert kv_capacity_tokens('vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1.0\n') is None


def test_a_snapshot_read_after_the_view_changed_holds_the_values_of_when_it_was_taken():
    """Fields are computed on first read, yet a snapshot kept while requests come and go does not move."""
    clock = Clock()
    view = LiveClusterView(3, [1.0, 1.0, 2.0], clock=clock, window_s=1.0)
    serve(view, clock, 0, 5, 0.01)
    view.sent(1, prompt_tokens=40, prompt_ids=list(range(40)))
    scraped(view, 2, kv=0.5, waiting=2)
    clock.now += 0.5
    kept = view.snapshot(list(range(40)))
    assert kept.prefill_tokens.tolist() == [0, 40, 0]  # one field read, the rest not built yet
    expected = {name: np.array(getattr(view.snapshot(list(range(40))), name))
                for name in kept.__dataclass_fields__}
    key = view.sent(0, prompt_tokens=64, prompt_ids=list(range(64)))  # the view changes every field's source
    view.token(key, 3)
    scraped(view, 2, kv=0.9, waiting=7)
    clock.now += 2.0
    view.finished(key)
    for name, value in expected.items():
        assert np.array_equal(getattr(kept, name), value), name
    assert view.snapshot().prefill_tokens.tolist() == [0, 40, 0] and view.snapshot().running[0] == 0


# ---- the load fields in plain Python agree with the array formula --------------------------------
@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(1, 6))
def test_the_load_fields_match_the_array_formula_with_missing_and_stale_engine_numbers(data, n):
    """waiting/running raised to the engine's count plus what was sent since (NaN: not reported), KV from the
    engine's usage when it is fresh, busy when anything is outstanding: as np.fmax/np.where/np.clip give them."""
    clock = Clock()
    view = LiveClusterView(n, block_size=16, kv_capacity=64, clock=clock, engine_stale_s=1.0)
    maybe_nan = st.one_of(st.just(float("nan")), st.floats(0, 20))
    for replica in range(n):
        for _ in range(data.draw(st.integers(0, 3))):
            key = view.sent(replica, data.draw(st.integers(1, 200)))
            if data.draw(st.booleans()):
                view.token(key, data.draw(st.integers(1, 5)))
        if data.draw(st.booleans()):
            clock.now = data.draw(st.floats(0, 3))
            view.engine_reported(replica, {"vllm:num_requests_waiting": data.draw(maybe_nan),
                                           "vllm:num_requests_running": data.draw(maybe_nan),
                                           "vllm:kv_cache_usage_perc": data.draw(st.one_of(maybe_nan, st.floats(-1, 2)))})
        view.sent(replica, data.draw(st.integers(1, 50)))  # after the scrape: counted on top
    clock.now = 3.0
    snap = view.snapshot()
    waiting, running, _, _, kv, new_waiting, new_running, new_kv = np.array(view._sums)
    engine_at, engine_waiting, engine_running, engine_kv, capacity = (np.array(v, dtype=float) for v in (
        view.engine_at, view.engine_waiting, view.engine_running, view.engine_kv, view.capacity))
    fresh = clock.now - engine_at <= view.engine_stale_s
    waiting = np.where(fresh, np.fmax(waiting, engine_waiting + new_waiting), waiting)
    running = np.where(fresh, np.fmax(running, engine_running + new_running), running)
    known = fresh & ~np.isnan(engine_kv)
    kv = np.where(known, np.clip(engine_kv, 0.0, 1.0) * capacity + new_kv, kv)
    assert np.array_equal(snap.waiting, waiting) and np.array_equal(snap.running, running)
    assert np.array_equal(snap.kv_blocks, kv)
    assert np.array_equal(snap.busy, ((waiting + running) > 0).astype(float))


def test_a_policy_that_never_reads_prefix_match_does_not_hash_the_prompt(monkeypatch):
    view = LiveClusterView(2, block_size=4)
    view.sent(0, prompt_tokens=12, prompt_ids=list(range(12)))
    calls = []
    original = view.prefix.block_hashes
    monkeypatch.setattr(view.prefix, "block_hashes", lambda ids: calls.append(len(ids)) or original(ids))
    assert make_policy("least_prefill").decide(view.snapshot(list(range(12))), 12) == 1
    assert calls == []
    snap = view.snapshot(list(range(12)))
    assert snap.prefix_match.tolist() == [1.0, 0.0] and calls == [12]


@settings(max_examples=80, deadline=None)
@given(speeds=st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=1, max_size=7), data=st.data())
def test_measured_speeds_match_the_array_formula(speeds, data):
    """Decode rates over the median of the fastest declared class's, clipped; unmeasured replicas read their declared speed."""
    from schedulers.bounds import MIN_SPEED
    from schedulers.routing.observation import MAX_SPEED

    view = LiveClusterView(len(speeds), speeds)
    rates = data.draw(st.lists(st.one_of(st.just(float("nan")), st.floats(0.01, 500)), min_size=len(speeds),
                               max_size=len(speeds)))
    view.decode_rate = np.array(rates)
    known, declared = ~np.isnan(view.decode_rate), np.array(speeds)
    expected = declared.copy()
    if known.any():
        reference = float(np.median((view.decode_rate[known] / declared[known])[declared[known] >= declared[known].max()]))
        expected[known] = np.clip(view.decode_rate[known] / reference, MIN_SPEED, MAX_SPEED)
    assert np.array_equal(view.measured_speeds(), expected)


def test_a_replicas_own_count_of_prefix_blocks_counts_when_larger_than_the_mirrors():
    view = LiveClusterView(3, block_size=4)
    view.sent(0, 8, list(range(8)))  # the mirror: 2 blocks on replica 0
    view.prefix_reported(1, 5.0)
    view.prefix_reported(0, 1.0)  # fewer than the mirror holds: the mirror's count stands
    snap = view.snapshot()
    assert snap.prefix_blocks.tolist() == [2.0, 5.0, 0.0]
    view.prefix_reported(1, float("nan"))  # garbage is ignored, the last good report stands
    view.prefix_reported(2, -3.0)
    assert view.snapshot().prefix_blocks.tolist() == [2.0, 5.0, 0.0]
    assert snap.prefix_blocks.tolist() == [2.0, 5.0, 0.0]  # a snapshot taken before keeps its values
