"""The state store: everything a composer's calls change, saved, restored and put back on failure.

:class:`StateStore` holds the step counter, the training flag, the stateful components and the
normalizers of a config. A saved state is plain data (the step, every stateful component's and
normalizer's state, a fingerprint of the config); loading it is all or nothing. :meth:`transaction`
puts every state holder back when a block raises, and :attr:`StateStore.guarded` lists the holders
a call must snapshot for that. :attr:`StateStore.lock` serializes the calls that change state:
every call from any thread is counted, one after another.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from contextlib import contextmanager, nullcontext
from typing import Any, ContextManager, Iterator, Mapping

from .config import RewardSpec, TermNode, spec_to_dict, walk
from .errors import ConfigError, InvalidInputError
from .inputs import check_step
from .params import describe


class StateStore:
    """The step, the training flag and every state holder of one config.

    ``stateful_nodes`` (terms whose component keeps state) and ``normalized`` (terms and groups
    with a normalizer) are in evaluation order; ``guarded`` is the part of them a call snapshots.
    ``lock`` (a :class:`StateLock`) is held by every call while it reads and changes state, so
    calls from several threads (and ``acall`` beside plain calls) run one after another and each
    is counted.
    """

    def __init__(self, spec: RewardSpec) -> None:
        self.spec = spec
        #: event loops on which an ``acall`` holding (or waiting for) ``lock`` needs to run
        self.acall_loops: dict[asyncio.AbstractEventLoop, int] = {}
        self.lock = StateLock(self._check_wait)
        self.step = 0
        self.training = True
        order = list(walk(spec.nodes))
        leaves = [n for n in order if isinstance(n, TermNode)]
        self.stateful_nodes = [n for n in leaves if n.component.stateful]
        self.components = [n.component for n in self.stateful_nodes]
        self.normalized = [n for n in order if n.normalizer is not None]
        self.normalizers = [n.normalizer for n in self.normalized]
        #: terms that count requests spent over their life (remote terms' ``max_requests``)
        self.budgeted = [n for n in leaves if hasattr(n.component, "load_spent_requests")]
        self.guarded = self._needs_snapshot()
        self.fingerprint = hashlib.sha256(
            json.dumps(_meaning(spec), sort_keys=True, default=repr).encode()).hexdigest()[:16]

    def _check_wait(self) -> None:
        """Before a call waits for ``lock``: a plain call made from inside an event loop on which an
        ``acall`` of the same composer is in flight would wait for that acall, which waits for
        this loop; it is refused with a ``RuntimeError`` instead of hanging."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self.acall_loops.get(loop):
            raise RuntimeError("a plain call of this composer from inside an event loop on which one of its acall()s "
                               "is in flight would wait for that acall forever: await composer.acall(ctx) instead")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["lock"], state["acall_loops"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.acall_loops = {}
        self.lock = StateLock(self._check_wait)

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
            **({"spent_requests": {n.name: n.component.spent_requests for n in self.budgeted}} if self.budgeted else {}),
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
        spent = self._checked_spend(state, where)
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
        for node in self.budgeted:
            if node.name in spent:
                node.component.load_spent_requests(spent[node.name])
        self.step = step
        self.training = state["training"]

    def _checked_state_header(self, state: Any, where: str) -> int:
        """Check a saved state's keys, config fingerprint, step and training flag; return the step."""
        if not isinstance(state, Mapping):
            raise ConfigError(f"expected a mapping (the output of state_dict()), got {describe(state)}", source=where)
        keys = ("step", "training", "config", "components", "normalizers")
        for key in state:
            if key not in keys and key != "spent_requests":
                raise ConfigError(f"unknown key; expected one of: {', '.join(keys)}, spent_requests", source=where,
                                  path=str(key))
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

    def _checked_spend(self, state: Mapping[str, Any], where: str) -> Mapping[str, Any]:
        """The saved ``spent_requests`` (term name -> requests sent), checked; empty when the state
        has none (saved before it was recorded: the terms keep their counts)."""
        spent = state.get("spent_requests", {})
        _check_state_section(spent, "spent_requests", {n.name: n for n in self.budgeted}, where,
                             required="spent_requests" in state)
        for name, value in spent.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"expected a non-negative integer (requests sent), got {describe(value)}",
                                  source=where, path=f"spent_requests.{name}")
        return spent

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

    def transaction(self, holders: list[Any] | None = None) -> ContextManager[None]:
        """Put every component and normalizer state (or that of ``holders``) back if the block raises
        (nothing to guard: a context that does nothing, entered on every batched call)."""
        mutable = [*self.components, *self.normalizers] if holders is None else holders
        if not mutable:
            return _NOTHING_TO_GUARD
        return _guarded(mutable)


