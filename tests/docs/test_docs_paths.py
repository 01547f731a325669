"""Every relative link and every repository path named in README.md and docs/ exists.

Docs drift when code moves: a link to a page that was renamed, a module named at its old path. This
reads each Markdown file, follows its relative links (``[text](path#anchor)``) from the file's own
folder, and checks each path written in backticks that starts at a top-level folder of the
repository (``rewardkit/composer.py``, ``configs/envs/hetero.yaml``). Placeholders (``<run>``,
``*``, ``...``) and paths under folders that runs create (``runs/``, ``benchmarks/out/``) are not
checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP_LEVEL = ("rewardkit/", "schedulers/", "configs/", "examples/", "tests/", "docs/", "benchmarks/", ".ci/")
GENERATED = ("runs/", "benchmarks/out/")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.|\bN\b|\bX\b")


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def without_fenced_code(text: str) -> str:
    """The text outside ``` fences (shell sessions name files that a command creates)."""
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


def relative_links(text: str) -> list[str]:
    targets = [a or b for a, b in LINK.findall(without_fenced_code(text))]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def repository_paths(text: str) -> list[str]:
    """Backticked tokens that name a file or folder of this repository (the first word of a span)."""
    found = []
    for span in CODE_SPAN.findall(without_fenced_code(text)):
        for word in span.split():
            if word.endswith(":"):  # an error message's location (`configs/x.yaml: components...`)
                continue
            word = word.strip(".,;:()'\"")
            word = re.sub(r"(\.py):[\w.]+$", r"\1", word)  # module.py:function
            word = re.sub(r"#.*$", "", word)
            if word.startswith(TOP_LEVEL) and not PLACEHOLDER.search(word) and not word.startswith(GENERATED):
                found.append(word)
    return found


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_exists(page: Path):
    missing = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            missing.append(target)
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_named_exists(page: Path):
    missing = sorted({p for p in repository_paths(page.read_text(encoding="utf-8")) if not (ROOT / p).exists()})
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_checker_catches_a_missing_link_and_path(tmp_path: Path):
    text = ("See [gone](gone.md) and `rewardkit/sim/arrivals.py`, not `runs/<run>/policy.pt` or "
            "`configs/x.yaml: sigma: expected a number`.\n```\nrewardkit/x.py\n```")
    assert relative_links(text) == ["gone.md"]
    assert repository_paths(text) == ["rewardkit/sim/arrivals.py"]


ISSUE_NUMBER = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)


def tracked_text_files() -> list[Path]:
    """Code, configs and docs of the repository (what a reader meets), without generated folders."""
    suffixes = {".py", ".md", ".yaml", ".yml", ".toml", ".sh"}
    skip = {".venv", ".venv-vllm", ".venv-rllama", ".venv-sglang", ".git", "runs", ".cache", "build", "dist"}
    found = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if parts and (parts[0] in skip or parts[0].endswith(".egg-info")) or "__pycache__" in parts:
            continue
        if path.is_file() and (path.suffix in suffixes or path.name in {"Makefile", "run"}):
            found.append(path)
    return found


def test_no_issue_numbers_in_code_or_docs():
    """Code and docs say what and why in their own words; an issue tracker's numbers mean nothing to a reader."""
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in tracked_text_files()
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if ISSUE_NUMBER.search(line) and path.name != "test_docs_paths.py"]
    assert not hits, "issue numbers in code or docs:\n" + "\n".join(hits[:30])
