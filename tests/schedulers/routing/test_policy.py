"""The policy registry (schedulers/routing/policy.py): ``@register_policy``, what a policy class declares,
and a policy installed from outside the package through the ``schedulers.policies`` entry point, run by
``rewardkit evaluate --baselines`` and ``rewardkit gateway --router``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import numpy as np
import pytest

from schedulers.routing.policy import (ENTRY_POINT_GROUP, HeuristicPolicy, Policy, make_policy, policy_class,
                                       policy_names, register_policy, registered_policies)
from schedulers.routing.snapshot import ReplicaSnapshot

ROOT = Path(__file__).resolve().parents[3]

PLUGIN = '''
import numpy as np
from schedulers.routing.policy import HeuristicPolicy


class LastReplica(HeuristicPolicy):
    """Every request to the highest-numbered replica: easy to recognize in any log."""

    def pick(self, snapshot, prompt_tokens, true_speed):
        return snapshot.num_replicas - 1
'''


def install_plugin(where: Path, name: str = "last_replica") -> Path:
    """A package ``tinyrouters`` and its dist-info declaring ``name`` in the entry-point group, under ``where``."""
    (where / "tinyrouters").mkdir(parents=True)
    (where / "tinyrouters" / "__init__.py").write_text(PLUGIN)
    info = where / "tinyrouters-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyrouters\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = tinyrouters:LastReplica\n")
    return where


def test_every_builtin_is_a_registered_policy_class_that_declares_what_it_needs():
    policies = registered_policies()
    assert {"round_robin", "jsq", "cache_aware", "affinity_token_load", "llm_d_default", "oracle", "ppo"} <= set(policies)
    assert all(isinstance(cls, type) and issubclass(cls, Policy) for cls in policies.values())
    assert policies["oracle"].needs_true_speed and not policies["oracle"].live
    assert policies["ppo"].needs_checkpoint and policies["ppo"].learned
    assert policies["cache_aware"].Params is not None and policies["jsq"].Params is None
    assert policies["adaptive"].reads_speed == "measured" and policies["cap_jsq"].reads_speed == "declared"
    assert "oracle" not in policy_names(simulated=False) and "llm_d_default" in policy_names(simulated=False)


def test_register_policy_as_a_decorator_and_its_refusals():
    @register_policy("test_second_replica")
    class SecondReplica(HeuristicPolicy):
        def pick(self, snapshot, prompt_tokens, true_speed):
            return 1

    policy = make_policy("test_second_replica", seed=0)
    assert isinstance(policy, SecondReplica) and policy.name == "test_second_replica"
    assert policy.decide(ReplicaSnapshot.build(waiting=[0, 0, 0])) == 1
    assert policy_class("test_second_replica") is SecondReplica
    with pytest.raises(ValueError, match="already registered under 'test_second_replica'"):
        register_policy("test_second_replica", type("Other", (SecondReplica,), {}))
    with pytest.raises(TypeError, match="expected a Policy subclass"):
        register_policy("test_not_a_policy", dict)
    with pytest.raises(ValueError, match="without ':' or '='"):
        register_policy("a:b", SecondReplica)
    with pytest.raises(ValueError, match="test_second_replica takes no parameters"):
        make_policy("test_second_replica:k=1")


def test_a_router_spec_with_a_key_twice_is_refused():
    with pytest.raises(ValueError, match="cache_threshold is given twice"):
        make_policy("cache_aware:cache_threshold=0.5:cache_threshold=0.9")


def test_a_policy_from_an_entry_point_is_found_by_name(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(install_plugin(tmp_path, "test_ep_last_replica")))
    policy = make_policy("test_ep_last_replica", seed=0, simulated=False)
    assert type(policy).__module__ == "tinyrouters"
    assert policy.decide(ReplicaSnapshot.build(waiting=[0, 0, 0, 0])) == 3
    assert "test_ep_last_replica" in policy_names()


def test_a_broken_entry_point_is_named_when_its_router_is_asked_for(tmp_path, monkeypatch):
    info = tmp_path / "brokenrouters-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenrouters\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ntest_broken = no_such_module:Router\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="router 'test_broken': entry point 'no_such_module:Router'.*ModuleNotFoundError"):
        make_policy("test_broken")


def _dist_info(where: Path, dist: str, lines: str) -> None:
    info = where / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}\n")


def test_a_plugin_that_calls_sys_exit_at_import_is_reported_and_never_ends_the_process(tmp_path, monkeypatch):
    (tmp_path / "exitingrouters.py").write_text("import sys\nsys.exit('no GPU here')\n")
    _dist_info(tmp_path, "exitingrouters", "test_exiting = exitingrouters:Router")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="unknown router 'test_no_such_router'"):
        make_policy("test_no_such_router")  # every unknown name reads the entry points: the process lives on
    with pytest.raises(ValueError, match="router 'test_exiting': entry point 'exitingrouters:Router'.*SystemExit: no GPU here"):
        make_policy("test_exiting")


def test_plugin_names_that_shadow_a_builtin_or_each_other_are_warned_about(tmp_path, monkeypatch):
    from schedulers.routing.policy import PluginWarning

    (tmp_path / "shadowrouters").mkdir()
    (tmp_path / "shadowrouters" / "__init__.py").write_text(PLUGIN + "\n\nclass Other(LastReplica):\n    pass\n")
    _dist_info(tmp_path, "shadowing", "round_robin = shadowrouters:LastReplica\ntest_twice = shadowrouters:LastReplica")
    _dist_info(tmp_path, "shadowing2", "test_twice = shadowrouters:Other")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(PluginWarning) as record:
        make_policy("test_twice", seed=0)
    messages = sorted(str(w.message) for w in record)
    assert len(messages) == 2, messages
    assert any("'round_robin' (entry point 'shadowrouters:LastReplica'" in m and "already taken by schedulers." in m
               for m in messages)
    # which of two distributions is read first is the environment's order: the second is named, with the first
    first, second = "'shadowrouters:LastReplica'", "'shadowrouters:Other'"
    assert any((f"'test_twice' (entry point {second}" in m and f"taken by entry point {first}" in m)
               or (f"'test_twice' (entry point {first}" in m and f"taken by entry point {second}" in m)
               for m in messages), messages
    assert type(make_policy("round_robin", seed=0)).__module__.startswith("schedulers.")  # the built-in keeps its name


@pytest.mark.vidur
def test_rewardkit_evaluate_runs_an_entry_point_policy_beside_the_baselines(tmp_path, monkeypatch, capsys,
                                                                             vidur_predictor):
    from rewardkit.cli import main

    monkeypatch.syspath_prepend(str(install_plugin(tmp_path / "site", "test_eval_last_replica")))
    out = tmp_path / "out"
    assert main(["evaluate", "--env", str(ROOT / "configs/envs/tiny.yaml"), "--seeds", "101",
                 "--baselines", "round_robin,llm_d_default,test_eval_last_replica", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["routers"] == ["round_robin", "llm_d_default", "test_eval_last_replica"]
    assert "test_eval_last_replica" in results["heuristics"]
    rows = {row["router"]: row for row in results["episodes"]}
    # every request on one of two replicas queues more than spread over both
    assert rows["test_eval_last_replica"]["ttft_p99"] > rows["round_robin"]["ttft_p99"]


def test_rewardkit_gateway_routes_with_an_entry_point_policy(tmp_path, monkeypatch):
    from schedulers.engines.gateway_process import GatewayProcess
    from schedulers.engines.replicas import free_port
    from schedulers.engines.stub import ServerThread, StubEngine
    from schedulers.live.decision_log import read_decision_log

    site = install_plugin(tmp_path / "site", "last_replica")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    servers = [ServerThread(StubEngine(name).app(), free_port()).start() for name in ("a", "b", "c")]
    log = tmp_path / "decisions.jsonl"
    gateway = GatewayProcess([s.url for s in servers], "last_replica", log=tmp_path / "gateway.log",
                             extra=["--decision-log", str(log)])
    try:
        gateway.start()
        with httpx.Client(timeout=30) as client:
            for _ in range(4):
                resp = client.post(gateway.url + "/v1/completions",
                                   json={"model": "m", "prompt": [1, 2, 3], "max_tokens": 3})
                assert resp.status_code == 200
    finally:
        gateway.stop()
        for s in servers:
            s.stop()
    decisions = read_decision_log(log).decisions
    assert [(d.action, d.router, d.status) for d in decisions] == [(2, "last_replica", "ok")] * 4


def test_make_policy_is_a_lookup_that_checks_what_the_class_declares():
    with pytest.raises(ValueError, match="router 'ppo' needs a checkpoint"):
        make_policy("ppo")
    with pytest.raises(ValueError, match="router 'oracle' reads the replicas' true speeds"):
        make_policy("oracle", simulated=False)
    with pytest.raises(ValueError, match="router 'jsq' is a heuristic: expected no checkpoint or options, got checkpoint"):
        make_policy("jsq", checkpoint="x")
    assert make_policy("jsq", threads=4).decide(ReplicaSnapshot.build(waiting=[3, 0])) == 1  # threads: ignored
    assert np.isfinite(make_policy("llm_d_default").decide(ReplicaSnapshot.build(waiting=[1, 0])))


def test_make_policy_builds_a_policys_parameters_once(monkeypatch):
    """A spec's parameters are read, merged with the keyword options and built into the Params dataclass
    once; parse_router_spec alone still checks them."""
    from dataclasses import dataclass

    from schedulers.routing import policy as policy_module

    built: list[float] = []

    @dataclass(frozen=True)
    class CountedParams:
        k: float = 1.0

        def __post_init__(self) -> None:
            built.append(self.k)
            if self.k < 0:
                raise ValueError(f"k: expected a number >= 0, got {self.k!r}")

    class Counted(HeuristicPolicy):
        Params = CountedParams

        def pick(self, snapshot, prompt_tokens, true_speed):
            return 0

    monkeypatch.setitem(policy_module._REGISTRY, "counted", Counted)
    policy = make_policy("counted:k=2")
    assert built == [2.0] and policy.params.k == 2.0
    built.clear()
    assert make_policy("counted:k=2", k=3).params.k == 3.0 and built == [3.0]
    built.clear()
    assert make_policy("counted:k=2", simulated=False).params.k == 2.0 and built == [2.0]
    with pytest.raises(ValueError, match=r"router 'counted:k=-1': k: expected a number >= 0, got -1.0"):
        make_policy("counted:k=-1")
    built.clear()
    assert policy_module.parse_router_spec("counted:k=4") == ("counted", {"k": 4.0}) and built == [4.0]
