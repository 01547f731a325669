"""A shared-prefix workload's size in all is bounded where the env YAML is read (a located error,
not a MemoryError), and system prompts are built only for the groups requests use."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from rewardkit.cli import main as rewardkit_main
from rewardkit.errors import ConfigError
from schedulers.shared.requests import Lengths, SharedPrefix, build_requests
from schedulers.shared.workload import load_workload
from schedulers.sim.env_config import load_env_config

HUGE = "shared_prefix: {groups: 100000, prefix_tokens: 4000}\n"


def env_file(tmp_path, text: str, max_tokens: int = 4096):
    path = tmp_path / "env.yaml"
    path.write_text(f"max_tokens: {max_tokens}\ntrace_file: ../shared/vidur/traces/splitwise_conv.csv\n" + text)
    return path


@pytest.mark.parametrize("load", [load_workload, load_env_config], ids=["workload", "simulator"])
def test_groups_times_prefix_tokens_is_bounded_with_a_located_error(tmp_path, load):
    with pytest.raises(ConfigError, match=r"^[^\n]*env\.yaml: shared_prefix: expected at most 10,000,000 system-prompt "
                                          r"tokens in all \(groups x prefix_tokens\), got 100,000 x 4,000 = 400,000,000$"):
        load(env_file(tmp_path, HUGE))
    # the live env and the load generator read any env file: the issue's own example
    with pytest.raises(ConfigError, match=r"got 100,000 x 32,768 = 3,276,800,000$"):
        load_workload(env_file(tmp_path, "shared_prefix: {groups: 100000, prefix_tokens: 32768}\n", 40000))


@pytest.mark.parametrize("load", [load_workload, load_env_config], ids=["workload", "simulator"])
def test_an_episodes_prompts_are_bounded_too(tmp_path, load):
    text = "requests_per_episode: 1000000\nshared_prefix: {groups: 4, prefix_tokens: 128}\n"
    with pytest.raises(ConfigError, match=r"env\.yaml: requests_per_episode: expected at most 50,000,000 prompt tokens "
                                          r"per episode .* got 1,000,000 x 4,096 = 4,096,000,000$"):
        load(env_file(tmp_path, text))
    load(env_file(tmp_path, "requests_per_episode: 1000000\n"))  # unique prompts are not built: no bound


def test_loadgen_env_reports_the_bound_instead_of_running_out_of_memory(tmp_path, capsys):
    path = env_file(tmp_path, "shared_prefix: {groups: 100000, prefix_tokens: 32768}\n", 40000)
    code = rewardkit_main(["loadgen", "--url", "http://127.0.0.1:9", "--model", "m", "--env", str(path),
                           "--requests", "200", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "MemoryError" not in err and "Traceback" not in err
    assert "shared_prefix: expected at most 10,000,000 system-prompt tokens in all" in err


def lengths(n: int) -> Lengths:
    return Lengths(np.arange(n, dtype=float), np.full(n, 5), np.full(n, 3))


def test_system_prompts_are_built_only_for_the_groups_requests_use():
    shared = SharedPrefix(groups=100_000, prefix_tokens=100)  # 10,000,000 tokens if all were built
    tracemalloc.start()
    try:
        specs = build_requests(lengths(30), seed=5, shared=shared)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, f"{peak:,} bytes for 30 requests"
    assert len(specs) == 30 and all(s.prompt_tokens == 105 and s.shared_tokens == 100 for s in specs)
    again = build_requests(lengths(30), seed=5, shared=shared)
    assert [s.prompt_ids for s in again] == [s.prompt_ids for s in specs]  # seeded
    by_group: dict[int, tuple[int, ...]] = {}
    for s in specs + build_requests(lengths(60), seed=5, shared=shared):
        # a group's system prompt does not depend on which groups were drawn before it
        assert by_group.setdefault(s.group, s.prompt_ids[:100]) == s.prompt_ids[:100]
