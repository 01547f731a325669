"""bench_ray_serve's router names, checked without Ray running: ``ray:prefix_affinity:k=v`` passes its
thresholds to Ray's ``PrefixCacheAffinityRouter``, policy specs reach ``PolicyRequestRouter``, and a
bad name is refused before any engine starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("ray.serve.request_router", reason="needs Ray Serve: pip install 'ray[serve]==2.60.0' (the ray extra)")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_ray_serve  # noqa: E402

#: the live run's routers as docs/results/ray-serve.md gives them
TUNED = ("ray:pow2,ray:prefix_affinity,ray:prefix_affinity:imbalanced_threshold=4,ray:least_prefill,ray:cache_aware,"
         "ray:cache_aware:balance_abs_threshold=2,ray:llm_d_default,ray:affinity_token_load:affinity_threshold=0.65,"
         "ray:ppo,gateway:least_prefill,gateway:cache_aware:balance_abs_threshold=2,"
         "gateway:affinity_token_load:affinity_threshold=0.65,gateway:ppo").split(",")


def test_prefix_affinity_thresholds_become_the_ray_routers_kwargs() -> None:
    config = bench_ray_serve.ray_router_config("prefix_affinity:imbalanced_threshold=1:match_rate_threshold=0.5", None, 0.5)
    assert config.request_router_class.endswith("TimedPrefixCacheAffinity")
    assert config.request_router_kwargs == {"imbalanced_threshold": 1.0, "match_rate_threshold": 0.5}
    assert bench_ray_serve.ray_router_config("prefix_affinity:imbalanced_threshold=inf", None, 0.5) \
        .request_router_kwargs == {"imbalanced_threshold": float("inf")}


def test_policy_specs_go_to_the_policy_router_whole() -> None:
    config = bench_ray_serve.ray_router_config("affinity_token_load:max_ttft_penalty_ms=10", None, 0.5)
    assert config.request_router_class == "schedulers.integrations.ray_serve.PolicyRequestRouter"
    assert config.request_router_kwargs == {"policy": "affinity_token_load:max_ttft_penalty_ms=10"}


def test_the_live_runs_router_names_are_all_valid() -> None:
    assert bench_ray_serve.router_errors(TUNED) == []
    doc = (Path(__file__).resolve().parents[2] / "docs" / "results" / "ray-serve.md").read_text()
    assert "--routers " + ",".join(TUNED) + " \\\n" in doc


def test_bad_router_names_are_refused_with_the_name_and_key(tmp_path: Path) -> None:
    errors = bench_ray_serve.router_errors(["ray:prefix_affinity:imbalance_threshold=1",
                                            "ray:prefix_affinity:match_rate_threshold=high",
                                            "gateway:llm_d_default:prefix_wieght=1", "ray:nope"])
    assert len(errors) == 4
    assert "unknown key 'imbalance_threshold'" in errors[0] and "imbalanced_threshold" in errors[0]
    assert "match_rate_threshold: expected a number, got 'high'" in errors[1]
    assert errors[2].startswith("gateway:llm_d_default:prefix_wieght=1: ") and "prefix_wieght" in errors[2]
    assert errors[3].startswith("ray:nope: ")
    assert bench_ray_serve.main(["--routers", "ray:pow2,ray:prefix_affinity:imbalance_threshold=1",
                                 "--out", str(tmp_path)]) == 2


def test_the_report_gives_routing_cost_against_ray_default_at_the_median_and_the_stages() -> None:
    run = {"answered": 2, "requests": 2, "ttft_ms": [10.0, 20.0], "e2e_ms": [30.0, 40.0], "hits": 1, "queries": 2,
           "decision_ms": [0.2, 0.4], "routing_ms": [3.0, 5.0], "fallbacks": {}, "router_decisions": 2,
           "stage_ms": {"stats": [0.01, 0.02], "policy": [0.1, 0.3]}, "wall_s": 10.0}
    second = dict(run, decision_ms=[0.1, 0.2], routing_ms=[2.0, 2.0])
    pow2 = dict(run, decision_ms=[], stage_ms={}, routing_ms=[4.0, 4.0])
    timing = {"least_prefill": {"p50": 0.1, "p99": 0.2, "stage_p50": {"stats": 0.01, "policy": 0.05}}}
    text = bench_ray_serve.report({"setup": "s", "results": {"ray:pow2": [pow2, pow2], "ray:least_prefill": [run, second]},
                                   "decision_isolated": timing, "decision_paced": timing})
    assert "| routing per request, p50 / p99 (ms) | routing p50 / Ray default's [rounds] |" in text
    # pooled 0.1, 0.2, 0.2, 0.4 (decisions); routing 2, 2, 3, 5 against 4 x4: p50 2.5 / 4; rounds 4/4 and 2/4
    assert "| 0.200 / 0.394 | 2.50 / 4.94 | 0.62x [0.50-1.00] | - |" in text
    assert "| `ray:pow2` | 4/4 | 15 | 20 | 35 | 50.0% | - | 4.00 / 4.00 | 1.00x [1.00-1.00] | - |" in text
    assert "| router | stats | policy |" in text and "| `ray:least_prefill` | 0.015 / 0.020 | 0.200 / 0.300 |" in text
    assert "back to back" in text and "1/qps s apart" in text
    assert "| `least_prefill` | 0.100 | 0.200 | stats 0.010, policy 0.050 |" in text


def test_a_runs_router_stats_keep_the_measured_requests_alone_not_the_warm_up() -> None:
    warmed = {"decisions": 3, "fallbacks": {"missing": 2, "stale": 0}, "decision_ms": [9.0, 1.0, 1.0],
              "routing_ms": [5.0, 4.0, 4.0], "stage_ms": {"policy": [7.0, 1.0, 1.0]}, "policy": "least_prefill"}
    final = {"decisions": 5, "fallbacks": {"missing": 2, "stale": 1}, "decision_ms": [9.0, 1.0, 1.0, 0.2, 0.3],
             "routing_ms": [5.0, 4.0, 4.0, 3.0, 3.5], "stage_ms": {"policy": [7.0, 1.0, 1.0, 0.05, 0.06]},
             "policy": "least_prefill"}
    out = bench_ray_serve.measured_only(warmed, final)
    assert out["decision_ms"] == [0.2, 0.3] and out["routing_ms"] == [3.0, 3.5]
    assert out["stage_ms"] == {"policy": [0.05, 0.06]} and out["policy"] == "least_prefill"
    assert out["decisions"] == 2 and out["fallbacks"] == {"missing": 0, "stale": 1}
    with pytest.raises(SystemExit, match="more decisions in one run than the router keeps"):
        bench_ray_serve.measured_only(warmed, dict(final, decisions=6))  # one decision's time was dropped


def test_bench_cold_cpu_prints_a_row_per_operation_and_policy_and_a_column_per_pause(capsys):
    import bench_cold_cpu

    assert bench_cold_cpu.main(["--pauses-ms", "0,3", "--repeats", "5", "--decisions", "10",
                                "--policies", "least_prefill,cache_aware"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "after" not in line]
    assert len(rows) == len(bench_cold_cpu.OPERATIONS) + 2  # operations, decisions
    assert all(line.count(" / ") == 2 for line in rows)  # p50 / p99 after 0 ms and after 3 ms
    assert "`cache_aware`" in out and "after 3 ms" in out


def test_bench_cold_cpu_refuses_bad_pauses(capsys):
    import bench_cold_cpu

    assert bench_cold_cpu.main(["--pauses-ms", "0,soon"]) == 2
    assert "--pauses-ms: expected comma-separated numbers, got '0,soon'" in capsys.readouterr().err
