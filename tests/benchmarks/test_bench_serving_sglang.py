"""bench_serving's ``sglang_router``: SGLang's real gateway in front of engines, fed text prompts that the
engines' tokenizer reads back as the workload's token ids."""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_serving  # noqa: E402
import prompt_spelling  # noqa: E402
from bench_request_path import SGLANG_PYTHON  # noqa: E402
from schedulers.engines.replicas import free_port  # noqa: E402
from schedulers.engines.stub import ServerThread, StubEngine  # noqa: E402
from schedulers.shared.requests import Lengths, SharedPrefix, build_requests  # noqa: E402

#: sglang-router's Python: the project's .venv-sglang, or REWARDKIT_SGLANG_PYTHON (a worktree without one)
SGLANG = Path(os.environ.get("REWARDKIT_SGLANG_PYTHON", SGLANG_PYTHON))


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A byte-level BPE tokenizer trained like the tiny engines' (on less text), as ``tokenizer.json``."""
    from schedulers.engines.tiny_model import train_tokenizer, training_text

    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(training_text(limit_bytes=400_000)).backend_tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def conversations(n: int, seed: int = 5, gap_s: float = 0.04) -> list:
    """``n`` requests of 4 multi-turn conversations over 2 system prompts of 64 tokens, ``gap_s`` apart
    (no turn left out: the model length is large)."""
    rng = np.random.default_rng(seed)
    lengths = Lengths(np.arange(n) * gap_s, rng.integers(8, 40, n), rng.integers(2, 6, n))
    return build_requests(lengths, seed, 2000, SharedPrefix(2, 64, 4), 4096)


def test_spelled_prompts_tokenize_back_into_their_ids_with_the_same_shared_prefixes(tokenizer_dir):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    spelled = prompt_spelling.ExactText([str(tokenizer_dir)] * 2)
    specs = conversations(40)
    texts = [spelled.spell(s) for s in specs]
    assert all(tok.encode(t.text).ids == list(t.prompt_ids) for t in texts)  # no BOS, no merge across words
    assert [t.prompt_tokens for t in texts] == [s.prompt_tokens for s in specs]
    for (a, ta), (b, tb) in itertools.combinations(zip(specs, texts, strict=True), 2):
        for k in (16, 64, 96):  # a prefix is shared in ids exactly when it is shared in the spelled prompts
            assert (a.prompt_ids[:k] == b.prompt_ids[:k]) == (ta.prompt_ids[:k] == tb.prompt_ids[:k])
        if a.session == b.session:  # a later turn's text starts with the earlier turn's whole prompt
            assert tb.text.startswith(ta.text)


def test_each_router_gets_the_same_requests_in_other_token_ids():
    """The paired rounds compare routers on the same conversations and lengths, none inheriting another's cache."""
    specs = conversations(40)
    a, b = prompt_spelling.relabel(specs, 1), prompt_spelling.relabel(specs, 2)
    for x, y, s in zip(a, b, specs, strict=True):
        assert (x.prompt_tokens, x.session, x.group, x.shared_tokens) == (s.prompt_tokens, s.session, s.group,
                                                                           s.shared_tokens) == (y.prompt_tokens, y.session,
                                                                                                y.group, y.shared_tokens)
        assert sum(i == j for i, j in zip(x.prompt_ids, y.prompt_ids, strict=True)) < len(s.prompt_ids) / 50
    for (s, x), (t, y) in itertools.combinations(zip(specs, a, strict=True), 2):
        assert (s.prompt_ids[:16] == t.prompt_ids[:16]) == (x.prompt_ids[:16] == y.prompt_ids[:16])


def test_different_tokenizers_are_refused(tokenizer_dir, tmp_path):
    (tmp_path / "tokenizer.json").write_text((tokenizer_dir / "tokenizer.json").read_text() + " ")  # another file
    with pytest.raises(RuntimeError, match="different tokenizers"):
        prompt_spelling.ExactText([str(tokenizer_dir), str(tmp_path)])


def test_a_missing_sglang_environment_is_a_one_line_error(tmp_path, capsys):
    code = bench_serving.main(["--skip", "hetero,sim", "--prefix-routers", "least_prefill,sglang_router",
                               "--sglang-python", str(tmp_path / "none" / "python"), "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: --sglang-python ") and ".venv-sglang" in err and "\n" not in err


@pytest.mark.skipif(not SGLANG.is_file(), reason="sglang-router's environment is absent: python -m venv .venv-sglang "
                    "&& .venv-sglang/bin/pip install sglang-router==0.3.2 (or set REWARDKIT_SGLANG_PYTHON)")
def test_sglang_router_serves_the_text_workload_and_keeps_conversations_where_they_are_cached(tokenizer_dir, tmp_path):
    spelled = prompt_spelling.ExactText([str(tokenizer_dir)])
    # each answer takes 0.5 s, requests come 40 ms apart: the engine holding the first system prompt is
    # busy when the other system prompt first comes, which then goes to the idle engine
    engines = [StubEngine(f"e{i}", ttft_s=0.5) for i in range(2)]
    servers = [ServerThread(e.app(), free_port()).start() for e in engines]
    specs = [spelled.spell(s) for s in conversations(40)]
    assert {s.group for s in specs} == {0, 1}
    try:
        run = bench_serving.run_sglang_router(SimpleNamespace(urls=[s.url for s in servers]), specs,
                                              argparse.Namespace(sglang_python=str(SGLANG), timeout=30.0), tmp_path,
                                              warmup=[spelled.spell(s) for s in conversations(4, seed=9)])
    finally:
        for s in servers:
            s.stop()
    assert all(r.ok for r in run["records"]), {r.error for r in run["records"]}
    served = {prompt: e.name for e in engines for prompt in e.prompts}
    assert {s.text for s in specs} <= set(served)  # every prompt reached an engine as its spelled text
    # a prompt matching an engine's tree goes there (sglang-router's rule), so each system prompt stays on one
    # engine: the two prompts on the two engines
    by_group = {g: {served[s.text] for s in specs if s.group == g} for g in (0, 1)}
    assert all(len(e) == 1 for e in by_group.values()) and by_group[0] != by_group[1], by_group
    # a conversation's later turns extend a prompt that one engine's prefix tree holds: they stay there
    for session in {s.session for s in specs}:
        later = [s for s in specs if s.session == session and s.shared_tokens > 64]
        assert len({served[s.text] for s in later}) == 1, session
