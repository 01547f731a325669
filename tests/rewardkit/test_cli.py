"""Tests of the ``rewardkit`` command line: core commands, error reporting, plugins, generated docs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import yaml

from rewardkit import RewardComposer, cli, registered
from rewardkit.applies import parse_applies_to
from rewardkit.docgen import components_markdown
from rewardkit.normalizers import make_normalizer
from rewardkit.schedules import make_schedule
from rewardkit.transforms import make_transforms

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted((ROOT / "configs" / "rewards").glob("*.yaml"))
HYBRID = ROOT / "configs" / "rewards" / "vidur_hybrid.yaml"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# ---- validate ----------------------------------------------------------------------------------
def test_validate_presets_prints_ok_per_file(capsys):
    assert PRESETS, "configs/rewards/ should hold the presets"
    code, out, err = run(capsys, "validate", *map(str, PRESETS))
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert len(lines) == len(PRESETS)
    for path, line in zip(PRESETS, lines, strict=True):
        assert line.startswith(f"{path}: OK (")
    assert "context keys: dt, in_system" in out  # the Little's law preset


def test_validate_reports_config_error_with_path_and_exit_1(capsys, tmp_path):
    bad = write(tmp_path / "bad.yaml", """\
        version: 1
        components:
          latency: {type: logistic_latency, params: {threshold: 6, sigma: -1}}
    """)
    code, out, err = run(capsys, "validate", str(HYBRID), str(bad))
    assert code == 1
    assert f"{HYBRID}: OK" in out  # the good file is still reported
    assert err.strip() == f"{bad}: components.latency.params.sigma: expected a positive number, got -1"
    assert "Traceback" not in err


@pytest.mark.parametrize("text, message", [
    ("version: 1\ncomponents:\n  x: {type: nope}\n", "components.x.type: expected a registered component type"),
    ("version: 1\ncomponents:\n  x: {type: linear, wieght: 2}\n", "components.x.wieght: unknown key"),
    ("version: 1\ncomponents: [\n", "expected valid YAML"),
])
def test_validate_error_messages(capsys, tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    code, _, err = run(capsys, "validate", str(path))
    assert code == 1 and message in err and str(path) in err


def test_validate_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, "validate", str(tmp_path / "absent.yaml"))
    assert code == 1 and "absent.yaml: expected an existing YAML file" in err


# ---- explain -----------------------------------------------------------------------------------
HYBRID_CTX = {"throughput": 0.1, "latency": 7.0, "replica_loads": [1.0, 2.0, 3.0]}


def table_rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and not set(line) <= {"-"} and parts[0] not in ("term",) and not line.endswith(("step 0", "step 7")):
            rows[parts[0]] = parts[1:]
    return rows


def test_explain_prints_every_term_and_the_total(capsys, tmp_path):
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps(HYBRID_CTX))
    code, out, err = run(capsys, "explain", str(HYBRID), "--context", str(ctx))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{HYBRID} at step 0"
    assert lines[1].split() == ["term", "raw", "normalized", "weight", "contribution"]
    expected = RewardComposer.from_yaml(HYBRID)({**HYBRID_CTX, "replica_loads": np.array([1.0, 2.0, 3.0])})
    rows = table_rows(out)
    for name, term in expected.terms.items():
        raw, normalized, weight, contribution = map(float, rows[name])
        assert raw == pytest.approx(term.raw, rel=1e-5, abs=1e-12)
        assert weight == pytest.approx(term.weight)
        assert contribution == pytest.approx(term.contribution, rel=1e-5, abs=1e-12)
    assert float(rows["total"][0]) == pytest.approx(expected.total, rel=1e-5)
    assert "  absolute/latency" in out  # nested terms are indented under their group


def test_explain_uses_step_for_schedules_and_a_list_of_contexts(capsys, tmp_path):
    config = write(tmp_path / "sched.yaml", """\
        version: 1
        components:
          a:
            type: linear
            weight: {schedule: linear, start: 0.0, end: 1.0, steps: 10}
          d:
            type: ema_delta
            params: {signal: value}
    """)
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps({"value": 2.0}))
    code, out, _ = run(capsys, "explain", str(config), "--context", str(ctx), "--step", "7")
    assert code == 0
    assert out.splitlines()[0].endswith("at step 7")
    assert table_rows(out)["a"] == ["2", "2", "0.7", "1.4"]
    ctx.write_text(json.dumps([{"value": 2.0}, {"value": 4.0}, {"value": 0.0}]))
    code, out, _ = run(capsys, "explain", str(config), "--context", str(ctx), "--step", "3")
    assert code == 0
    assert "context 1/3" in out and "context 3/3" in out and "at step 5" in out  # steps 3, 4, 5
    last = out.split("context 3/3")[1]
    assert float(table_rows(last)["d"][0]) < 0  # ema_delta needs history: the drop shows up


def test_explain_shows_sum_before_total_transforms(capsys, tmp_path):
    config = write(tmp_path / "t.yaml", """\
        version: 1
        components:
          a: {type: linear, weight: 3.0}
        total:
          transforms: [{clip: [null, 1.0]}]
    """)
    ctx = tmp_path / "ctx.json"
    ctx.write_text('{"value": 2}')
    code, out, _ = run(capsys, "explain", str(config), "--context", str(ctx))
    assert code == 0
    assert re.search(r"^sum of top-level\s+6$", out, re.M)
    assert re.search(r"^total\s+1$", out, re.M)


@pytest.mark.parametrize("content, message", [
    (None, "ctx.json: expected an existing JSON file"),
    ('{"throughput": ', "ctx.json: expected valid JSON at line 1"),
    ('{"throughput": 0.1}', "ctx.json: missing context keys 'latency', 'replica_loads'"),
    ('{"throughput": 0.1, "latency": "slow", "replica_loads": [1]}', "ctx.json: key 'latency': expected a number"),
    ('{"throughput": NaN, "latency": 1, "replica_loads": [1]}', "ctx.json: context key 'throughput'"),
    ('{"throughput": 1, "latency": 1, "replica_loads": [[1], [2, 3]]}', "key 'replica_loads': expected a number"),
    ('[]', "ctx.json: expected a JSON object"),
    ('"hello"', "ctx.json: expected a JSON object"),
])
def test_explain_context_errors_exit_1_without_traceback(capsys, tmp_path, content, message):
    ctx = tmp_path / "ctx.json"
    if content is not None:
        ctx.write_text(content)
    code, out, err = run(capsys, "explain", str(HYBRID), "--context", str(ctx))
    assert code == 1
    assert message in err, err
    assert "Traceback" not in err and out == ""


def test_explain_names_the_config_that_needs_the_key(capsys, tmp_path):
    ctx = tmp_path / "ctx.json"
    ctx.write_text('{"in_system": 3}')
    littles = ROOT / "configs" / "rewards" / "vidur_littles_law.yaml"
    code, _, err = run(capsys, "explain", str(littles), "--context", str(ctx))
    assert code == 1
    assert f"missing context key 'dt' that {littles} reads; the context has: in_system" in err


def test_explain_with_a_bad_config_reports_the_config_error(capsys, tmp_path):
    bad = write(tmp_path / "bad.yaml", "version: 3\ncomponents: {a: {type: linear}}\n")
    ctx = tmp_path / "ctx.json"
    ctx.write_text("{}")
    code, _, err = run(capsys, "explain", str(bad), "--context", str(ctx))
    assert code == 1 and f"{bad}: version: expected 1, got 3" in err


# ---- components / docs -------------------------------------------------------------------------
def test_components_lists_each_component_with_params_and_inputs(capsys):
    code, out, _ = run(capsys, "components")
    assert code == 0
    for name in registered():
        assert re.search(rf"^{name}: \S", out, re.M), name
    block = out.split("logistic_latency: ")[1].split("\n\n")[0]
    assert re.search(r"threshold\s+required\s+a finite number\s+latency \(s\) at which the term is 0.5", block)
    assert re.search(r"sigma\s+1.0\s+a positive number", block)
    assert "latency (float), context key 'latency'" in block
    ema = out.split("ema_delta: ")[1].split("\n\n")[0]
    assert "read from the context key named by param 'signal'" in ema and "stateful" in ema
    assert "replica_loads (vector, one value per replica)" in out


def test_docs_writes_the_generated_reference_and_check_detects_drift(capsys, tmp_path):
    out_path = tmp_path / "sub" / "components.md"
    code, out, _ = run(capsys, "docs", "--out", str(out_path))
    assert code == 0 and out.startswith(f"wrote {out_path}")
    assert out_path.read_text() == components_markdown()
    assert run(capsys, "docs", "--out", str(out_path), "--check")[0] == 0
    out_path.write_text(out_path.read_text() + "edited\n")
    code, _, err = run(capsys, "docs", "--out", str(out_path), "--check")
    assert code == 1 and "out of date" in err


def test_checked_in_components_md_is_up_to_date(tmp_path):
    # A fresh process, so components registered by other tests do not show up.
    generated = tmp_path / "components.md"
    result = subprocess.run([sys.executable, "-m", "rewardkit", "docs", "--out", str(generated)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    checked_in = (ROOT / "docs" / "components.md").read_text()
    assert checked_in == generated.read_text(), "run `rewardkit docs --out docs/components.md`"


def test_markdown_documents_every_param_normalizer_schedule_and_transform():
    text = components_markdown()
    from rewardkit import NORMALIZERS, SCHEDULES, get_component_class
    for name in registered():
        assert f"\n## {name}\n" in text
        for param in get_component_class(name).params:
            assert f"| `{param}` |" in text
    for name in list(NORMALIZERS) + list(SCHEDULES):
        assert f"\n## {name}\n" in text
    for name in ("scale", "clip", "tanh"):
        assert f"| `{name}` |" in text


def test_configuration_md_yaml_snippets_are_valid():
    text = (ROOT / "docs" / "configuration.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    composer = RewardComposer.from_dict(yaml.safe_load(blocks[0]), source="configuration.md")
    assert "absolute/latency" in composer.term_names
    for block in blocks[1:]:
        for line in block.strip().splitlines():
            (key, value), = yaml.safe_load(line).items()
            if key == "weight":
                make_schedule(value)
            elif key == "normalize":
                assert make_normalizer(value, path="normalize") is not None
            elif key == "transforms":
                assert make_transforms(value, path="transforms")
            elif key == "applies_to":
                assert parse_applies_to(value, "applies_to")
            else:
                pytest.fail(f"unexpected snippet key {key!r}")


# ---- usage and entry points --------------------------------------------------------------------
def test_usage_errors_exit_2(capsys):
    assert run(capsys, )[0] == 2
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(capsys, "validate", "--bogus", str(HYBRID))
    assert code == 2 and "unrecognized arguments: --bogus" in err


def test_version_and_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("rewardkit ")
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in cli.CORE_COMMANDS:
        assert command in out


def test_python_dash_m_and_console_script_run_the_same_cli():
    for command in ([sys.executable, "-m", "rewardkit"], [str(Path(sys.executable).with_name("rewardkit"))]):
        result = subprocess.run(command + ["validate", str(HYBRID)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"{HYBRID}: OK")


def test_pyproject_plugins_are_listed_and_do_not_break_core_commands(capsys):
    names = {ep.name for ep in metadata.entry_points(group=cli.PLUGIN_GROUP)}
    assert {"train", "evaluate"} <= names
    code, out, _ = run(capsys, "--help")
    assert "train" in out and "evaluate" in out
    assert run(capsys, "validate", str(HYBRID))[0] == 0
    code, out, err = run(capsys, "train", "--help")
    try:
        import schedulers.cli  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - not written yet, or its dependencies are missing
        assert code == 2
        assert f"rewardkit train: command unavailable: loading schedulers.cli:add_train_command failed: " \
               f"{type(exc).__name__}" in err
        assert "Traceback" not in err
    else:
        assert code == 0 and "usage: rewardkit train" in out


# Fake plugins: modules written to a temporary directory and entry points pointing at them.
PLUGIN_OK = """
def add(subparsers):
    p = subparsers.add_parser("hello", help="say hello")
    p.add_argument("--name", default="world")
    p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)
