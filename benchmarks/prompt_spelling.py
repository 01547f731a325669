"""One live round's workload, shown to each router in its own tokens: ids renamed per router
(:func:`relabel`, so that no router inherits another's prefix cache) or spelled as text the engines
read back as the same ids (:class:`ExactText`, for sglang-router, which routes text).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from schedulers.shared.requests import FIRST_ID, RequestSpec

#: the shared-prefix router that is SGLang's own gateway (sglang-router, ``--policy cache_aware``), not ours
SGLANG_ROUTER = "sglang_router"


@dataclasses.dataclass(frozen=True)
class TextPrompt(RequestSpec):
    """A request sent as text (``prompt_format="text"``) that the engines tokenize back into its ``prompt_ids``."""

    text: str = ""

    def prompt_text(self) -> str:
        return self.text


class ExactText:
    """Token ids as text the engines' tokenizer reads back as the same number of tokens, one word per id.

    sglang-router 0.3.2 rejects a completion whose prompt is token ids (HTTP 422) and keeps its
    cache-aware prefix tree on text, so ``sglang_router`` gets text. Each id of its workload
    (drawn like every router's) becomes one of the tokenizer's single-token words, a space and
    letters (``Ġword``; the byte-level pre-tokenizer splits before every such space, so words never
    merge), by ``id mod`` their number. The engines then see prompts of the same lengths with the
    same shared prefixes (a shared id prefix is a shared text prefix and a shared token prefix, no
    BOS is added), so their prefix caching is the other routers'; unrelated prompts share a
    block only by chance, as with ids. ``check`` asks an engine's ``/tokenize`` to confirm.
    """

    def __init__(self, model_dirs: list[str]) -> None:
        from tokenizers import Tokenizer

        texts = {(Path(d) / "tokenizer.json").read_text() for d in model_dirs}
        if len(texts) != 1:
            raise RuntimeError(f"{SGLANG_ROUTER}: the replicas' models {sorted(set(model_dirs))} have different tokenizers")
        tok = Tokenizer.from_str(texts.pop())
        self.words = [(i, " " + piece[1:]) for piece, i in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
                      if piece[:1] == "Ġ" and piece[1:].isascii() and piece[1:].isalpha()
                      and tok.encode(" " + piece[1:]).ids == [i]]
        if len(self.words) < 64:
            raise RuntimeError(f"{SGLANG_ROUTER}: the engines' tokenizer has {len(self.words)} single-token words, "
                               "too few to spell prompts")

    def spell(self, spec: RequestSpec) -> TextPrompt:
        """``spec`` with each id replaced by a single-token word's id, and the text of those words."""
        words = [self.words[(t - FIRST_ID) % len(self.words)] for t in spec.prompt_ids]
        fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(RequestSpec)}
        return TextPrompt(**{**fields, "prompt_ids": tuple(i for i, _ in words)}, text="".join(w for _, w in words))

    @staticmethod
    def check(url: str, specs: list[TextPrompt], model: str = "tiny-llama") -> None:
        """RuntimeError unless the engine at ``url`` tokenizes each text into exactly its ids."""
        import httpx

        for spec in specs:
            tokens = httpx.post(url + "/tokenize", json={"model": model, "prompt": spec.text}, timeout=30).json()["tokens"]
            if tokens != list(spec.prompt_ids):
                raise RuntimeError(f"{SGLANG_ROUTER}: the engine tokenizes request {spec.index}'s text into "
                                   f"{len(tokens)} tokens, not its {spec.prompt_tokens} ids")


def relabel(specs: list[RequestSpec], seed: int, vocab_size: int = 2000) -> list[RequestSpec]:
    """``specs`` with their token ids renamed by a permutation of the prompt vocabulary drawn from ``seed``:
    the same requests (lengths, conversations, shared prefixes), other tokens."""
    perm = np.random.default_rng(seed).permutation(np.arange(FIRST_ID, vocab_size))
    return [dataclasses.replace(s, prompt_ids=tuple(int(perm[t - FIRST_ID]) for t in s.prompt_ids)) for s in specs]
