"""Golden routing decisions of ``PolicyRequestRouter``, recorded before the router was cut down to routing.

Every policy a live cluster can run (``policy_names(simulated=False)``, some with parameters, the
learned one deterministic and sampling) routes one scripted run through the router as Ray drives it,
without a cluster: replica updates with fresh, stale and missing stats, candidates in Ray's order,
in subsets and with a replica the router does not know, requests with and without token ids, first
tokens, completions, and a replica set that grows and shrinks. Each step's ranks and the final
fallback counts must stay bit-identical. ``python tests/schedulers/integrations/test_ray_router_golden.py``
rewrites ``fixtures/ray_router_golden.json`` (only ever on the code the values were first recorded on).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.serve.request_router", reason="needs Ray Serve: pip install 'ray[serve]==2.60.0' (the ray extra)")

from ray.serve._private.common import DeploymentHandleSource, DeploymentID, ReplicaID, RequestMetadata  # noqa: E402
from ray.serve.request_router import PendingRequest  # noqa: E402

from schedulers.integrations.ray_serve import PolicyRequestRouter, RoutedRequest  # noqa: E402
from schedulers.routing.policy import policy_names  # noqa: E402

GOLDEN = Path(__file__).parent / "fixtures" / "ray_router_golden.json"
DEPLOYMENT = DeploymentID(name="engines", app_name="golden")
#: the policies with parameters written out, besides every live name as it is registered
WITH_PARAMS = ("cache_aware:balance_abs_threshold=2", "affinity_token_load:affinity_threshold=0.5",
               "llm_d_default:prefix_weight=1", "ray_prefix_affinity:imbalanced_threshold=1",
               "least_load:measured_throughput=0", "dynamo_kv:router_temperature=0.5")
STEPS = 90


def routers() -> list[str]:
    """Every router the golden run covers: each live name, the parameterised ones, ``ppo`` sampling."""
    return [n for n in policy_names(simulated=False)] + list(WITH_PARAMS) + ["ppo-sampling"]


class Replica:
    """What Ray hands a router about a replica: its id and its routing stats."""

    def __init__(self, name: str) -> None:
        self.replica_id = ReplicaID(name, DEPLOYMENT)
        self.routing_stats: dict[str, Any] = {}
        self.max_ongoing_requests = 1000
        self.multiplexed_model_ids: set = set()
        self.node_id = self.availability_zone = None

    async def get_queue_len(self, *, deadline_s: float) -> int:
        return 0


class Clock:
    """The router's view clock, moved by the script alone."""

    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def checkpoint(tmp: Path) -> str:
    """A learned policy of random weights (seeded), written to ``tmp``."""
    torch = pytest.importorskip("torch")
    from schedulers.rl.scorer_network import ReplicaScorerPolicy
    from schedulers.routing.observation import FEATURE_NAMES

    # orthogonal initialisation gives other bits on another number of threads (other tests set 1);
    # the golden run was recorded at this machine's default of 2
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(11)
        path = tmp / "policy.pt"
        torch.save(ReplicaScorerPolicy(len(FEATURE_NAMES)).to_checkpoint(), path)
    finally:
        torch.set_num_threads(threads)
    return str(path)


def pending(request: RoutedRequest | None, rid: str) -> PendingRequest:
    return PendingRequest(args=[request] if request is not None else [], kwargs={},
                          metadata=RequestMetadata(request_id=rid, internal_request_id=rid))


def router_kwargs(router_name: str, ckpt: str) -> tuple[str, dict[str, Any]]:
    """The policy spec and ``request_router_kwargs`` of a golden router name."""
    kwargs: dict[str, Any] = {"seed": 7, "stale_s": 5.0}
    if not router_name.startswith("ppo"):
        return router_name, kwargs
    kwargs["checkpoint"] = ckpt
    if router_name == "ppo-sampling":
        kwargs["deterministic"] = False
    return "ppo", kwargs


def poll(pool: dict[str, Replica], members: list[str], step: int, base: float, rng: np.random.Generator) -> None:
    """A stats poll: fresh stats for most replicas, stale ones for r1 in steps 20-29, none for r2 in 30-39."""
    for i, m in enumerate(members):
        report = {"at": base + step * 1e-3 + i * 1e-6, "waiting": float(rng.integers(0, 4)),
                  "running": float(rng.integers(0, 6)), "kv_usage": float(rng.uniform(0, 0.9)),
                  "kv_capacity_tokens": float(rng.choice([4096.0, 8192.0])),
                  "prefix_blocks": float(rng.integers(0, 40)), "decode_rate": float(rng.uniform(20, 80))}
        if 20 <= step < 30 and m == "r1":
            report["at"] = base - 100.0  # stale
        if 30 <= step < 40 and m == "r2":
            report = {}  # missing
        pool[m].routing_stats = report


def candidates(pool: dict[str, Replica], members: list[str], ray_order: list[int], step: int) -> list[Replica]:
    """What Ray offers at ``step``: every replica in its order, a true subset, a stranger, a wrapper made anew."""
    offered = [pool[members[i]] for i in ray_order]
    if step % 11 == 5:
        offered = offered[:2]
    if step % 17 == 8:
        offered = offered + [Replica("stranger")]  # one the router was never given
    if step % 13 == 9:
        offered = [Replica(members[0]), *offered[1:]]
    return offered


