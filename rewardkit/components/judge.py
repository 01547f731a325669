"""``judge``: a language model behind an OpenAI-compatible endpoint rates each completion against a rubric."""

from __future__ import annotations

import string
from dataclasses import replace
from functools import partial
from typing import Any, Sequence
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..params import Param, describe
from ..registry import register
from ..remote.batching import Unscored
from ..remote.judge_answers import LabelScale, TopLogprobs, chat_answer, completion_answers
from ..remote.term_params import REMOTE_PARAMS, redacted, url_param
from ..remote.stats import CallStats
from ..remote.term import RemoteTerm

DIGITS = [str(d) for d in range(10)]


def rubric_param(doc: str) -> Param:
    """A required question template naming ``{completion}`` (and optionally ``{prompt}``)."""
    expected = "a template naming {completion} and optionally {prompt} (other braces doubled: {{ }})"

    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(expected)
        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError:
            raise ValueError(expected) from None
        if "completion" not in fields or not fields <= {"completion", "prompt"}:
            raise ValueError(expected)
        return value

    return replace(Param.string(doc=doc), expected=expected, check=check)


def labels_param(default: list[str], doc: str) -> Param:
    """Two or more distinct answers without spaces (compared case-insensitively), lowest first."""
    expected = "a list of at least two distinct labels without spaces (lowest first), e.g. [no, yes]"

    def check(value: Any) -> tuple[str, ...]:
        if not isinstance(value, (list, tuple)) or len(value) < 2:
            raise ValueError(expected)
        labels = [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
        if (not all(isinstance(v, str) and v and not any(c.isspace() for c in v) for v in labels)
                or len({v.lower() for v in labels}) != len(labels)):
            raise ValueError(expected)
        return tuple(labels)

    return replace(Param.string(doc=doc), default=default, expected=expected, check=check)


@register("judge")
class Judge(RemoteTerm):
    """A model's rubric verdict on each completion in [0, 1]: labels' values weighted by first-token probabilities.

    Asks ``model`` at ``url`` (an OpenAI-compatible ``.../v1/chat/completions`` or
    ``.../v1/completions`` endpoint) the ``rubric`` with ``{prompt}`` and ``{completion}`` filled
    in, at temperature 0. The allowed answers ``labels`` (default 0..9; ``[no, yes]`` for a yes/no
    question) are worth evenly spaced values from 0 (the first) to 1 (the last). With
    ``score_from: logprobs`` the score is the probability-weighted mean value of the labels among
    the first generated token's ``top_logprobs`` alternatives, renormalised over the labels; when
    none is there (or the endpoint gives no logprobs) the answer's text is read instead, as with
    ``score_from: text``: the first label in it as a word. An answer without any label is a
    failure of that item. A chat endpoint takes one conversation per request (``batch_size: 1``);
    a completions endpoint takes ``batch_size`` prompts per request. Concurrency, timeouts,
    retries, the cache, budgets and the failure policy are those of ``remote_score``; the
    breakdown also counts ``text_answers`` (items scored from text). See docs/remote-terms.md.
    """

    params = {
        "url": url_param("OpenAI-compatible endpoint ending in /v1/chat/completions or /v1/completions"),
        "model": Param.string(doc="model name the endpoint serves"),
        "rubric": rubric_param("the question, with {completion} and optionally {prompt} filled in per item"),
        "labels": labels_param(DIGITS, "allowed answers, lowest first; worth 0 to 1 evenly spaced"),
        "score_from": Param.choice(("logprobs", "text"), "logprobs",
                                   "read the first token's top logprobs (text when none is a label), or only the text"),
        "top_logprobs": Param.integer(20, "alternatives asked for the first token", minimum=1, maximum=20),
        "max_tokens": Param.integer(8, "tokens the judge may answer with", minimum=1, maximum=4096),
        "system": Param.string(doc="system message sent first (chat endpoints); null: none").or_null(),
        **REMOTE_PARAMS,
        "batch_size": Param.integer(1, "prompts per request (1 for a chat endpoint)", minimum=1),
        "default": Param.fraction(0.0, "value of an item that could not be scored, with on_failure: default"),
    }
    output_range = (0.0, 1.0)

    def _validate(self) -> None:
        super()._validate()
        path = urlsplit(self.url).path.rstrip("/")
        if path.endswith("/chat/completions"):
            self.chat = True
        elif path.endswith("/completions"):
            self.chat = False
        else:
            raise ConfigError(f"expected an OpenAI-compatible endpoint ending in /v1/chat/completions or "
                              f"/v1/completions, got {describe(redacted(self.url))}", path="params.url")
        if self.chat and self.batch_size != 1:
            raise ConfigError(f"expected 1 for a chat endpoint (one conversation per request), got {self.batch_size}; "
                              "a /v1/completions url takes batches", path="params.batch_size")
        if self.system is not None and not self.chat:
            raise ConfigError("expected null for a /v1/completions url (a system message needs a chat endpoint)",
                              path="params.system")
        self._scale = LabelScale(self.labels)

    def question(self, prompt: str, completion: str) -> str:
        """The rubric filled in for one item."""
        return self.rubric.format(prompt=prompt, completion=completion)

    def request(self, keys: list[tuple[str, str]]) -> dict[str, Any]:
        """The JSON body asking about a batch of (prompt, completion) pairs."""
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "temperature": 0.0}
        wants_logprobs = self.score_from == "logprobs"
        if self.chat:
            (prompt, completion), = keys
            system = [{"role": "system", "content": self.system}] if self.system is not None else []
            body["messages"] = system + [{"role": "user", "content": self.question(prompt, completion)}]
            if wants_logprobs:
                body.update(logprobs=True, top_logprobs=self.top_logprobs)
        else:
            body["prompt"] = [self.question(prompt, completion) for prompt, completion in keys]
            if wants_logprobs:
                body["logprobs"] = self.top_logprobs
        return body

    async def score_batch(self, keys: list[tuple[str, str]], stats: CallStats) -> Sequence[float | Unscored]:
        answers = (lambda body: [chat_answer(body)]) if self.chat else partial(completion_answers, n=len(keys))

        def read(body: Any) -> list[float | Unscored]:  # all of it inside the client: any error is a malformed answer
            return [self.verdict(text, top, stats) for text, top in answers(body)]

        return await self._client.post(self.request(keys), read, self._budget, stats)

    def verdict(self, text: str, top: TopLogprobs | None, stats: CallStats) -> float | Unscored:
        """The score of one answer (see the class doc); counts ``text_answers``."""
        if self.score_from == "logprobs" and top is not None:
            weighted = self._scale.from_logprobs(top)
            if weighted is not None:
                return weighted[0]
        value = self._scale.from_text(text)
        if value is None:
            return Unscored(f"the judge's answer has none of the labels {', '.join(self.labels)}: {describe(text)}")
        stats.count("text_answers")
        return value
