"""Golden values recorded before the serving half was rebuilt on its own floor, and before the
routing policies became registered classes.

Moving code must not move numbers: the simulator's arrivals for seeds 101-105 stay bit-identical,
the live env's per-request rewards and the gateway's decisions (replica and observation rows, what
its decision log writes) stay identical on recorded stub runs (a scripted sequence of sends,
tokens, completions and scrapes on a fake clock), and the serving benchmark's client-side routing
routes the same requests the same way. ``python tests/schedulers/test_golden_behaviour.py``
rewrites ``fixtures/golden.json`` (only ever on the code the values were first recorded on).
``affinity_token_load`` was re-recorded when it was brought to llm-d's current prefix-cache affinity
filter (a deliberate change of behaviour), and ``llm_d_default`` recorded when it was added.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "fixtures" / "golden.json"
#: the shared traces beside the project
TRACES = ROOT.parent / "shared/vidur/traces"
SEEDS = (101, 102, 103, 104, 105)
LIVE_ROUTERS = ("round_robin", "random", "lor", "jsq", "least_kv", "least_tokens", "least_prefill", "power_of_two",
                "prefix_aware", "cap_jsq", "cap_least_tokens", "cap_least_prefill", "adaptive", "ppo")
#: the prefix-cache baselines through the gateway (recorded before the policies became registered classes)
PREFIX_ROUTERS = ("cache_aware", "affinity_token_load", "cache_aware:cache_threshold=0.5:balance_abs_threshold=4",
                  "llm_d_default")
#: every router a simulator runs, with some written with parameters: each decides on scripted snapshots
SIM_ROUTERS = LIVE_ROUTERS + ("oracle", "cache_aware", "affinity_token_load", "affinity_token_load:exploration_probability=0",
                              "cache_aware:balance_abs_threshold=2:balance_rel_threshold=1.2", "llm_d_default")
#: Vidur global schedulers registered by schedulers.sim.registration (Vidur's own three are not ours)
VIDUR_SCHEDULERS = ("jsq", "least_kv", "least_tokens", "least_prefill", "power_of_two", "cap_jsq", "cap_least_tokens",
                    "cap_least_prefill", "adaptive", "oracle", "llm_d_default")


def digest(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


# ---- what is recorded ---------------------------------------------------------------------------
def arrival_digests(tmp: Path) -> dict[str, str]:
    """``sample_arrivals`` and the load generator's lengths for seeds 101-105 of two env files."""
    try:
        from schedulers.shared.arrivals import sample_arrivals
        from schedulers.shared.workload import load_workload
    except ImportError:  # the code the values were recorded on
        from schedulers.shared.arrivals import sample_arrivals
        from schedulers.sim.env_config import load_env_config as load_workload
    from schedulers.loadgen.sources import lengths_from_env

    out = {}
    for name in ("codellama34b_tp2_4r", "live_tiny"):
        text = (ROOT / "configs" / "envs" / f"{name}.yaml").read_text()
        path = tmp / f"{name}.yaml"
        path.write_text(text.replace("../shared/vidur/traces", str(TRACES)).replace(
            "configs/rewards/", str(ROOT / "configs/rewards") + "/"))
        workload = load_workload(path)
        for seed in SEEDS:
            a = sample_arrivals(workload, seed)
            out[f"{name}/{seed}/sim"] = digest(a.arrived_at, a.prefill_tokens, a.decode_tokens)
            lengths = lengths_from_env(str(path), seed)
            out[f"{name}/{seed}/loadgen"] = digest(lengths.arrival_s, lengths.prompt_tokens, lengths.output_tokens)
    return out


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def ppo_checkpoint(tmp: Path) -> Path:
    import torch

    from schedulers.rl.scorer_network import ReplicaScorerPolicy
    from schedulers.routing.observation import FEATURE_NAMES

    torch.manual_seed(1234)
    path = tmp / "policy.pt"
    torch.save(ReplicaScorerPolicy(len(FEATURE_NAMES)).to_checkpoint(), path)
    return path


