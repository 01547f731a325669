"""``RoutedRequest``: what an ingress hands the replica deployment, with what routers read from it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class RoutedRequest:
    """One OpenAI-style request on its way to a replica.

    ``body`` is what the engine gets (bytes of JSON); ``prompt_tokens`` and ``prompt_ids`` are what
    :func:`schedulers.serve.request_body.parse_payload` read from it (exact for token-id prompts,
    estimated for text, ids empty for text). ``key`` names the request across processes, so the
    ingress can report its first token to the router (:func:`~.router.report_first_token`).
    """

    path: str
    body: bytes
    prompt_tokens: int
    prompt_ids: list[int] = field(default_factory=list)
    stream: bool = False
    #: the prompt as text when the client sent text (for text-keyed prefix trees)
    text: str = ""
    key: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def prompt(self) -> str:
        """The prompt as text, for routers that key a prefix tree on text (Ray Serve LLM's
        ``PrefixCacheAffinityRouter`` reads ``.prompt``): the client's text, else the token ids as
        decimal words, so equal token prefixes are equal text prefixes."""
        if self.text:
            return self.text
        return " ".join(map(str, self.prompt_ids)) + " " if self.prompt_ids else "?"
