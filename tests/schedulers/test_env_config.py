"""``EnvConfig``: located errors (all at once), duplicate keys, overrides, the trace file."""

from __future__ import annotations

import pytest

from rewardkit.errors import ConfigError

@pytest.mark.parametrize(
    "text, message",
    [
        ("num_replicas: -1\n", r"bad\.yaml: num_replicas: expected an integer from 1 to 256, got -1"),
        ("qsp: 3\n", r"bad\.yaml: qsp: unknown key \(did you mean 'qps'\?\)"),
        ("qps: fast\n", r"bad\.yaml: qps: expected a number from 0.001 to 100000, got 'fast'"),
        ("observation:\n  token_scale: 0\n", r"bad\.yaml: observation\.token_scale: expected a number >= 0.001, got 0"),
        ("observation:\n  windw: 3\n", r"bad\.yaml: observation\.windw: unknown key"),
        ("predictor:\n  max_depth: [16, 0]\n",
         r"bad\.yaml: predictor\.max_depth: expected an integer from 1 to 1000, or a list of 1 to 16 of them"),
        ("replica_scheduler: fifo\n", r"bad\.yaml: replica_scheduler: expected one of 'sarathi', 'vllm', 'orca', got 'fifo'"),
        ("max_tokens: 8192\n", r"bad\.yaml: max_tokens: expected at most predictor\.prediction_max_tokens_per_request \(4096\)"),
        ("compute_profile: justaname\n", r"bad\.yaml: compute_profile: expected a dataset id '<org>/<name>'"),
        ("- 1\n- 2\n", r"bad\.yaml: expected a mapping of env settings"),
        ("qps: [1,\n", r"bad\.yaml: expected valid YAML"),
        ("qps: 3\nqps: 4\n", r"bad\.yaml: .*duplicate key 'qps' \(first at line 1\)"),
        ("replicas:\n  - {count: 2, sped: 1}\n", r"bad\.yaml: replicas\[0\]\.sped: unknown key \(did you mean 'speed'\?\)"),
        ("kv_blocks: 10\nmax_tokens: 4096\n",
         r"bad\.yaml: kv_blocks: expected at least 256 blocks \(one request of max_tokens 4096"),
        ("kv_blocks: 0\n", r"bad\.yaml: kv_blocks: expected an integer from 1 to"),
        ("length_scale: 0\n", r"bad\.yaml: length_scale: expected a number from 0.0001 to 100, got 0"),
        ("length_scale: .nan\n", r"bad\.yaml: length_scale: expected a number from 0.0001 to 100"),
        ("shared_prefix: 8\n", r"bad\.yaml: shared_prefix: expected a mapping \{groups: G, prefix_tokens: T, sessions: S\}"),
        ("shared_prefix: {groups: 0, prefix_tokens: 64}\n", r"bad\.yaml: shared_prefix\.groups: expected an integer from 1"),
        ("shared_prefix: {groups: 2}\n", r"bad\.yaml: shared_prefix\.prefix_tokens: missing required key"),
        ("shared_prefix: {groups: 2, prefix_tokens: 64, sessions: -1}\n",
         r"bad\.yaml: shared_prefix\.sessions: expected an integer from 0"),
        ("shared_prefix: {groups: 2, prefix_tokens: 64, sesions: 3}\n",
         r"bad\.yaml: shared_prefix\.sesions: unknown key \(did you mean 'sessions'\?\)"),
        ("max_tokens: 512\nshared_prefix: {groups: 2, prefix_tokens: 511}\n",
         r"bad\.yaml: shared_prefix\.prefix_tokens: expected at most 510 \(max_tokens 512"),
    ],
)
def test_bad_env_config_names_file_and_key(tmp_path, text, message):
    from schedulers.sim.env_config import load_env_config

    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_env_config(path)


def test_every_error_of_an_env_config_is_reported_at_once(tmp_path):
    from schedulers.sim.env_config import load_env_config

    path = tmp_path / "bad.yaml"
    path.write_text("qps: -1\nnum_replicas: 0\nobservation: {token_scale: x}\n")
    with pytest.raises(ConfigError) as info:
        load_env_config(path)
    assert {e.path for e in info.value.errors} == {"qps", "num_replicas", "observation.token_scale"}
    assert str(info.value).startswith(f"{path}: 3 errors:")


def test_env_config_overrides_and_missing_trace(tmp_path, tiny_config):
    from schedulers.sim.env_config import load_env_config, with_overrides
    from schedulers.shared.arrivals import resolved_trace_file

    cfg = with_overrides(tiny_config, qps=3.5, num_replicas=3, trace_file=None)
    assert (cfg.qps, cfg.num_replicas, cfg.trace_file) == (3.5, 3, tiny_config.trace_file)
    assert with_overrides(tiny_config, {"observation.token_scale": 1024}).observation.token_scale == 1024.0
    with pytest.raises(ConfigError, match=r"override: qps: expected a number from 0.001 to 100000, got -2"):
        with_overrides(tiny_config, qps=-2)
    with pytest.raises(ConfigError, match=r"override: observation\.nope: unknown key"):
        with_overrides(tiny_config, {"observation.nope": 1})
    missing = with_overrides(tiny_config, trace_file="no/such/trace.csv")
    with pytest.raises(ConfigError, match=r"tiny\.yaml: trace_file: expected an existing CSV file"):
        resolved_trace_file(missing)
    with pytest.raises(ConfigError, match="absent.yaml: expected an existing YAML file"):
        load_env_config(tmp_path / "absent.yaml")
    assert load_env_config(tiny_config.source) == tiny_config
    from schedulers.sim.env_config import env_config_from_dict

    assert env_config_from_dict(tiny_config.to_dict()) == tiny_config  # plain-data round trip
