"""Exceptions raised by rewardkit, each carrying where the problem is and what was expected."""

from __future__ import annotations

from typing import Sequence


class RewardKitError(Exception):
    """Base class of every error rewardkit raises on purpose."""


class ConfigError(RewardKitError, ValueError):
    """A reward configuration is malformed.

    The message reads ``<source>: <key.path>: expected <what>, got <value>`` so that a user can
    find and fix the offending key without reading rewardkit's code. Validation reports every
    problem of a file at once: ``errors`` lists them (one located ``ConfigError`` each; a single
    problem lists itself), and the message of an error with several lists all of them.
    """

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None) -> None:
        self.source = source
        self.path = path
        self.detail = message
        self.errors: list[ConfigError] = [self]
        super().__init__(_located(source, path, message))

    @classmethod
    def combine(cls, errors: Sequence["ConfigError"]) -> "ConfigError":
        """One error reporting all of ``errors`` (flattened); the error itself when there is one.

        The message is ``<source>: N errors:`` followed by one ``<key.path>: <detail>`` line per
        problem; ``.path`` and ``.detail`` are those of the first problem.
        """
        flat = [single for exc in errors for single in exc.errors]
        if not flat:
            raise ValueError("ConfigError.combine needs at least one error")
        if len(flat) == 1:
            return flat[0]
        sources = {e.source for e in flat}
        source = flat[0].source if len(sources) == 1 else None
        lines = [_located(None if source else e.source, e.path, e.detail) for e in flat]
        combined = cls(flat[0].detail, source=source, path=flat[0].path)
        combined.errors = flat
        combined.args = (_located(source, None, f"{len(flat)} errors:") + "".join(f"\n  {line}" for line in lines),)
        return combined

    def within(self, source: str | None = None, path_prefix: str | None = None) -> "ConfigError":
        """Return a copy located in ``source`` with ``path_prefix`` prepended to the key path."""
        if len(self.errors) > 1:
            return ConfigError.combine([e.within(source, path_prefix) for e in self.errors])
        path = self.path
        if path_prefix:
            path = (f"{path_prefix}{path}" if path.startswith("[") else f"{path_prefix}.{path}") if path else path_prefix
        return ConfigError(self.detail, source=source or self.source, path=path)


def _located(source: str | None, path: str | None, message: str) -> str:
    prefix = ""
    if source:
        prefix += f"{source}: "
    if path:
        prefix += f"{path}: "
    return prefix + message


class MissingInputError(RewardKitError, KeyError):
    """The context passed to a composer lacks a key that a component reads."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class NonFiniteInputError(RewardKitError, ValueError):
    """A context value is NaN or infinite (rewardkit refuses them unless told otherwise)."""


class InvalidInputError(RewardKitError, ValueError):
    """A context value, episode flag, step or reset mask has the wrong type or shape."""


class RemoteScoreError(RewardKitError):
    """A remote reward term (an HTTP scorer or judge) failed and its policy is to raise; the
    message names the term and the URL. A call that raises this changes no composer state."""