_NOTHING_TO_GUARD = nullcontext()


@contextmanager
def _guarded(mutable: list[Any]) -> Iterator[None]:
    """Snapshot ``mutable``'s states on entering; put them back if the block raises."""
    saved = [m.snapshot() for m in mutable]
    try:
        yield
    except BaseException:
        for m, s in zip(mutable, saved, strict=True):
            m.restore(s)
        raise


class StateLock:
    """A lock whose free acquire and release are one list operation each (atomic in CPython), cheap
    enough for the one-environment hot path; a call that finds it held waits on a condition.

    ``take()`` (the list's ``pop``) raises ``IndexError`` when the lock is held; then
    :meth:`wait` blocks until it is taken. ``put(True)`` (``append``) frees it, after which a
    non-empty ``waiting`` list means :meth:`wake` must be called. Not re-entrant: a call takes it
    once. ``with lock:`` and :meth:`acquire`/:meth:`release` do all of this.
    """

    def __init__(self, before_wait: Any = None) -> None:
        self._token = [True]
        self.take = self._token.pop
        self.put = self._token.append
        self.waiting: list[bool] = []
        self._condition = threading.Condition(threading.Lock())
        self._before_wait = before_wait

    def acquire(self) -> None:
        try:
            self.take()
        except IndexError:
            self.wait()

    def wait(self) -> None:
        """Block until the lock is free, then take it (``before_wait`` may refuse to wait first)."""
        if self._before_wait is not None:
            self._before_wait()
        with self._condition:
            self.waiting.append(True)
            try:
                while True:
                    try:
                        self.take()
                        return
                    except IndexError:
                        self._condition.wait(0.05)  # also covers a release that saw no waiter yet
            finally:
                self.waiting.pop()

    def release(self) -> None:
        self.put(True)
        if self.waiting:
            self.wake()

    def wake(self) -> None:
        with self._condition:
            self._condition.notify()

    def __enter__(self) -> "StateLock":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _meaning(spec: RewardSpec) -> dict[str, Any]:
    """The config as the state fingerprint sees it: every term's ``transport_params`` (where a
    remote scorer lives, its timeouts and budgets) left out; what decides the reward stays."""
    data = spec_to_dict(spec)
    for node in walk(spec.nodes):
        transport = getattr(getattr(node, "component", None), "transport_params", ())
        if not transport:
            continue
        *groups, leaf = node.name.split("/")
        section = data["components"]
        for group in groups:
            section = section[group]["components"]
        params = section[leaf].get("params")
        if isinstance(params, dict):
            section[leaf]["params"] = {k: v for k, v in params.items() if k not in transport}
    return data


def _check_state_section(given: Any, section: str, owners: Mapping[str, Any], where: str,
                         required: bool = True) -> None:
    """A saved state section names exactly the terms in ``owners`` (when ``required``; else a subset)."""
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping of term name to state, got {describe(given)}",
                          source=where, path=section)
    for name in given:
        if name not in owners:
            raise ConfigError(f"unknown name; this composer has {section[:-1]} state for: "
                              f"{', '.join(owners) or 'nothing'}", source=where, path=f"{section}.{name}")
    for name in owners:
        if required and name not in given:
            raise ConfigError("missing key", source=where, path=f"{section}.{name}")