def request(step: int, systems: list[list[int]], rng: np.random.Generator) -> RoutedRequest | None:
    """The step's request: none among the arguments, a text prompt (no ids), or token ids sharing a prefix."""
    if step % 10 == 7:
        return None
    if step % 5 == 3:
        return RoutedRequest("/v1/completions", b"{}", int(rng.integers(5, 300)), [], stream=True)
    ids = systems[int(rng.integers(0, 3))][: int(rng.integers(16, 65))] + \
        [int(t) for t in rng.integers(3, 2000, int(rng.integers(1, 90)))]
    return RoutedRequest("/v1/completions", b"{}", len(ids), ids, stream=True)


def progress(router: PolicyRequestRouter, open_requests: list[tuple[str, str, str]], rng: np.random.Generator) -> None:
    """Open requests get first tokens or complete."""
    for item in list(open_requests):
        roll = float(rng.uniform())
        if roll < 0.3:
            router.first_token(item[1], int(rng.integers(1, 4)))
        elif roll < 0.45:
            router.on_request_completed(ReplicaID(item[2], DEPLOYMENT), item[0])
            open_requests.remove(item)


#: the replica set from a step on, and the order Ray lists it in
MEMBERS = {0: (["r0", "r1", "r2"], [2, 0, 1]), 45: (["r0", "r1", "r2", "r3"], [3, 1, 0, 2]), 70: (["r1", "r2", "r3"], [2, 0, 1])}


def scripted_run(router_name: str, ckpt: str) -> dict[str, Any]:
    """The ranks (replica names) of every step of the script and the router's final counts."""
    spec, kwargs = router_kwargs(router_name, ckpt)
    clock = Clock()
    rng = np.random.default_rng(2024)
    systems = [[int(t) for t in rng.integers(3, 2000, 64)] for _ in range(3)]

    async def run() -> dict[str, Any]:
        router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
        router.view_clock = clock
        router.initialize_state(policy=spec, **kwargs)
        pool = {name: Replica(name) for name in ("r0", "r1", "r2", "r3")}
        ranks_out: list[Any] = []
        open_requests: list[tuple[str, str, str]] = []  # (internal id, request key, replica)
        members, ray_order = MEMBERS[0]
        router.update_replicas([pool[m] for m in members])
        base = time.time()
        for step in range(STEPS):
            clock.now += float(rng.uniform(0.002, 0.08))
            if step in MEMBERS and step:  # the replica set changes (a leaving replica's requests leave with it)
                members, ray_order = MEMBERS[step]
                router.update_replicas([pool[m] for m in members])
            if step % 6 == 2:
                poll(pool, members, step, base, rng)
                if step % 12 == 2:
                    router.update_replicas([pool[m] for m in members])  # as Ray hands new stats over
            offered = candidates(pool, members, ray_order, step)
            routed = request(step, systems, rng)
            rid = uuid.UUID(int=int(rng.integers(0, 2**62)) * 97 + step).hex
            pr = pending(routed, rid)
            ranks = await router.choose_replicas(offered, pr)
            ranks_out.append([[r.replica_id.unique_id for r in rank] for rank in ranks])
            if ranks and ranks[0][0].replica_id.unique_id in members:
                chosen = ranks[0][0].replica_id
                router.on_request_routed(pr, chosen, None)
                if routed is not None:
                    open_requests.append((rid, routed.key, chosen.unique_id))
            progress(router, open_requests, rng)
        stats = router.stats()
        return {"ranks": ranks_out, "decisions": stats["decisions"], "fallbacks": stats["fallbacks"]}

    return asyncio.run(run())


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("router_name", routers())
def test_routing_decisions_are_the_recorded_ones(router_name: str, golden: dict[str, Any], tmp_path: Path) -> None:
    """Each step's ranks and the fallback counts are the ones recorded before the router was rebuilt."""
    assert router_name in golden, f"{router_name} was not recorded: a new live policy needs its golden run recorded"
    got = scripted_run(router_name, checkpoint(tmp_path))
    expected = golden[router_name]
    first_diff = next((k for k, (a, b) in enumerate(zip(got["ranks"], expected["ranks"], strict=True)) if a != b), None)
    assert first_diff is None, f"step {first_diff}: {got['ranks'][first_diff]} != {expected['ranks'][first_diff]}"
    assert got == expected


def test_the_golden_run_is_not_trivial(golden: dict[str, Any]) -> None:
    """The script reaches every replica, the fallbacks of both kinds and a subset decision."""
    picks = {rank[0][0] for run in golden.values() for rank in run["ranks"] if rank}
    assert picks == {"r0", "r1", "r2", "r3"}
    assert all(run["fallbacks"]["missing"] > 0 and run["fallbacks"]["stale"] > 0 for run in golden.values())
    assert len({json.dumps(run["ranks"]) for run in golden.values()}) > len(golden) // 2  # the policies differ


if __name__ == "__main__":  # record
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = checkpoint(Path(tmp))
        record = {name: scripted_run(name, ckpt) for name in routers()}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(record, indent=0, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
