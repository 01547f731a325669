"""Search spaces: which keys of a reward config to tune, and over what values.

A search space is a YAML mapping of key paths into the base reward config to specs::

    components.absolute.weight: {type: float, low: -2.0, high: 2.0}
    components.lat.params.sigma: {type: float, low: 0.1, high: 10, log: true}
    components.x.params.n: {type: int, low: 1, high: 8}
    components.a.normalize: {type: categorical, choices: [null, running_zscore]}
    components.a.weight.start: {type: float, low: 0.0, high: 1.0}    # inside a schedule
    components.b.enabled: {type: categorical, choices: [true, false]} # a term on/off

Beside these, two sections give the search structure (see :mod:`.alternatives`): ``alternatives:``
(slots whose value is one of several named alternatives, each with its own parameters and
training settings, sampled only when chosen) and ``training:`` (settings of the objective's own
training config, such as ``ppo.gamma``, handed to the objective with :func:`trial_training`).

``enabled`` is the one key that is not part of the reward schema: ``false`` drops that entry
from the config. Every other path must exist in the base config, except that its last key may be
an optional key the schema accepts there (a component's parameter left at its default, a
``normalize`` not set). :meth:`SearchSpace.check_against` puts each end of every range and each
choice into the base config and builds it with ``RewardComposer.from_dict``, so a path the base
lacks or a value a component refuses is a located :class:`ConfigError` before any trial runs.

This module does not import optuna: it calls ``trial.suggest_*`` on whatever trial it is given.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..composer import RewardComposer
from ..config import load_yaml, parse_yaml, require_path
from ..errors import ConfigError
from ..params import describe, is_finite_number
from ..registry import get_component_class
from .alternatives import Alternative, Slot, location, parse_slots, parse_training

KINDS = ("float", "int", "categorical")
SECTIONS = ("alternatives", "training")
ENABLED_KEY = "enabled"
_SPEC_KEYS = {"float": {"type", "low", "high", "log", "step"},
              "int": {"type", "low", "high", "log", "step"},
              "categorical": {"type", "choices"}}
_MISSING = object()
#: the most steps a float dimension's ``step`` may cut its range into: a finer grid is a continuous range
MAX_GRID_STEPS = 10**6


@dataclass(frozen=True)
class Dimension:
    """One tuned key: its path in the reward config and the values it may take."""

    path: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        """Ask ``trial`` (an Optuna trial) for a value of this dimension."""
        if self.kind == "float":
            return trial.suggest_float(self.path, self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            return trial.suggest_int(self.path, self.low, self.high, log=self.log, step=self.step or 1)
        return trial.suggest_categorical(self.path, list(self.choices))

    def probes(self) -> list[tuple[str, Any]]:
        """Values checked against the base config before any trial: both ends, or every choice."""
        if self.kind == "categorical":
            return [(f"choice {describe(c)}", c) for c in self.choices]
        return [(f"low {describe(self.low)}", self.low), (f"high {describe(self.high)}", self.high)]

    def contains(self, value: Any) -> bool:
        """True when ``value`` is one this dimension can take (used for enqueued configs)."""
        if self.kind == "categorical":
            return any(value == c and type(value) is type(c) for c in self.choices) or (
                value is None and None in self.choices)
        if not is_finite_number(value):
            return False
        if self.kind == "int" and float(value) != int(value):
            return False
        return self.low <= value <= self.high

    def to_dict(self) -> dict[str, Any]:
        """The spec as written in YAML."""
        if self.kind == "categorical":
            return {"type": "categorical", "choices": list(self.choices)}
        out: dict[str, Any] = {"type": self.kind, "low": self.low, "high": self.high}
        if self.log:
            out["log"] = True
        if self.step is not None:
            out["step"] = self.step
        return out


class SearchSpace:
    """The tuned dimensions of a reward config; builds each trial's config from sampled values."""

    def __init__(self, dimensions: list[Dimension], *, source: str | None = None, slots: list[Slot] | None = None,
                 training: tuple[tuple[str, Dimension], ...] = ()) -> None:
        self.dimensions = dimensions
        self.slots = list(slots or [])
        self.training = tuple(training)
        self.source = source

    # ---- reading ----------------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, path: str | Path) -> "SearchSpace":
        """Read and check a search-space file (shape only; see :meth:`check_against`). ``path`` is a
        ``str`` or ``os.PathLike`` (an int would be a file descriptor: a ``TypeError``)."""
        require_path(path, "SearchSpace.from_yaml")
        return cls.from_dict(load_yaml(path), source=str(path))

    @classmethod
    def from_text(cls, text: str, *, source: str = "<string>") -> "SearchSpace":
        """Parse search-space YAML text."""
        return cls.from_dict(parse_yaml(text, source=source), source=source)

    @classmethod
    def from_dict(cls, data: Any, *, source: str | None = None) -> "SearchSpace":
        """Check a ``{path: spec}`` mapping; errors name the source and the path."""
        if not isinstance(data, Mapping) or not data:
            got = "an empty document" if data is None else describe(data)
            raise ConfigError("expected a non-empty mapping of reward-config key paths to specs "
                              "such as {type: float, low: 0.0, high: 1.0}, got " + got, source=source)
        dims = [_parse_dimension(path, spec, source) for path, spec in data.items() if path not in SECTIONS]
        slots = parse_slots(data["alternatives"], source, _named_dimension) if "alternatives" in data else []
        training = parse_training(data["training"], "training", source, _named_dimension) if "training" in data else ()
        for dim in dims:
            for slot in slots:
                if slot.contains(dim.path):
                    raise ConfigError(f"this key lies inside the slot {slot.path!r}, whose value each alternative "
                                      f"sets: tune it under {location(slot.path)}.<name>.params",
                                      source=source, path=dim.path)
        keys = [key for key, _ in training]
        for slot in slots:
            for alt in slot.alternatives:
                for key, _ in alt.training:
                    if key in keys:
                        raise ConfigError(f"the training key {key!r} is tuned in the training section too; "
                                          "tune it in one place", source=source,
                                          path=f"{location(slot.path)}.{alt.name}.training.{key}")
        return cls(dims, source=source, slots=slots, training=training)

    def to_dict(self) -> dict[str, Any]:
        """The search space as written in YAML."""
        out: dict[str, Any] = {d.path: d.to_dict() for d in self.dimensions}
        if self.slots:
            out["alternatives"] = {slot.path: slot.to_dict() for slot in self.slots}
        if self.training:
            out["training"] = {key: dim.to_dict() for key, dim in self.training}
        return out

    @property
    def paths(self) -> list[str]:
        """The plain dimensions' key paths."""
        return [d.path for d in self.dimensions]

    @property
    def has_training(self) -> bool:
        """Whether any training setting is tuned (globally or in an alternative)."""
        return bool(self.training) or any(alt.training for slot in self.slots for alt in slot.alternatives)

    @property
    def param_names(self) -> list[str]:
        """Every Optuna parameter this space can sample (choices, conditional ones, training)."""
        names = list(self.paths)
        for slot in self.slots:
            names.append(slot.choice_name)
            for alt in slot.alternatives:
                names += [dim.path for _, dim in alt.params + alt.training]
        return names + [dim.path for _, dim in self.training]

    # ---- applying -----------------------------------------------------------------------------
    def apply(self, base: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
        """A deep copy of ``base`` with ``values[path]`` put at each path (``enabled: false`` drops);
        a slot's chosen alternative (``values[slot path]``) first, then its parameters."""
        config = copy.deepcopy(dict(base))
        for slot in self.slots:
            if slot.choice_name not in values:
                continue
            alt = slot.alternative(values[slot.choice_name])
            keys = slot.keys
            if not alt.keep and keys:
                _put(config, keys, copy.deepcopy(alt.entry))
            elif not alt.keep:
                config = copy.deepcopy(dict(alt.entry))
            for rel, dim in alt.params:
                if dim.path in values:
                    _put(config, keys + rel.split("."), values[dim.path])
        drops = []
        for dim in self.dimensions:
            if dim.path not in values:
                continue
            keys = dim.path.split(".")
            if keys[-1] == ENABLED_KEY:
                if not values[dim.path]:
                    drops.append(keys[:-1])
                continue
            _put(config, keys, values[dim.path])
        for keys in sorted(drops, key=len, reverse=True):
            parent = _get(config, keys[:-1])
            parent.pop(keys[-1], None)
        return config

    def sample(self, base: Mapping[str, Any], trial: Any) -> dict[str, Any]:
        """Suggest every dimension on ``trial`` and return the resulting reward config.

        A slot's choice is suggested first; only the chosen alternative's parameters and training
        settings are suggested after it (conditional parameters). Training settings are on
        ``trial.params``: :meth:`training_values` reads them.
        """
        values = {d.path: d.suggest(trial) for d in self.dimensions}
        for slot in self.slots:
            values[slot.choice_name] = trial.suggest_categorical(slot.choice_name, slot.names)
            alt = slot.alternative(values[slot.choice_name])
            for _, dim in alt.params + alt.training:
                values[dim.path] = dim.suggest(trial)
        for _, dim in self.training:
            values[dim.path] = dim.suggest(trial)
        return self.apply(base, values)

    def training_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The training settings among sampled ``values``: {training key: value}."""
        out = {key: values[dim.path] for key, dim in self.training if dim.path in values}
        for slot in self.slots:
            if slot.choice_name in values:
                alt = slot.alternative(values[slot.choice_name])
                out.update({key: values[dim.path] for key, dim in alt.training if dim.path in values})
        return out

    def values_in(self, config: Mapping[str, Any], *, source: str | None = None) -> dict[str, Any]:
        """The value each dimension has in ``config`` (to enqueue a known config as a trial)."""
        values = self._slot_values_in(config, source)
        for dim in self.dimensions:
            keys = dim.path.split(".")
            if keys[-1] == ENABLED_KEY:
                entry = _lookup(config, keys[:-1])
                value = entry is not _MISSING
            else:
                value = _lookup(config, keys)
                if value is _MISSING and keys[-2:-1] != ["params"] and keys[-1] != "normalize":
                    raise ConfigError(f"expected a value for the search space's key {dim.path!r}, "
                                      "got nothing (the key is missing)", source=source, path=dim.path)
                if value is _MISSING:
                    value = None if keys[-1] == "normalize" else _default_param(config, keys, source, dim.path)
            if not dim.contains(value):
                raise ConfigError(f"expected a value in the search space ({_describe_dim(dim)}) so that the "
                                  f"config can be enqueued, got {describe(value)}", source=source, path=dim.path)
            values[dim.path] = value
        return values

    def _slot_values_in(self, config: Mapping[str, Any], source: str | None) -> dict[str, Any]:
        """Each slot's alternative in ``config`` and its parameters' values there (training left to sample).

        An alternative whose entry matches the config's value at the slot (its parameters aside) is
        chosen; else the ``keep`` alternative (the base config's value)."""
        values: dict[str, Any] = {}
        for slot in self.slots:
            have = _lookup(config, slot.keys)
            chosen = next((a for a in slot.alternatives if _entry_matches(a, have)), None)
            chosen = chosen or next((a for a in slot.alternatives if a.keep), None)
            if chosen is None:
                raise ConfigError(f"the config's value at the slot matches none of its alternatives "
                                  f"({', '.join(slot.names)})", source=source, path=slot.path)
            values[slot.choice_name] = chosen.name
            for rel, dim in chosen.params:
                value = _lookup(have, rel.split(".")) if have is not _MISSING else _MISSING
                if value is _MISSING or not dim.contains(value):
                    raise ConfigError(f"expected a value in the search space ({_describe_dim(dim)}) so that the config "
                                      f"can be enqueued, got {describe(None if value is _MISSING else value)}",
                                      source=source, path=dim.path)
                values[dim.path] = value
        return values

    def check_structure(self, base: Mapping[str, Any], *, base_source: str | None = None,
                        check_training: Any = None) -> None:
        """Check every slot and training setting before any trial (see :meth:`check_against` for the rest).

        Each alternative's entry must build in place of the slot's value, and each of its
        parameters' probes with it; each training probe goes to ``check_training(settings)``
        (the objective's own check), when given. Errors are located ``ConfigError``.
        """
        base_name = base_source or "the base config"
        for slot in self.slots:
            keys = slot.keys
            parent = _lookup(base, keys[:-1]) if len(keys) > 1 else base
            if not isinstance(parent, Mapping):
                raise ConfigError(f"{base_name} has no mapping at {'.'.join(keys[:-1])} to hold the slot",
                                  source=self.source, path=location(slot.path))
            for alt in slot.alternatives:
                where = f"{location(slot.path)}.{alt.name}"
                if alt.keep and keys and keys[-1] not in parent:
                    raise ConfigError(f"keep: true needs the slot's value in {base_name}, which has no key "
                                      f"{keys[-1]!r} there", source=self.source, path=where)
                probes = [("entry", {})] + [(f"{rel}: {label}", {dim.path: value}) for rel, dim in alt.params
                                            for label, value in dim.probes()]
                for label, extra in probes:
                    config = self.apply(base, {slot.choice_name: alt.name, **extra})
                    try:
                        RewardComposer.from_dict(config, source=base_source)
                    except ConfigError as exc:
                        raise ConfigError(f"{label} does not build in {base_name}: {exc}", source=self.source,
                                          path=where) from None
                if check_training is not None:
                    self._check_training(alt.training, check_training, f"{where}.training")
        if check_training is not None:
            self._check_training(self.training, check_training, "training")

    def _check_training(self, dims: tuple[tuple[str, Dimension], ...], check: Any, where: str) -> None:
        for key, dim in dims:
            for label, value in dim.probes():
                try:
                    check({key: value})
                except ConfigError as exc:
                    raise ConfigError(f"{label} is refused by the objective's training config: {exc}",
                                      source=self.source, path=f"{where}.{key}") from None

    # ---- checking ------------------------------------------------------------------------------
    def check_against(self, base: Mapping[str, Any], *, base_source: str | None = None) -> None:
        """Raise a located ``ConfigError`` for a path ``base`` lacks or a value its schema refuses.

        Each dimension's probes (both ends, or every choice) must build in the base config. To stay
        linear in the config's size they are built in rounds (every dimension's low at once, then
        every high, then each choice index), and a round that fails is split in halves until the
        single dimension whose value is refused is found (a group that builds passes together).
        """
        base_name = base_source or "the base config"
        try:
            RewardComposer.from_dict(base, source=base_source)
        except ConfigError as exc:
            raise ConfigError(f"the base config does not build: {exc}", source=self.source) from None
        rounds: dict[int, list[tuple[Dimension, str, Any]]] = {}
        for dim in self.dimensions:
            self._check_path(base, dim.path.split("."), dim.path, base_name)
            for i, (label, value) in enumerate(dim.probes()):
                rounds.setdefault(i, []).append((dim, label, value))
        for group in rounds.values():
            self._check_probes(base, group, base_source, base_name)

    def _check_probes(self, base: Mapping[str, Any], group: list[tuple[Dimension, str, Any]],
                      base_source: str | None, base_name: str) -> None:
        config = self.apply(base, {dim.path: value for dim, _, value in group})
        try:
            RewardComposer.from_dict(config, source=base_source)
            return
        except ConfigError as exc:
            if len(group) == 1:
                dim, label, _ = group[0]
                reason = exc.detail if exc.path == dim.path else str(exc)
                raise ConfigError(f"{label} is refused by {base_name}'s schema: {reason}",
                                  source=self.source, path=dim.path) from None
        half = len(group) // 2
        self._check_probes(base, group[:half], base_source, base_name)
        self._check_probes(base, group[half:], base_source, base_name)

    def _check_path(self, base: Mapping[str, Any], keys: list[str], path: str, base_name: str) -> None:
        node: Any = base
        walked: list[str] = []
        last = len(keys) - 1
        for i, key in enumerate(keys):
            if not isinstance(node, Mapping):
                where = ".".join(walked)
                raise ConfigError(f"{base_name} has {describe(node)} at {where}, not a mapping to go into",
                                  source=self.source, path=path)
            if key in node:
                node = node[key]
                walked.append(key)
                continue
            optional_last = i == last and _is_component_entry(node) and key in {ENABLED_KEY, "normalize",
                                                                                "transforms", "weight"}
            params_of_term = key == "params" and i == last - 1 and _is_component_entry(node)
            param_default = i == last and walked[-1:] == ["params"]
            if optional_last or param_default:
                return  # the value probes check that the schema accepts the key
            if params_of_term:
                node = {}
                walked.append(key)
                continue
            where = ".".join(walked) or "the top level"
            have = ", ".join(str(k) for k in node) or "nothing"
            raise ConfigError(f"{base_name} has no key {key!r} under {where} (it has: {have})",
                              source=self.source, path=path)


def _is_component_entry(node: Mapping[str, Any]) -> bool:
    return "type" in node


def _entry_matches(alt: Alternative, have: Any) -> bool:
    """True when ``have`` is ``alt``'s entry with some values at its parameters' paths."""
    if alt.keep or have is _MISSING:
        return False
    probe = copy.deepcopy(alt.entry)
    for rel, _ in alt.params:
        value = _lookup(have, rel.split("."))
        if value is not _MISSING:
            _put(probe, rel.split("."), value)
    return probe == have


def _named_dimension(name: str, spec: Any, source: str | None, where: str) -> Dimension:
    """A dimension parsed with errors located at ``where`` and named ``name`` for Optuna."""
    return dataclasses.replace(_parse_dimension(where, spec, source), path=name)


def _parse_dimension(path: Any, spec: Any, source: str | None) -> Dimension:
    kind = _dimension_kind(path, spec, source)
    if kind == "categorical":
        return _categorical_dimension(path, spec, source)
    return _numeric_dimension(path, kind, spec, source)


def _dimension_kind(path: Any, spec: Any, source: str | None) -> str:
    """Check the key path and the spec's keys; return its ``type`` (one of ``KINDS``)."""
    if not isinstance(path, str) or not path or any(not k for k in path.split(".")):
        raise ConfigError(f"expected a dotted key path such as components.a.weight, got {describe(path)}",
                          source=source, path=str(path))
    if not isinstance(spec, Mapping):
        raise ConfigError("expected a mapping such as {type: float, low: 0.0, high: 1.0}, got "
                          + describe(spec), source=source, path=path)
    kind = spec.get("type", _MISSING)
    if kind not in KINDS:
        got = "nothing (the key is missing)" if kind is _MISSING else describe(kind)
        raise ConfigError(f"expected one of {', '.join(KINDS)}, got {got}", source=source, path=f"{path}.type")
    for key in spec:
        if key not in _SPEC_KEYS[kind]:
            raise ConfigError(f"unknown key for a {kind} dimension; expected one of: "
                              f"{', '.join(sorted(_SPEC_KEYS[kind]))}", source=source, path=f"{path}.{key}")
    if path.split(".")[-1] == ENABLED_KEY:
        if kind != "categorical" or any(not isinstance(c, bool) for c in spec.get("choices") or [None]):
            raise ConfigError("expected {type: categorical, choices: [true, false]} for a term on/off",
                              source=source, path=path)
    return kind


def _categorical_dimension(path: str, spec: Mapping[str, Any], source: str | None) -> Dimension:
    """``{type: categorical, choices: [...]}``: distinct, finite, plain YAML scalars."""
    choices = spec.get("choices", _MISSING)
    if not isinstance(choices, list) or not choices:
        got = "nothing (the key is missing)" if choices is _MISSING else describe(choices)
        raise ConfigError(f"expected a non-empty list of choices, got {got}", source=source,
                          path=f"{path}.choices")
    for n, choice in enumerate(choices):
        if choice is not None and not isinstance(choice, (bool, int, float, str)):
            raise ConfigError(f"expected null, a boolean, a number or a string, got {describe(choice)}",
                              source=source, path=f"{path}.choices[{n}]")
        if isinstance(choice, float) and not math.isfinite(choice):
            raise ConfigError(f"expected a finite number, got {describe(choice)}", source=source,
                              path=f"{path}.choices[{n}]")
    if len({(type(c), c) for c in choices}) != len(choices):
        raise ConfigError(f"expected distinct choices, got {describe(choices)}", source=source,
                          path=f"{path}.choices")
    return Dimension(path, "categorical", choices=tuple(choices))


def _numeric_dimension(path: str, kind: str, spec: Mapping[str, Any], source: str | None) -> Dimension:
    """``{type: float|int, low, high, log?, step?}`` with low < high, log only above 0, not both log and step."""
    bounds = {}
    for key in ("low", "high"):
        value = spec.get(key, _MISSING)
        ok = is_finite_number(value) and (kind == "float" or float(value) == int(value))
        if not ok:
            want = "a finite number" if kind == "float" else "an integer"
            got = "nothing (the key is missing)" if value is _MISSING else describe(value)
            raise ConfigError(f"expected {want}, got {got}", source=source, path=f"{path}.{key}")
        bounds[key] = float(value) if kind == "float" else int(value)
    low, high = bounds["low"], bounds["high"]
    if not low < high:
        raise ConfigError(f"expected low < high, got low={low} and high={high}", source=source, path=path)
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"expected true or false, got {describe(log)}", source=source, path=f"{path}.log")
    if log and low <= 0:
        raise ConfigError(f"expected low > 0 with log: true, got low={low}", source=source, path=f"{path}.low")
    step = spec.get("step")
    if step is not None:
        if not is_finite_number(step) or step <= 0 or (kind == "int" and float(step) != int(step)):
            raise ConfigError(f"expected a positive {'integer' if kind == 'int' else 'number'} or null, "
                              f"got {describe(step)}", source=source, path=f"{path}.step")
        if log and kind == "float":
            raise ConfigError("expected either step or log: true, not both", source=source, path=path)
        step = int(step) if kind == "int" else float(step)
        if step > high - low:
            raise ConfigError(f"expected a step of at most high - low ({high - low:g}), got {describe(step)}",
                              source=source, path=f"{path}.step")
        steps = (high - low) / step
        if kind == "float" and steps > MAX_GRID_STEPS:
            raise ConfigError(f"expected a step giving at most {MAX_GRID_STEPS} steps from low to high, got "
                              f"{describe(step)} ({steps:.3g} steps); use a larger step, or none",
                              source=source, path=f"{path}.step")
    return Dimension(path, kind, low, high, log, step)


def _describe_dim(dim: Dimension) -> str:
    if dim.kind == "categorical":
        return "one of " + ", ".join(describe(c) for c in dim.choices)
    return f"{dim.kind} in [{dim.low}, {dim.high}]"


def _get(config: Any, keys: list[str]) -> Any:
    node = config
    for key in keys:
        node = node[key]
    return node


def _lookup(config: Any, keys: list[str]) -> Any:
    node = config
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _put(config: dict[str, Any], keys: list[str], value: Any) -> None:
    node = config
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        node = child
    node[keys[-1]] = value


def _default_param(config: Mapping[str, Any], keys: list[str], source: str | None, path: str) -> Any:
    """The declared default of a component parameter the config leaves out."""
    entry = _lookup(config, keys[:-2])
    kind = entry.get("type") if isinstance(entry, Mapping) else None
    if not isinstance(kind, str):
        raise ConfigError("expected a component entry with a 'type' to read a default from",
                          source=source, path=path)
    param = get_component_class(kind).params.get(keys[-1])
    if param is None or param.required:
        raise ConfigError("expected a value (the component has no default for it), got nothing",
                          source=source, path=path)
    return param.default
