"""The state store: everything a composer's calls change, saved, restored and put back on failure.

:class:`StateStore` holds the step counter, the training flag, the stateful components and the
normalizers of a config. A saved state is plain data (the step, every stateful component's and
normalizer's state, a fingerprint of the config); loading it is all or nothing. :meth:`transaction`
puts every state holder back when a block raises, and :attr:`StateStore.guarded` lists the holders
a call must snapshot for that.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from .config import RewardSpec, TermNode, spec_to_dict, walk
from .errors import ConfigError, InvalidInputError
from .inputs import check_step
from .params import describe


class StateStore:
    """The step, the training flag and every state holder of one config.

    ``stateful_nodes`` (terms whose component keeps state) and ``normalized`` (terms and groups
    with a normalizer) are in evaluation order; ``guarded`` is the part of them a call snapshots.
    """

    def __init__(self, spec: RewardSpec) -> None:
        self.spec = spec
        self.step = 0
        self.training = True
        order = list(walk(spec.nodes))
        leaves = [n for n in order if isinstance(n, TermNode)]
        self.stateful_nodes = [n for n in leaves if n.component.stateful]
        self.components = [n.component for n in self.stateful_nodes]
        self.normalized = [n for n in order if n.normalizer is not None]
        self.normalizers = [n.normalizer for n in self.normalized]
        self.guarded = self._needs_snapshot()
        self.fingerprint = hashlib.sha256(
            json.dumps(spec_to_dict(spec), sort_keys=True, default=repr).encode()).hexdigest()[:16]

    def reset(self, mask: Any = None) -> None:
        """Clear per-environment state (everywhere, or where ``mask`` is true), all or nothing."""
        with self.transaction():
            for comp in self.components:
                comp.reset(mask)
            for norm in self.normalizers:
                norm.reset(mask)

    def state_dict(self) -> dict[str, Any]:
        """Plain data (JSON/YAML-safe) capturing the step, every component and normalizer state,
        and a fingerprint of the config it belongs to."""
        return {
            "step": self.step,
            "training": self.training,
            "config": self.fingerprint,
            "components": {n.name: n.component.state_dict() for n in self.stateful_nodes},
            "normalizers": {n.name: n.normalizer.state_dict() for n in self.normalized},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output; later outputs equal those of the saved composer.

        All or nothing: the state is checked (names, types, shapes, finite numbers, the config it
        came from) and a ``ConfigError`` naming the key path leaves this composer unchanged.
        """
        where = "state_dict"
        step = self._checked_state_header(state, where)
        parts = [("components", {n.name: n.component for n in self.stateful_nodes}),
                 ("normalizers", {n.name: n.normalizer for n in self.normalized})]
        for section, owners in parts:
            _check_state_section(state[section], section, owners, where)
        with self.transaction():
            for section, owners in parts:
                for name, owner in owners.items():
                    try:
                        owner.load_state_dict(state[section][name])
                    except ConfigError as exc:
                        raise exc.within(where, f"{section}.{name}") from None
                    except Exception as exc:  # a third-party component's own check
                        raise ConfigError(f"{type(exc).__name__}: {exc}", source=where,
                                          path=f"{section}.{name}") from exc
        self.step = step
        self.training = state["training"]

    def _checked_state_header(self, state: Any, where: str) -> int:
        """Check a saved state's keys, config fingerprint, step and training flag; return the step."""
        if not isinstance(state, Mapping):
            raise ConfigError(f"expected a mapping (the output of state_dict()), got {describe(state)}", source=where)
        keys = ("step", "training", "config", "components", "normalizers")
        for key in state:
            if key not in keys:
                raise ConfigError(f"unknown key; expected one of: {', '.join(keys)}", source=where, path=str(key))
        for key in keys:
            if key not in state:
                raise ConfigError("missing key", source=where, path=key)
        if state["config"] != self.fingerprint:
            raise ConfigError(f"expected {self.fingerprint!r} (this composer's config), got "
                              f"{describe(state['config'])}: the state was saved from a different reward config",
                              source=where, path="config")
        try:
            step = check_step(state["step"])
        except InvalidInputError as exc:
            raise ConfigError(str(exc).split(": ", 1)[1], source=where, path="step") from None
        if not isinstance(state["training"], bool):
            raise ConfigError(f"expected true or false, got {describe(state['training'])}", source=where, path="training")
        return step

    def end_episodes(self, done: Any) -> None:
        """Clear the stateful components' state of the environments whose episode ended (``done``)."""
        for comp in self.components:
            comp.reset(done)

    def _needs_snapshot(self) -> list[Any]:
        """The state holders a call must snapshot so that a failing call changes nothing.

        A call updates stateful components, then normalizers (children before their group). One
        needs a snapshot unless it fails only before writing (``atomic_update``) and nothing
        updated after it can fail; the rest of a call (transforms, weights, sums) cannot fail.
        """
        post_order = [node.normalizer for node in walk(self.spec.nodes, children_first=True)
                      if node.normalizer is not None]
        sequence = [(c, c.atomic_update, True) for c in self.components]
        sequence += [(n, n.atomic_update, n.can_fail) for n in post_order]
        return [holder for i, (holder, atomic, _) in enumerate(sequence)
                if not atomic or any(fails for _, _, fails in sequence[i + 1:])]

    @contextmanager
    def transaction(self, holders: list[Any] | None = None) -> Iterator[None]:
        """Put every component and normalizer state (or that of ``holders``) back if the block raises."""
        mutable = [*self.components, *self.normalizers] if holders is None else holders
        if not mutable:
            yield
            return
        saved = [m.snapshot() for m in mutable]
        try:
            yield
        except BaseException:
            for m, s in zip(mutable, saved, strict=True):
                m.restore(s)
            raise


def _check_state_section(given: Any, section: str, owners: Mapping[str, Any], where: str) -> None:
    """A saved ``components``/``normalizers`` section names exactly the terms in ``owners``."""
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping of term name to state, got {describe(given)}",
                          source=where, path=section)
    for name in given:
        if name not in owners:
            raise ConfigError(f"unknown name; this composer has {section[:-1]} state for: "
                              f"{', '.join(owners) or 'nothing'}", source=where, path=f"{section}.{name}")
    for name in owners:
        if name not in given:
            raise ConfigError("missing key", source=where, path=f"{section}.{name}")
