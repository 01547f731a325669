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
