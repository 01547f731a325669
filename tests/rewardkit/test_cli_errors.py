"""The ``rewardkit`` command never prints a traceback for bad input: regression cases and a fuzz run."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit import cli
from rewardkit.config import MAX_DEPTH, MAX_FILE_BYTES

ROOT = Path(__file__).resolve().parents[2]
HYBRID = ROOT / "configs" / "rewards" / "vidur_hybrid.yaml"
GOOD_CONTEXT = {"e2e_latency": 3.0, "throughput": 2.0, "replica_loads": [1.0, 2.0, 3.0, 4.0],
                "ttft": 0.2, "tokens_per_s": 900.0, "in_system": 4.0, "dt": 0.5, "latency": 2.0}


def run(*argv: str) -> tuple[int, str, str]:
    """``rewardkit argv`` in-process; any exception escaping ``main`` fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """``levels`` lists of ``width`` aliases of the previous list: ~540 bytes, 9**9 values expanded."""
    lines = ["version: 1", "a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    lines.append("components: {t: {type: linear, description: *a%d}}" % (levels - 1))
    return "\n".join(lines) + "\n"


# ---- regression cases ------------------------------------------------------------------------------
def test_alias_bomb_fails_fast_with_a_config_error(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")
    assert 400 < path.stat().st_size < 700
    start = time.perf_counter()
    code, out, err = run("validate", str(path))
    assert time.perf_counter() - start < 5  # it used to run for minutes or exhaust memory
    assert code == 1 and out == ""
    assert err.startswith(f"{path}: expected at most ") and "once aliases are expanded" in err


def test_huge_json_context(tmp_path):
    ctx = tmp_path / "huge.json"
    ctx.write_text(json.dumps({"e2e_latency": [1.0] * (MAX_FILE_BYTES // 4)}), encoding="utf-8")
    code, _, err = run("explain", str(HYBRID), "--context", str(ctx))
    assert code == 1
    assert err == f"error: {ctx}: expected a file of at most {MAX_FILE_BYTES} bytes, got a larger one\n"


@pytest.mark.parametrize("depth", [MAX_DEPTH + 5, 5000, 200_000])
def test_deep_json_context(tmp_path, depth):
    ctx = tmp_path / "deep.json"
    ctx.write_text('{"e2e_latency": ' + "[" * depth + "]" * depth + "}", encoding="utf-8")
    code, _, err = run("explain", str(HYBRID), "--context", str(ctx))
    assert code == 1
    assert err.startswith(f"error: {ctx}: expected ")
    assert "Traceback" not in err


def test_huge_integer_in_json_context(tmp_path):
    ctx = tmp_path / "bigint.json"
    ctx.write_text(json.dumps({**GOOD_CONTEXT, "e2e_latency": 10**400}), encoding="utf-8")
    code, _, err = run("explain", str(HYBRID), "--context", str(ctx))
    assert code == 1 and "expected a number within float range" in err
    ctx.write_text('{"e2e_latency": ' + "9" * 5000 + "}", encoding="utf-8")
    code, _, err = run("explain", str(HYBRID), "--context", str(ctx))
    assert code == 1 and err.startswith(f"error: {ctx}: expected valid JSON")


@pytest.mark.parametrize("step", ["1" + "0" * 400, str(2**53 + 1), "-1", "1e3", "9" * 5000])
def test_out_of_range_step_is_a_usage_error(tmp_path, step):
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps(GOOD_CONTEXT), encoding="utf-8")
    code, out, err = run("explain", str(HYBRID), "--context", str(ctx), "--step", step)
    assert code == 2 and out == ""
    assert "argument --step: expected an integer" in err


def test_largest_step_works(tmp_path):
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps(GOOD_CONTEXT), encoding="utf-8")
    code, out, err = run("explain", str(HYBRID), "--context", str(ctx), "--step", str(2**53))
    assert code == 0, err
    assert f"at step {2**53}" in out


def test_docs_out_on_a_folder_or_unwritable_path(tmp_path):
    code, out, err = run("docs", "--out", str(tmp_path))
    assert code == 1 and out == ""
    assert err.startswith(f"error: {tmp_path}: cannot write the reference: ")
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    target = blocker / "components.md"  # a path under a regular file cannot be created, even by root
    code, out, err = run("docs", "--out", str(target))
    assert code == 1 and err.startswith(f"error: {target}: cannot write the reference: ")
    code, out, err = run("docs", "--check", "--out", str(tmp_path))
    assert code == 1 and err.startswith(f"error: {tmp_path}: cannot read the reference: ")


# ---- fuzzing argv and files --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder of good and bad files the fuzzer names in its argv."""
    d = tmp_path_factory.mktemp("cli_fuzz")
    (d / "good.yaml").write_text(HYBRID.read_text(encoding="utf-8"), encoding="utf-8")
    (d / "bomb.yaml").write_text(alias_bomb(), encoding="utf-8")
    (d / "deep.yaml").write_text("version: 1\ncomponents: " + "[" * 2000 + "]" * 2000 + "\n", encoding="utf-8")
    (d / "ctx.json").write_text(json.dumps(GOOD_CONTEXT), encoding="utf-8")
    (d / "ctxs.json").write_text(json.dumps([GOOD_CONTEXT, {**GOOD_CONTEXT, "ttft": 1e308}]), encoding="utf-8")
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    (d / "binary.bin").write_bytes(bytes(range(256)))
    (d / "folder").mkdir()
    (d / "blocker").write_text("a regular file")
    return d


FILES = ["good.yaml", "bomb.yaml", "deep.yaml", "ctx.json", "ctxs.json", "deep.json", "binary.bin", "folder",
         "blocker/below", "missing.yaml", "gen.yaml", "gen.json", "/dev/null", "."]
COMMANDS = list(cli.CORE_COMMANDS)
FLAGS = ["--context", "--step", "--out", "--check", "--help", "--version", "-h", "--", "-"]
NUMBERS = st.integers(-2**70, 2**70).map(str) | st.sampled_from(["1e9", "nan", "-0", "0x10", "1_000", "9" * 5000])
TOKEN = st.sampled_from(FILES) | st.sampled_from(FLAGS) | st.sampled_from(COMMANDS) | NUMBERS | st.text(max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(sorted(GOOD_CONTEXT)) | st.text(max_size=4),
                                                               inner, max_size=5),
    max_leaves=20,
)
YAML_TEXT = st.lists(st.sampled_from(["version: 1\n", "components:\n", "  a: {type: linear}\n", "  b: &b {type: ",
                                      "linear}\n", "  c: {<<: *b}\n", "  d: *b\n", "weight: [", "]\n", ":", "- ",
                                      "{", "}", "&x ", "*x ", "!!python/name:os.system\n", "\t", "\x00"]),
                     max_size=12).map("".join)
# plugin subcommands (train, evaluate) would start real work: the fuzzer keeps to the core ones
PLUGIN_NAMES = {ep.name for ep in cli.plugin_entry_points()} - set(COMMANDS)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.sampled_from(COMMANDS) | st.text(max_size=8), rest=st.lists(TOKEN, max_size=6),
       json_value=JSON_VALUES, yaml_text=YAML_TEXT)
def test_fuzz_cli_never_raises(workdir, command, rest, json_value, yaml_text):
    argv = [command, *rest]
    if PLUGIN_NAMES & set(argv):
        return
    (workdir / "gen.json").write_text(json.dumps(json_value), encoding="utf-8")
    (workdir / "gen.yaml").write_text(yaml_text, encoding="utf-8")
    before = os.getcwd()
    os.chdir(workdir)  # relative paths the fuzzer invents stay inside the temporary folder
    try:
        code, out, err = run(*argv)
    finally:
        os.chdir(before)
    assert code in (0, 1, 2)
    assert "Traceback" not in err and "Traceback" not in out
