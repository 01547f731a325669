"""Exceptions raised by rewardkit, each carrying where the problem is and what was expected."""

from __future__ import annotations


class RewardKitError(Exception):
    """Base class of every error rewardkit raises on purpose."""


class ConfigError(RewardKitError, ValueError):
    """A reward configuration is malformed.

    The message reads ``<source>: <key.path>: expected <what>, got <value>`` so that a user can
    find and fix the offending key without reading rewardkit's code.
    """

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None) -> None:
        self.source = source
        self.path = path
        self.detail = message
        prefix = ""
        if source:
            prefix += f"{source}: "
        if path:
            prefix += f"{path}: "
        super().__init__(prefix + message)

    def within(self, source: str | None = None, path_prefix: str | None = None) -> "ConfigError":
        """Return a copy located in ``source`` with ``path_prefix`` prepended to the key path."""
        path = self.path
        if path_prefix:
            path = f"{path_prefix}.{path}" if path else path_prefix
        return ConfigError(self.detail, source=source or self.source, path=path)


class MissingInputError(RewardKitError, KeyError):
    """The context passed to a composer lacks a key that a component reads."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class NonFiniteInputError(RewardKitError, ValueError):
    """A context value is NaN or infinite (rewardkit refuses them unless told otherwise)."""


class InvalidInputError(RewardKitError, ValueError):
    """A context value, episode flag, step or reset mask has the wrong type or shape."""
