"""``rewardkit replay`` on logs it cannot use: one-line errors naming the file, line or key, exit 2 (no simulator needed)."""

from __future__ import annotations

import json

import pytest

from rewardkit.cli import main
from rewardkit.errors import ConfigError
from schedulers.replay.logged import MIN_REQUESTS, read_logged_run
from schedulers.replay.workload import build_workload, simulated_block_names


def header(replicas=("http://a", "http://b"), **extra) -> dict:
    return {"kind": "header", "v": 1, "started": 0, "router": "least_prefill", "replicas": list(replicas),
            "observation": {}, "features": [], "reward": None, "prompt_block_tokens": 32, **extra}


def decision(i: int, t: float, action: int = 0, status: str = "ok", **extra) -> dict:
    return {"kind": "decision", "v": 1, "request_id": f"r{i}", "router": "least_prefill", "action": action,
            "observation": [[0.0], [0.0]], "prompt_tokens": 40 + i, "output_tokens": 3, "ttft_s": 0.05, "e2e_s": 0.2,
            "status": status, "reward": None, "reward_terms": {}, "time": t, "prompt_blocks": ["ab" * 8], **extra}


def write(path, lines) -> str:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def replay_exit(capsys, *args) -> tuple[int, str]:
    code = main(["replay", *args, "--routers", "least_prefill"])
    return code, capsys.readouterr().err


def test_requests_come_out_in_arrival_order_with_retries_folded_and_failures_left_out(tmp_path):
    lines = [header()] + [decision(i, 100.0 + 0.5 * i, action=i % 2) for i in range(MIN_REQUESTS)]
    lines.insert(3, decision(99, 100.7, status="retried"))
    lines.append(decision(99, 100.75, action=1))           # the retried request, answered by replica 1
    lines.append(decision(98, 101.0, status="error"))
    run = read_logged_run([write(tmp_path / "a.jsonl", lines)])
    assert len(run.requests) == MIN_REQUESTS + 1 and run.dropped == 1
    times = [r.arrived_at for r in run.requests]
    assert times == sorted(times) and times[0] == 0.0
    moved = [r for r in run.requests if r.prompt_tokens == 139]
    assert len(moved) == 1 and moved[0].arrived_at == pytest.approx(0.7) and moved[0].replica == 1


def test_two_logs_are_laid_end_to_end(tmp_path):
    a = write(tmp_path / "a.jsonl", [header()] + [decision(i, 10.0 + i, ) for i in range(12)])
    b = write(tmp_path / "b.jsonl", [header()] + [decision(i, 500.0 + i) for i in range(12)])
    run = read_logged_run([a, b])
    assert len(run.requests) == 24 and run.sources == [a, b]
    assert run.requests[12].arrived_at == pytest.approx(11.0 + 0.2 + 1.0)  # after a's last request ended, plus a gap


def test_simulated_blocks_follow_the_logged_blocks():
    assert simulated_block_names(["x", "y"], 32, 16) == (("x", 0), ("x", 1), ("y", 2), ("y", 3))
    assert simulated_block_names(["x", "y", "z"], 24, 16) == (("x", 0), ("y", 1), ("y", 2), ("z", 3))


def test_lengths_fit_the_simulated_model_length(tmp_path):
    lines = [header()] + [decision(i, float(i), prompt_tokens=5000, output_tokens=50) for i in range(MIN_REQUESTS)]
    work = build_workload(read_logged_run([write(tmp_path / "a.jsonl", lines)]), 16, 1024)
    assert set(work.prompt_tokens) == {1023} and set(work.output_tokens) == {1}
    assert work.arrivals(0).arrivals.arrived_at[5] == 5.0
    jittered = work.arrivals(3).arrivals.arrived_at
    assert 0 < abs(jittered[5] - 5.0) <= 0.005 and list(jittered) == sorted(jittered)


@pytest.mark.parametrize("lines, message", [
    ([], "expected a decision log with a header line"),
    ([decision(0, 1.0)], ":1: expected a header line before the first decision"),
    ([header(), {**decision(0, 1.0), "action": 5}], ":2: action: expected a replica index below 2"),
    ([header(), {**decision(0, 1.0), "prompt_blocks": "abc"}], ":2: prompt_blocks: expected a list of hex block names"),
    ([header(replicas=())], "header: replicas: expected a non-empty list"),
    ([header()] + [decision(i, float(i)) for i in range(3)], f"expected at least {MIN_REQUESTS} answered requests"),
])
def test_a_log_it_cannot_use_is_a_located_error_and_exit_2(tmp_path, capsys, lines, message):
    path = write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        read_logged_run([path])
    code, err = replay_exit(capsys, path)
    assert code == 2 and str(tmp_path / "bad.jsonl") in err and message in err and "Traceback" not in err


def test_logs_of_two_clusters_are_refused_by_name(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", [header()] + [decision(i, float(i)) for i in range(MIN_REQUESTS)])
    b = write(tmp_path / "b.jsonl", [header(replicas=("http://a", "http://c"))] + [decision(i, float(i))
                                                                                   for i in range(MIN_REQUESTS)])
    code, err = replay_exit(capsys, a, b)
    assert code == 2 and "b.jsonl: header: replicas: expected the replica set of" in err and "http://c" in err


def test_a_missing_log_a_bad_router_and_a_bad_seed_count_exit_2(tmp_path, capsys):
    good = write(tmp_path / "a.jsonl", [header()] + [decision(i, float(i)) for i in range(MIN_REQUESTS)])
    code, err = replay_exit(capsys, str(tmp_path / "none.jsonl"))
    assert code == 2 and "none.jsonl: no such decision log" in err
    assert main(["replay", good, "--routers", "no_such_router"]) == 2
    assert "--routers: unknown router 'no_such_router'" in capsys.readouterr().err
    assert main(["replay", good, "--routers", "least_prefill", "--seeds", "0"]) == 2
    assert "--seeds: expected a count from 1" in capsys.readouterr().err
    assert main(["replay", good, "--routers", "least_prefill", "--fit", "windowed", "--windows", "1"]) == 2
    assert "--windows: expected a count from 2" in capsys.readouterr().err
    assert main(["replay", good, "--routers", "x=missing.pt"]) == 2
    assert "expected an existing checkpoint file" in capsys.readouterr().err


def test_a_logged_router_that_cannot_be_rebuilt_is_replayed_by_its_logged_decisions(tmp_path):
    from schedulers.replay.pipeline import logged_router
    from schedulers.replay.runner import LoggedActions

    lines = [header(router="ppo", checkpoint=str(tmp_path / "gone.pt"))]
    lines += [decision(i, float(i), action=(i * 7) % 2) for i in range(MIN_REQUESTS)]
    run = read_logged_run([write(tmp_path / "a.jsonl", lines)])
    name, policy, how = logged_router(run)
    assert name == "ppo (logged decisions)" and isinstance(policy, LoggedActions) and "could not be rebuilt" in how
    assert [policy.decide(None) for _ in range(4)] == [0, 1, 0, 1]
    named = read_logged_run([write(tmp_path / "b.jsonl", [header(router="cache_aware:balance_abs_threshold=2")] + lines[1:])])
    name, policy, how = logged_router(named)
    assert name == "cache_aware:balance_abs_threshold=2" and how == "its own rule" and not isinstance(policy, LoggedActions)
