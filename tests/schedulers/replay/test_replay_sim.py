"""``rewardkit replay`` and ``train --from-log --mode replay`` on a log the simulator wrote (Vidur runs: marked ``vidur``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from rewardkit.cli import main

ROOT = Path(__file__).resolve().parents[3]
SHAPE = ROOT / "configs" / "envs" / "prefix_live_shape.yaml"

pytestmark = pytest.mark.vidur


@pytest.fixture(scope="module")
def sim_log(tmp_path_factory):
    """least_prefill on the shared-prefix live shape (120 requests, seed 0), logged as the gateway logs it."""
    from schedulers.replay.simulated_log import write_simulated_log
    from schedulers.sim.env_config import load_env_config

    cfg = dataclasses.replace(load_env_config(SHAPE), requests_per_episode=120)
    path = tmp_path_factory.mktemp("replay") / "least_prefill.jsonl"
    write_simulated_log(cfg, "least_prefill", 0, path)
    return path


def test_replaying_a_simulated_log_of_its_own_router_gives_near_zero_calibration_error(sim_log):
    from schedulers.replay.pipeline import replay_logs

    summary, results, prep = replay_logs([str(sim_log)], ["round_robin"], seeds=1, log=None)
    assert prep.fit.speeds == pytest.approx([1.0, 1.0], rel=0.02) and prep.fit.overhead_s < 1e-3
    for key, c in summary["calibration"].items():
        assert abs(c["error"]) < 0.01, (key, c)
    # the prefixes the log names are shared again: the replayed cache hits
    assert summary["routers"]["least_prefill"]["prefix_hit_rate"] > 0.2
    assert summary["routers"]["round_robin"]["ttft_p99"] != summary["routers"]["least_prefill"]["ttft_p99"]


def test_a_log_of_a_cluster_at_half_speed_is_fitted_at_half_speed(sim_log, tmp_path):
    """The same run with every latency doubled: the fit finds replicas about half as fast."""
    from schedulers.replay.fit import fit_cluster
    from schedulers.replay.logged import read_logged_run
    from schedulers.replay.workload import DEFAULT_BASE_ENV, build_workload

    lines = sim_log.read_text().splitlines()
    slow = tmp_path / "slow.jsonl"
    out = [lines[0]]
    for line in lines[1:]:
        d = json.loads(line)
        d["ttft_s"], d["e2e_s"] = 2 * d["ttft_s"], 2 * d["e2e_s"]
        out.append(json.dumps(d))
    slow.write_text("\n".join(out) + "\n")
    run = read_logged_run([slow])
    fit = fit_cluster(run, build_workload(run, 16, 1024), base_env=DEFAULT_BASE_ENV, profile=None)
    assert all(0.35 < s < 0.65 for s in fit.speeds), fit.speeds
    assert fit.gaps[-1] < fit.gaps[0]


def test_the_command_prints_json_naming_every_router_and_the_calibration_and_writes_the_plot(sim_log, tmp_path, capsys):
    plot = tmp_path / "ttft.png"
    code = main(["replay", str(sim_log), "--routers", "least_prefill,cache_aware:balance_abs_threshold=2,llm_d_optimized",
                 "--seeds", "2", "--json", "--plot", str(plot), "--profile", str(ROOT.parent / "shared" / "vidur" / "profiles")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert set(out["routers"]) == {"least_prefill", "cache_aware:balance_abs_threshold=2", "llm_d_optimized"}
    assert [k for k in out if "calibration" in k] and set(out["calibration"]) == {"ttft_p50", "ttft_p99", "e2e_mean", "e2e_p99"}
    for entry in out["routers"].values():
        assert len(entry["per_seed"]["ttft_p99"]) == 2 and 0 <= entry["prefix_hit_rate"] <= 1
        low, high = entry["vs_logged"]["ttft_p99"]["interval_90"]
        assert low <= entry["vs_logged"]["ttft_p99"]["ratio"] * 1.0001 and high >= low
    assert out["best"]["ttft_p99"] in out["routers"]
    assert "[replay 6/6]" in captured.err and "[replay fit" in captured.err  # progress on stderr
    assert plot.stat().st_size > 1000 and plot.read_bytes()[:4] == b"\x89PNG"
    assert main(["replay", str(sim_log), "--routers", "jsq", "--profile", str(tmp_path / "nope")]) == 2
    assert "--profile" in capsys.readouterr().err


def test_train_from_log_in_replay_mode_trains_a_router_the_replay_then_judges(sim_log, tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "version: 1\nenv: null\nreward: " + str(ROOT / "configs" / "rewards" / "vidur_ttft.yaml") + "\n"
        "seeds: {torch: 0, train_start: 1000, eval: [101]}\n"
        "policy: {hidden_sizes: [16], critic_hidden_sizes: [16]}\n"
        "ppo: {total_timesteps: 128, n_envs: 1, n_steps: 64, n_epochs: 1, minibatch_size: 32, reward_scaling: false}\n"
        "bc: {enabled: true, heuristics: [least_prefill], demo_steps: 64, epochs: 1, minibatch_size: 32}\n"
        "logging: {checkpoint_every: 1, tensorboard: false, progress: true, plots: false}\n")
    out = tmp_path / "trained"
    code = main(["train", "--from-log", str(sim_log), "--mode", "replay", "--config", str(config), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "trained 2 updates on the replayed" in captured.out and (out / "policy.pt").is_file()
    assert "[ppo] update 2/2" in captured.err and "120 requests per episode" in captured.err
    assert main(["replay", str(sim_log), "--routers", f"learned={out / 'policy.pt'}", "--seeds", "1", "--json",
                 "--plot", str(tmp_path / "p.png")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert np.isfinite(result["routers"]["learned"]["ttft_p99"])
    assert main(["train", "--from-log", str(tmp_path / "none.jsonl"), "--mode", "replay", "--config", str(config),
                 "--out", str(tmp_path / "o2")]) == 2
    assert "no such decision log" in capsys.readouterr().err


def test_a_windowed_fit_finds_where_a_replica_slowed(sim_log, tmp_path):
    """Replica 1's requests of the log's second half took twice as long: the windowed fit replays replica 1
    slowed there (factors about 0.5 late, none early) and replica 0 never."""
    from schedulers.replay.fit import fit_cluster
    from schedulers.replay.logged import read_logged_run
    from schedulers.replay.workload import DEFAULT_BASE_ENV, build_workload

    lines = sim_log.read_text().splitlines()
    times = [json.loads(x)["time"] for x in lines[1:]]
    half = (min(times) + max(times)) / 2
    out = [lines[0]]
    for line in lines[1:]:
        d = json.loads(line)
        if d["action"] == 1 and d["time"] > half:
            d["ttft_s"], d["e2e_s"] = 2 * d["ttft_s"], 2 * d["e2e_s"]
        out.append(json.dumps(d))
    slowed = tmp_path / "slowed.jsonl"
    slowed.write_text("\n".join(out) + "\n")
    run = read_logged_run([slowed])
    fit = fit_cluster(run, build_workload(run, 16, 1024), base_env=DEFAULT_BASE_ENV, profile=None, windows=4)
    late = [e for e in fit.slowdowns if e["replica"] == 1 and e["start_s"] >= run.requests[-1].arrived_at / 2 - 1e-9]
    assert late and all(0.3 < e["factor"] < 0.8 for e in late), fit.slowdowns
    assert not [e for e in fit.slowdowns if e["replica"] == 0 and e["factor"] < 0.8]
    assert fit.speeds[1] == pytest.approx(1.0, rel=0.25)


def test_each_replica_s_prefix_cache_is_as_large_as_its_engine_reported(sim_log, tmp_path):
    """The log's ``engines`` line sizes each replica's prefix cache: engines that hold little replay fewer hits
    than the env's default, engines that hold much at least as many, and the report says which it used."""
    from schedulers.replay.pipeline import replay_logs
    from schedulers.replay.report import format_report

    def with_engines(name: str, kv_tokens: list) -> str:
        lines = sim_log.read_text().splitlines()
        engines = json.dumps({"kind": "engines", "v": 1, "time": 0.0, "kv_tokens": kv_tokens})
        path = tmp_path / name
        path.write_text("\n".join([lines[0], engines, *lines[1:]]) + "\n")
        return str(path)

    def hit_rate(path: str) -> tuple[float, dict]:
        summary, _, _ = replay_logs([path], ["round_robin"], seeds=1, log=None)
        return summary["routers"]["least_prefill"]["prefix_hit_rate"], summary

    default, summary = hit_rate(str(sim_log))
    assert "KV cache per replica: not in the log" in format_report(summary)
    small, summary = hit_rate(with_engines("small.jsonl", [1024, 1024]))
    assert summary["kv_tokens"] == [1024, 1024] and "1,024 tokens, 1,024 tokens" in format_report(summary)
    large, _ = hit_rate(with_engines("large.jsonl", [32768, None]))
    assert small < default - 0.05 and large >= default
