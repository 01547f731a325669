"""benchmarks/bench_replay.py's verdict from saved runs: predicted against measured per router, the rank
agreement, the best router by each, and the header saying when the replayed log was held out."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


def result(heldout: int | None) -> dict:
    """One cluster's saved result: three routers, the replay's predictions and two live rounds each."""
    predicted = {"a": (0.010, 0.030), "b": (0.012, 0.040), "c": (0.020, 0.090)}
    measured = {"a": (0.011, 0.033), "b": (0.010, 0.050), "c": (0.025, 0.080)}
    routers = {n: {"ttft_p50": p50, "ttft_p99": p99, "prefix_hit_rate": 0.4,
                   "vs_logged": {"ttft_p50": {"ratio": p50 / 0.010}, "ttft_p99": {"ratio": p99 / 0.030}}}
               for n, (p50, p99) in predicted.items()}
    live = {}
    for n, (p50, p99) in measured.items():
        run = {"ttft_p50": p50, "ttft_p99": p99, "e2e_mean": 0.1, "e2e_p99": 0.2, "client_ttft_p50": p50,
               "client_ttft_p99": p99, "prefix_hit_rate": 0.375}
        live[n] = {**run, "rounds": [run, run], "load_after": "0.5 0.5 0.5"}
    out = {"cluster": "even", "slow": 0, "requests": 240, "logged_router": "a", "rate": 12.0, "rounds": 2,
           "logged_run": {"ttft_p50": 0.011, "ttft_p99": 0.033, "load_after": "0.4 0.4 0.4"},
           "replay": {"calibration": {"ttft_p50": {"error": -0.05}}, "fitted_speeds": [1.0, 1.1], "overhead_s": 0.002,
                      "calibrated_router": "a", "routers": routers},
           "live": live}
    if heldout is not None:
        out["heldout_seed"] = heldout
    return out


def test_the_report_ranks_predicted_against_measured_and_names_a_held_out_log() -> None:
    import bench_replay

    r = result(202)
    r["comparison"] = bench_replay.compare(r["replay"], r["live"])
    c = r["comparison"]
    assert c["best_predicted_ttft_p50"] == "a" and c["best_measured_ttft_p50"] == "b"
    assert c["spearman_ttft_p50"] == 0.5 and c["spearman_ttft_p99"] == 1.0  # TTFT p50: a and b swap places live
    assert abs(c["rows"]["b"]["ttft_p50"]["error"] - 0.2) < 1e-12
    assert c["rows"]["a"]["prefix_hit_rate"] == {"predicted": 0.4, "measured": 0.375}  # the engines' counters
    text = bench_replay.report([r])
    assert "| 40.0% / 37.5% |" in text
    assert "replayed on a held-out log (workload seed 202" in text
    plain = result(None)
    plain["comparison"] = bench_replay.compare(plain["replay"], plain["live"])
    assert "held-out" not in bench_replay.report([plain])
