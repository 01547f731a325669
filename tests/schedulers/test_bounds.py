"""Settings that cannot run are refused when loaded, with the limit in the message, before any allocation."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
import yaml

from rewardkit.errors import ConfigError
from schedulers.bounds import MAX_EVAL_SEEDS, MAX_HIDDEN_SIZE, MAX_REPLICAS
from schedulers.sim.env_config import load_env_config

ROOT = Path(__file__).resolve().parents[2]
SLOWDOWNS = yaml.safe_load((ROOT / "configs" / "envs" / "slowdowns.yaml").read_text())


def write_env(tmp_path: Path, **changes) -> Path:
    data = {**SLOWDOWNS, **changes}
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("changes", "where", "expected"), [
    ({"slowdowns": {**SLOWDOWNS["slowdowns"], "factor": 5e-324}}, "slowdowns.factor", "from 0.01 to 1"),
    ({"slowdowns": {**SLOWDOWNS["slowdowns"], "factor": [5e-324, 0.5]}}, "slowdowns.factor", "from 0.01 to 1"),
    ({"slowdowns": {**SLOWDOWNS["slowdowns"], "mean_interval_s": 1e-9}}, "slowdowns.mean_interval_s", ">= 1"),
    ({"slowdowns": {**SLOWDOWNS["slowdowns"], "duration_s": [1e-9, 1e-9]}}, "slowdowns.duration_s", ">= 0.1"),
    ({"slowdowns": {"events": [{"replica": 0, "start_s": 0, "duration_s": 10, "factor": 1e-300}]}},
     "slowdowns.events[0].factor", "from 0.01 to 1"),
    ({"qps": 1e-300}, "qps", "from 0.001 to 100000"),
    ({"qps": 1e300}, "qps", "from 0.001 to 100000"),
    ({"num_replicas": 10**8}, "num_replicas", f"from 1 to {MAX_REPLICAS}"),
    ({"num_replicas": None, "replicas": [{"count": 200}, {"count": 200, "speed": 0.5}]}, "replicas",
     f"at most {MAX_REPLICAS} replicas"),
    ({"num_replicas": None, "replicas": [{"count": 2, "speed": 1e-300}]}, "replicas", "from 0.01 to 100"),
])
def test_env_values_that_cannot_run_are_refused_with_the_limit(tmp_path, changes, where, expected):
    changes = {k: v for k, v in changes.items() if v is not None}
    data = {**SLOWDOWNS, **changes}
    if "replicas" in changes:
        data.pop("num_replicas", None)
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_env_config(path)
    text = str(err.value)
    assert str(path) in text and where in text and expected in text


def test_hidden_sizes_beyond_the_limit_are_refused_by_the_training_config(tmp_path):
    from schedulers.train.config import load_config

    raw = yaml.safe_load((ROOT / "configs" / "ppo_demo.yaml").read_text())
    raw["policy"] = {**(raw.get("policy") or {}), "hidden_sizes": [200_000]}
    raw["env"] = str(ROOT / "configs" / "envs" / "tiny.yaml")
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=rf"policy\.hidden_sizes: expected .*to {MAX_HIDDEN_SIZE} \(the limit\)"):
        load_config(path)
    raw["ppo"] = {**raw["ppo"], "n_envs": 10**8}
    raw["policy"]["hidden_sizes"] = [64]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"ppo\.n_envs: expected an integer from 1 to 256"):
        load_config(path)


def no_layer_built(*args, **kwargs):
    raise AssertionError("a layer was built before the sizes were checked")


def test_policy_sizes_are_checked_before_the_network_is_built(monkeypatch):
    import torch

    from schedulers.rl.scorer_network import ReplicaScorerPolicy

    monkeypatch.setattr(torch.nn.Linear, "__init__", no_layer_built)  # a 200,000-wide layer takes many seconds
    with pytest.raises(ValueError, match=rf"hidden_sizes: expected .* from 1 to {MAX_HIDDEN_SIZE}"):
        ReplicaScorerPolicy(20, hidden_sizes=[200_000, 200_000])
    with pytest.raises(ValueError, match="at most 8 layers"):
        ReplicaScorerPolicy(20, hidden_sizes=[4] * 100)
    with pytest.raises(ValueError, match="n_features"):
        ReplicaScorerPolicy(10**9)


@pytest.mark.parametrize(("spec", "limit"), [("1-100000000", f"at most {MAX_EVAL_SEEDS} seeds"),
                                            (f"1-{MAX_EVAL_SEEDS + 1}", f"at most {MAX_EVAL_SEEDS} seeds"),
                                            ("0-99999999999999999999", "each at most 4294967295")])
def test_seed_ranges_beyond_the_limit_are_refused_before_the_list_is_built(spec, limit):
    from schedulers.cli import evaluation_seeds

    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=limit):
            evaluation_seeds(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # no list of seeds was built (10^8 of them take gigabytes)


@pytest.mark.parametrize(("content", "expected"), [
    (bytes(range(256)) * 20, "expected a UTF-8 CSV text file"),
    (b"\xff\xfe\x00n\x00u\x00m", "expected a UTF-8 CSV text file"),
    (b"", "expected a UTF-8 CSV text file"),
    (b"a,b\n1,2\n", "expected a column 'num_prefill_tokens'"),
    (b"num_prefill_tokens,num_decode_tokens\n10,20\nx,5\n", "line 3: expected whole token counts"),
])
def test_a_trace_that_is_not_a_text_csv_of_lengths_is_a_located_error(tmp_path, content, expected):
    from schedulers.shared.arrivals import sample_arrivals

    trace = tmp_path / "trace.csv"
    trace.write_bytes(content)
    cfg = load_env_config(write_env(tmp_path, trace_file=str(trace)))
    with pytest.raises(ConfigError, match=expected) as err:
        sample_arrivals(cfg, 101)
    assert str(trace) in str(err.value)
