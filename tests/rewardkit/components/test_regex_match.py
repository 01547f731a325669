"""``regex_match`` cannot hang a run, means one thing whatever the text's length, and refuses
patterns and limits the engine cannot honour when the config loads.

Patterns that hang Python's backtracking matcher run in a child process with a generous time
limit, so a regression fails the test instead of hanging the suite."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from rewardkit import ConfigError, RewardComposer
from rewardkit.components.regex_match import MAX_EXPANSION, RegexTimeoutWarning, max_fast_length

ROOT = Path(__file__).resolve().parents[3]


def regex_composer(pattern: str, **params: object) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": {
        "fmt": {"type": "regex_match", "params": {"pattern": pattern, **params}}}})


def run_child(code: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that imports this checkout; killed after ``timeout`` s."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("pattern", [r"(?:a?){40}a{40}$", r"(?:x{0,1}){40}x{40}$", r"(?:a|a?){30}b"])
def test_patterns_of_optional_atoms_are_timed_not_trusted(pattern: str) -> None:
    # each optional atom doubles the paths a backtracking matcher may try: never run untimed
    assert max_fast_length(pattern) == -1
    text = pattern[3] * 40 + "!"
    code = (f"import warnings; warnings.simplefilter('ignore')\n"
            f"from rewardkit import RewardComposer\n"
            f"c = RewardComposer.from_dict({{'version': 1, 'components': {{'fmt': {{'type': 'regex_match', "
            f"'params': {{'pattern': {pattern!r}}}}}}}}})\n"
            f"out = c({{'completion': [{text!r}] * 4}})\n"
            f"print(out.terms['fmt'].info['regex_timeouts'])")
    done = run_child(code)  # Python's re takes hours on these
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) <= 4.0


def test_rewardkit_explain_does_not_hang_on_an_exponential_pattern(tmp_path: Path) -> None:
    config = tmp_path / "r.yaml"
    config.write_text("version: 1\ncomponents:\n  fmt:\n    type: regex_match\n"
                      "    params: {pattern: '(?:a?){40}a{40}$'}\n")
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps({"completion": "a" * 40 + "!"}))
    code = ("import sys; from rewardkit.cli import main\n"
            f"sys.exit(main(['explain', {str(config)!r}, '--context', {str(ctx)!r}]))")
    done = run_child(code)
    assert done.returncode == 0, done.stderr
    assert "fmt" in done.stdout and "regex_timeouts" in done.stdout


def test_a_whole_call_is_bounded_by_max_call_s() -> None:
    composer = regex_composer(r"^(a|aa)+$", timeout_s=0.05, max_call_s=0.2)
    texts = ["a" * 5000 + "b"] * 256 + ["aaaa"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = composer({"completion": texts})
    info = out.terms["fmt"].info
    # a call of 256 degenerate texts stops matching once its budget is spent: every one of them
    # scores 0.0 and is counted, and the texts after them are not matched either
    assert info == {"regex_timeouts": 257.0}
    assert out.terms["fmt"].raw.tolist() == [0.0] * 257
    assert any(issubclass(w.category, RegexTimeoutWarning) for w in caught)
    # a cheap call right after is matched normally: the budget is per call
    assert composer({"completion": ["aaaa", "b"]}).terms["fmt"].raw.tolist() == [1.0, 0.0]


def test_a_pattern_means_the_same_on_short_and_long_texts() -> None:
    # a POSIX class: the regex engine reads it as letters; Python's re as a set of [:alph
    composer = regex_composer(r"^[[:alpha:]]+$")
    limit = composer.spec.nodes[0].component.max_fast_length
    for n in (5, limit, limit + 1, 2 * limit + 10):
        assert composer({"completion": "b" * n}).total == 1.0, n
    assert composer({"completion": "b1"}).total == 0.0
    # syntax only the regex engine knows is accepted and means what it says
    assert regex_composer(r"^\p{L}+$")({"completion": "héllo"}).total == 1.0


@pytest.mark.parametrize("pattern", ["a{1000000}", "(?:(?:ab){1000}){1000}", "x{0,200000}"])
def test_huge_counted_repeats_are_refused_with_a_located_error(pattern: str) -> None:
    with pytest.raises(ConfigError) as info:
        regex_composer(pattern)
    message = str(info.value)
    assert "components.fmt.params.pattern" in message and f"{MAX_EXPANSION:,}" in message
    regex_composer("x{0,500}")  # ordinary counts load


@pytest.mark.parametrize("key, value", [("timeout_s", 1e13), ("timeout_s", 1e300), ("max_call_s", 1e13),
                                        ("timeout_s", 0.0)])
def test_time_limits_the_engine_cannot_honour_are_refused(key: str, value: float) -> None:
    with pytest.raises(ConfigError) as info:
        regex_composer("(a+)+$", **{key: value})
    assert f"components.fmt.params.{key}: expected a number from 0.001 to 3600" in str(info.value)


def test_a_long_time_limit_still_matches() -> None:
    # the largest limit accepted is honoured (no immediate timeout)
    composer = regex_composer(r"(a+)+$", timeout_s=3600, max_call_s=3600)
    out = composer({"completion": ["a" * 300, "b" * 5]})
    assert out.terms["fmt"].raw.tolist() == [1.0, 0.0]
    assert out.terms["fmt"].info == {"regex_timeouts": 0.0}


@pytest.mark.parametrize("pattern, plain", [
    (r"<answer>.*?</answer>", True), (r"^<answer>.*</answer>$", True), (r"(?s)^[a-z0-9_-]+\Z", True),
    (r"x{2,5}|(?=ab)a", True), (r"^[[:alpha:]]+$", False), (r"\d+", False), (r"(?i)abc", False),
    (r"a(?i:b)", False), (r"\bx", False), (r"(a)\1", False), (r"\p{L}", False)])
def test_only_patterns_both_engines_read_alike_use_the_faster_one(pattern: str, plain: bool) -> None:
    from rewardkit.components.regex_match import same_in_re

    assert same_in_re(pattern) is plain
    term = regex_composer(pattern).spec.nodes[0].component
    assert (type(term._fast.__self__).__module__ == "re") is plain  # the untimed engine
