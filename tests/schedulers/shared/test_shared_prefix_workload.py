"""An env YAML's ``shared_prefix``: read by the simulator-free workload (live env, load generator) with located errors."""

from __future__ import annotations

import pytest

from rewardkit.errors import ConfigError
from schedulers.shared.requests import SharedPrefix, shared_prefix_requests
from schedulers.shared.workload import load_workload


def test_any_env_file_carries_its_shared_prefix(tmp_path) -> None:
    path = tmp_path / "env.yaml"
    path.write_text("max_tokens: 512\nlength_scale: 0.05\nrequests_per_episode: 40\n"
                    "trace_file: ../shared/vidur/traces/splitwise_conv.csv\n"
                    "shared_prefix: {groups: 3, prefix_tokens: 100, sessions: 5}\nlive: {backends: ['http://x:1']}\n")
    workload = load_workload(path)
    assert workload.shared_prefix == SharedPrefix(3, 100, 5)
    specs = shared_prefix_requests(workload, seed=4)
    assert len(specs) == 40 and all(s.prompt_tokens + s.output_tokens <= 512 for s in specs)
    assert {s.group for s in specs} <= {0, 1, 2} and all(s.shared_tokens >= 100 for s in specs)
    assert any(s.shared_tokens > 100 for s in specs)  # later turns repeat their conversation's history


@pytest.mark.parametrize("text, message", [
    ("shared_prefix: {groups: 2, prefix_tokens: 0}\n", r"env\.yaml: shared_prefix\.prefix_tokens: expected an integer from 1"),
    ("max_tokens: 100\nshared_prefix: {groups: 2, prefix_tokens: 99}\n",
     r"env\.yaml: shared_prefix\.prefix_tokens: expected at most 98 \(max_tokens 100"),
])
def test_a_bad_shared_prefix_names_the_file_and_key(tmp_path, text, message) -> None:
    path = tmp_path / "env.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_workload(path)