"""
PLUGIN_NEEDS_TORCH = """
raise ModuleNotFoundError("No module named 'torch'", name="torch")
"""
PLUGIN_HALF_DONE = """
def add(subparsers):
    subparsers.add_parser("half")
    raise RuntimeError("broke after adding the parser")
"""


@pytest.fixture
def fake_plugins(tmp_path, monkeypatch):
    for module, source in [("rk_plugin_ok", PLUGIN_OK), ("rk_plugin_torch", PLUGIN_NEEDS_TORCH),
                           ("rk_plugin_half", PLUGIN_HALF_DONE)]:
        (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [
        metadata.EntryPoint("hello", "rk_plugin_ok:add", cli.PLUGIN_GROUP),
        metadata.EntryPoint("fit", "rk_plugin_torch:add", cli.PLUGIN_GROUP),
        metadata.EntryPoint("half", "rk_plugin_half:add", cli.PLUGIN_GROUP),
        metadata.EntryPoint("missing", "rk_no_such_module:add", cli.PLUGIN_GROUP),
        metadata.EntryPoint("validate", "rk_plugin_ok:add", cli.PLUGIN_GROUP),  # may not shadow a core command
    ]
    monkeypatch.setattr(cli, "plugin_entry_points", lambda: eps)
    for module in ("rk_plugin_ok", "rk_plugin_torch", "rk_plugin_half"):
        monkeypatch.delitem(sys.modules, module, raising=False)


def test_working_plugin_runs(capsys, fake_plugins):
    code, out, _ = run(capsys, "hello", "--name", "router")
    assert code == 0 and out == "hello router\n"


def test_broken_plugins_only_fail_when_invoked(capsys, fake_plugins):
    code, out, _ = run(capsys, "validate", str(HYBRID))
    assert code == 0 and "OK" in out
    code, out, _ = run(capsys, "--help")
    assert code == 0 and all(name in out for name in ("hello", "fit", "half", "missing"))
    code, _, err = run(capsys, "fit", "--epochs", "3", "config.yaml")
    assert code == 2
    assert err.strip() == ("rewardkit fit: command unavailable: loading rk_plugin_torch:add failed: "
                           "ModuleNotFoundError: No module named 'torch'")
    code, _, err = run(capsys, "missing")
    assert code == 2 and "No module named 'rk_no_such_module'" in err
    code, _, err = run(capsys, "half")
    assert code == 2 and "RuntimeError: broke after adding the parser" in err


def test_plugin_named_like_a_core_command_is_ignored(capsys, fake_plugins):
    code, out, _ = run(capsys, "validate", str(HYBRID))
    assert code == 0 and out.startswith(f"{HYBRID}: OK")