def scripted_prompts(rng: np.random.Generator, n: int) -> list[tuple[int, list[int]]]:
    """Token-id prompts, some sharing one of three system prefixes, some plain text (no ids)."""
    systems = [list(rng.integers(3, 2000, size=64)) for _ in range(3)]
    out = []
    for _ in range(n):
        kind = rng.integers(3)
        own = [int(x) for x in rng.integers(3, 2000, size=int(rng.integers(8, 120)))]
        if kind == 0:
            out.append((len(own), own))
        elif kind == 1:
            ids = [int(x) for x in systems[int(rng.integers(3))]] + own
            out.append((len(ids), ids))
        else:
            out.append((max(1, len(own) * 5 // 4), []))
    return out


def gateway_decisions(router: str, checkpoint: Path | None) -> list[Any]:
    """A recorded stub run replayed into the gateway: 120 requests on 4 replicas (one declared half
    speed), tokens streaming, completions, failures, an unhealthy spell and engine scrapes."""
    from schedulers.live.view import LiveClusterView
    from schedulers.serve.gateway import Gateway, GatewaySettings

    speeds = [1.0, 1.0, 0.5, 1.0]
    urls = [f"http://127.0.0.1:{9100 + i}" for i in range(4)]
    gw = Gateway(GatewaySettings(urls, router="ppo" if checkpoint else router,
                                 checkpoint=str(checkpoint) if checkpoint else None, declared_speeds=speeds, seed=7))
    clock = FakeClock()
    gw.view = LiveClusterView(4, speeds, kv_capacity=gw.settings.kv_capacity_blocks, clock=clock)
    rng = np.random.default_rng(2026)
    inflight: list[int] = []
    out = []
    for i, (tokens, ids) in enumerate(scripted_prompts(rng, 120)):
        clock.t += float(rng.exponential(0.03))
        if i == 40:
            gw.set_healthy(1, False)
        if i == 70:
            gw.set_healthy(1, True)
        if i % 25 == 10:
            for r in range(4):
                gw.view.engine_reported(r, {"vllm:num_requests_waiting": float(rng.integers(0, 4)),
                                            "vllm:num_requests_running": float(rng.integers(0, 6)),
                                            "vllm:kv_cache_usage_perc": float(rng.random() * 0.5)})
                gw.view.engine_capacity(r, float(16 * (1000 + 500 * r)))
        exclude = {int(rng.integers(4))} if i % 17 == 3 else set()
        decided = gw.decide(tokens, ids, exclude)
        assert decided is not None
        replica, rows = decided
        out.append([replica, digest(np.asarray(rows.round(6), dtype=np.float64))])
        inflight.append(gw.view.sent(replica, tokens, ids))
        for key in list(inflight):
            u = rng.random()
            if u < 0.45:
                clock.t += 0.001
                gw.view.token(key, int(rng.integers(1, 4)))
            elif u < 0.6:
                gw.view.finished(key, completed=bool(rng.random() < 0.9))
                inflight.remove(key)
    return out


def gateway_rewards() -> list[Any]:
    from schedulers.serve.gateway import Gateway, GatewaySettings

    gw = Gateway(GatewaySettings(["http://127.0.0.1:9100"], reward=str(ROOT / "configs/rewards/request_ttft_live.yaml")))
    cases = [(0.1, 0.5, 20, 30), (None, 0.3, 5, 0), (0.4, 2.0, 100, 64), (0.0, 0.01, 1, 1), (1.5, 9.0, 400, 100)]
    return [list(gw.request_reward(*case)) for case in cases]


def live_rewards(tmp: Path) -> list[Any]:
    """The live env's per-request rewards of recorded request outcomes (ok, late, failed, timed out)."""
    import yaml

    from schedulers.live.env import LiveRoutingEnv
    from schedulers.shared.engine_requests import RequestRecord

    data = {"trace_file": str(TRACES / "splitwise_conv.csv"), "qps": 40.0,
            "requests_per_episode": 8, "reward_config": str(ROOT / "configs/rewards/request_ttft_live.yaml"),
            "live": {"backends": ["http://127.0.0.1:9100", "http://127.0.0.1:9101"], "model": "stub-model",
                     "length_scale": 0.01, "max_model_len": 64, "timeout_s": 7}}
    path = tmp / "live.yaml"
    path.write_text(yaml.safe_dump(data))
    env = LiveRoutingEnv(str(path))
    try:
        rng = np.random.default_rng(5)
        records = []
        for i in range(30):
            r = RequestRecord(i, float(i) * 0.1, int(rng.integers(1, 60)), int(rng.integers(1, 30)))
            r.sent_s = r.arrival_s + float(rng.choice([0.0, 0.0, 0.02, 0.3]))
            kind = i % 5
            if kind != 4:
                r.status, r.e2e_s = 200, float(rng.uniform(0.01, 2.0))
                r.ttft_s = None if kind == 3 else float(rng.uniform(0.001, r.e2e_s))
                r.output_tokens = int(rng.integers(1, 30))
            else:
                r.status, r.error = 500, "HTTP 500: stub failure"
            records.append(r)
        info: dict[str, Any] = {}
        total = env.credit_records(list(enumerate(records)), info)
        return [total, info["credits"], info["reward_terms"]]
    finally:
        env.close()


def client_routing_decisions(router: str, checkpoint: Path | None, monkeypatch: Any) -> list[Any]:
    """``bench_serving``'s client-side routing over a scripted run (its clock faked)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_serving
    from schedulers.shared.requests import RequestSpec

    clock = FakeClock()
    monkeypatch.setattr(bench_serving.time, "perf_counter", clock)
    routing = bench_serving.ClientRouting([f"http://127.0.0.1:{9100 + i}" for i in range(3)], router,
                                          str(checkpoint) if checkpoint else None, [1.0, 0.5, 1.0], seed=3)
    rng = np.random.default_rng(99)
    events = []
    out = []
    for i, (tokens, ids) in enumerate(scripted_prompts(rng, 90)):
        clock.t += float(rng.exponential(0.05))
        ids = ids or [int(x) for x in rng.integers(3, 2000, size=tokens)]
        spec = RequestSpec(i, clock.t, tuple(ids), int(rng.integers(1, 20)))
        url, label, event = routing(spec)
        out.append(label)
        events.append(event)
        for ev in list(events):
            u = rng.random()
            if u < 0.5:
                clock.t += 0.002
                ev("token")
            elif u < 0.65:
                ev("done")
                events.remove(ev)
    return out


def scripted_snapshots(n: int = 300) -> list[tuple[Any, float, np.ndarray]]:
    """(snapshot, prompt tokens, true speeds): varied load, speeds, KV use and prefix matches on 5 replicas,
    many of them tied (small integer loads) so that tie-breaking is recorded too."""
    from schedulers.routing.snapshot import ReplicaSnapshot

    rng = np.random.default_rng(4242)
    out = []
    for _ in range(n):
        k = 5
        waiting = rng.integers(0, 4, size=k).astype(float)
        running = rng.integers(0, 6, size=k).astype(float)
        match = np.where(rng.random(k) < 0.5, 0.0, rng.choice([0.25, 0.5, 0.85, 1.0], size=k))
        snap = ReplicaSnapshot.build(
            waiting=waiting, running=running, kv_blocks=rng.integers(0, 1000, size=k),
            kv_capacity=np.full(k, 1000.0), prefill_tokens=rng.integers(0, 3, size=k) * 400.0,
            decoded_tokens=rng.integers(0, 500, size=k), waiting_prefill_tokens=waiting * 100,
            declared_speed=rng.choice([0.5, 1.0], size=k), measured_speed=rng.uniform(0.3, 1.2, size=k),
            prefix_match=match, prefix_blocks=rng.integers(0, 4, size=k) * 10.0)
        out.append((snap, float(rng.integers(1, 800)), rng.uniform(0.2, 1.0, size=k)))
    return out


def policy_decisions(router: str, checkpoint: Path | None) -> list[int]:
    """The picks of ``router`` (reset with seed 11) on :func:`scripted_snapshots`, with the observation rows
    a learned policy reads and the true speeds the oracle reads."""
    from schedulers.routing.observation import build_observation
    from schedulers.routing.policy import make_policy

    policy = make_policy("ppo", str(checkpoint), seed=11) if checkpoint else make_policy(router, seed=11)
    picks = []
    for snap, tokens, speeds in scripted_snapshots():
        rows = None if policy.observation is None else build_observation(snap, tokens, policy.observation)
        picks.append(int(policy.decide(snap, tokens, rows=rows,
                                       true_speed=speeds if policy.needs_true_speed else None)))
    return picks


def sim_episodes(router: str, checkpoint: Path | None) -> dict[str, Any]:
    """One episode of ``configs/envs/tiny.yaml`` (seed 3) routed by ``router`` in the simulator env: the
    digest of its actions and rewards, and the episode's return."""
    from schedulers.environments import policy_action
    from schedulers.routing.policy import make_policy
    from schedulers.sim.env import VidurRoutingEnv
    from schedulers.sim.env_config import load_env_config

    env = VidurRoutingEnv(load_env_config(ROOT / "configs/envs/tiny.yaml"))
    try:
        policy = make_policy("ppo", str(checkpoint), seed=3) if checkpoint else make_policy(router, seed=3)
        obs, _ = env.reset(seed=3)
        actions, rewards = [], []
        while True:
            action = policy_action(policy, env, obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            actions.append(action)
            rewards.append(reward)
            if terminated or truncated:
                break
        return {"actions": digest(np.asarray(actions)), "rewards": digest(np.asarray(rewards, dtype=np.float64)),
                "return": float(np.sum(rewards))}
    finally:
        env.close()


def vidur_scheduler_run(name: str) -> str:
    """Vidur's own Simulator run to the end with our global scheduler ``name`` (tiny.yaml, seed 5): the
    digest of every request's replica and completion time."""
    import random

    from vidur.simulator import Simulator

    from schedulers.sim.env_config import load_env_config
    from schedulers.sim.simulation_config import to_simulation_config
    from schedulers.sim.vidur_ids import reset_vidur_ids

    reset_vidur_ids()
    py_state, np_state = random.getstate(), np.random.get_state()
    try:
        config = to_simulation_config(load_env_config(ROOT / "configs/envs/tiny.yaml"), global_scheduler=name, seed=5)
        sim = Simulator(config)
        requests = sorted((e._request for _, e in sim._event_queue), key=lambda r: r.id)
        sim.run()
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
    return digest(np.asarray([r.completed_at for r in requests], dtype=np.float64),
                  np.asarray([r.num_processed_tokens for r in requests]))


# ---- the tests ----------------------------------------------------------------------------------
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def plain(value: Any) -> Any:
    """``value`` as JSON reads it back (tuples as lists)."""
    return json.loads(json.dumps(value))


def test_arrivals_for_seeds_101_to_105_are_bit_identical(tmp_path):
    assert arrival_digests(tmp_path) == golden()["arrivals"]


@pytest.mark.parametrize("router", LIVE_ROUTERS)
def test_the_gateways_decisions_are_unchanged(router, tmp_path):
    checkpoint = ppo_checkpoint(tmp_path) if router == "ppo" else None
    assert gateway_decisions(router, checkpoint) == golden()["gateway"][router]


@pytest.mark.parametrize("router", PREFIX_ROUTERS)
def test_the_gateways_prefix_baseline_decisions_are_unchanged(router):
    assert gateway_decisions(router, None) == golden()["gateway_prefix"][router]


@pytest.mark.parametrize("router", SIM_ROUTERS)
def test_every_policys_decisions_on_scripted_snapshots_are_unchanged(router, tmp_path):
    checkpoint = ppo_checkpoint(tmp_path) if router == "ppo" else None
    assert policy_decisions(router, checkpoint) == golden()["policies"][router]


@pytest.mark.vidur
@pytest.mark.parametrize("router", SIM_ROUTERS)
def test_every_policys_simulated_episode_is_unchanged(router, tmp_path, vidur_predictor):
    checkpoint = ppo_checkpoint(tmp_path) if router == "ppo" else None
    assert sim_episodes(router, checkpoint) == golden()["sim"][router]


@pytest.mark.vidur
@pytest.mark.parametrize("name", VIDUR_SCHEDULERS)
def test_every_registered_vidur_scheduler_runs_as_before(name, vidur_predictor):
    assert vidur_scheduler_run(name) == golden()["vidur"][name]


def test_the_gateways_request_rewards_are_unchanged():
    assert plain(gateway_rewards()) == golden()["gateway_rewards"]


def test_the_live_envs_per_request_rewards_are_unchanged(tmp_path):
    assert plain(live_rewards(tmp_path)) == golden()["live_rewards"]


@pytest.mark.parametrize("router", ("round_robin", "jsq", "least_prefill", "prefix_aware", "cap_least_prefill", "ppo"))
def test_bench_serving_routes_the_same_requests_the_same_way(router, tmp_path, monkeypatch):
    checkpoint = ppo_checkpoint(tmp_path) if router == "ppo" else None
    assert client_routing_decisions(router, checkpoint, monkeypatch) == golden()["bench_serving"][router]


if __name__ == "__main__":  # record
    import tempfile

    class _Patch:
        def setattr(self, obj: Any, name: str, value: Any) -> None:
            setattr(obj, name, value)

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = ppo_checkpoint(Path(tmp))
        import time as _time

        real = _time.perf_counter
        record = {
            "arrivals": arrival_digests(Path(tmp)),
            "gateway": {r: gateway_decisions(r, ckpt if r == "ppo" else None) for r in LIVE_ROUTERS},
            "gateway_prefix": {r: gateway_decisions(r, None) for r in PREFIX_ROUTERS},
            "policies": {r: policy_decisions(r, ckpt if r == "ppo" else None) for r in SIM_ROUTERS},
            "sim": {r: sim_episodes(r, ckpt if r == "ppo" else None) for r in SIM_ROUTERS},
            "vidur": {name: vidur_scheduler_run(name) for name in VIDUR_SCHEDULERS},
            "gateway_rewards": gateway_rewards(),
            "live_rewards": live_rewards(Path(tmp)),
        }
        bench = {}
        for r in ("round_robin", "jsq", "least_prefill", "prefix_aware", "cap_least_prefill", "ppo"):
            bench[r] = client_routing_decisions(r, ckpt if r == "ppo" else None, _Patch())
            _time.perf_counter = real
        record["bench_serving"] = bench
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
