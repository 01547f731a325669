"""Structure in a search space: slots that take one of several alternatives, and training settings.

A *slot* is a key path of the reward config whose value is one of several named alternatives;
each alternative brings its own tuned parameters (paths relative to the slot's value) and its own
training settings, sampled only when that alternative is chosen (Optuna's define-by-run API)::

    alternatives:
      components:                       # the slot: here the whole set of terms
        per_step:
          keep: true                    # the base config's value
          params:
            absolute.weight: {type: float, low: 0.1, high: 2.0, log: true}
          training:
            ppo.gamma: {type: float, low: 0.9, high: 0.999}
        per_request:
          entry: {latency: {type: threshold_penalty, inputs: {latency: ttft}}}
          params:
            latency.weight: {type: float, low: -2.0, high: -0.1}
    training:                           # settings every trial samples
      ppo.learning_rate: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}

The slot ``.`` is the whole reward config: each alternative is then a complete reward (its own
terms, description and ``expect:`` promises), for structures that differ in more than one key.

Training keys are dotted paths into the objective's own training config: rewardkit does not read
them; it hands them to the objective (``rewardkit.optimize.trial_training``) and, before any
trial, asks the objective to check each probe (``objective.check_training(settings)``, when the
objective has it). Optuna parameter names: the slot's path for the choice (``reward`` for ``.``),
``<slot>[<alternative>].<path>`` for an alternative's parameters, ``training.<key>`` and
``<slot>[<alternative>].training.<key>`` for training settings.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import ConfigError
from ..params import describe

ALTERNATIVE_KEYS = {"keep", "entry", "params", "training"}
ROOT = "."
ROOT_NAME = "reward"
TRAINING_PREFIX = "training."

#: builds one Dimension from (parameter name, spec, source, where) -- search_space's parser
DimensionParser = Callable[[str, Any, "str | None"], Any]


@dataclass(frozen=True)
class Alternative:
    """One value a slot can take: a new entry (or the base's, ``keep``), with its own dimensions."""

    name: str
    entry: Any                       # None with keep
    keep: bool
    params: tuple[tuple[str, Any], ...]      # (path relative to the slot, Dimension named by its parameter)
    training: tuple[tuple[str, Any], ...]    # (training key, Dimension named by its parameter)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"keep": True} if self.keep else {"entry": copy.deepcopy(self.entry)}
        if self.params:
            out["params"] = {rel: dim.to_dict() for rel, dim in self.params}
        if self.training:
            out["training"] = {key: dim.to_dict() for key, dim in self.training}
        return out


@dataclass(frozen=True)
class Slot:
    """A key path of the reward config whose value is one of ``alternatives``."""

    path: str
    alternatives: tuple[Alternative, ...]

    @property
    def keys(self) -> list[str]:
        """The slot's key path as a list ([] for the whole config)."""
        return [] if self.path == ROOT else self.path.split(".")

    @property
    def choice_name(self) -> str:
        """The Optuna parameter holding the chosen alternative's name."""
        return ROOT_NAME if self.path == ROOT else self.path

    def contains(self, path: str) -> bool:
        """Whether the key path ``path`` lies at or inside this slot."""
        return self.path == ROOT or path == self.path or path.startswith(self.path + ".")

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.alternatives]

    def alternative(self, name: Any) -> Alternative:
        for alt in self.alternatives:
            if alt.name == name:
                return alt
        raise ConfigError(f"expected one of {', '.join(self.names)}, got {describe(name)}", path=self.path)

    def to_dict(self) -> dict[str, Any]:
        return {a.name: a.to_dict() for a in self.alternatives}


def param_name(slot: str, alternative: str, rel: str) -> str:
    """The Optuna parameter name of an alternative's dimension ``rel`` (slot given by its choice name)."""
    return f"{slot}[{alternative}].{rel}"


def choice_name(path: str) -> str:
    return ROOT_NAME if path == ROOT else path


def parse_training(data: Any, where: str, source: str | None, parse_dim: DimensionParser,
                   prefix: str = "") -> tuple[tuple[str, Any], ...]:
    """``{training.key: spec}`` -> ((key, Dimension named ``<prefix>training.<key>``), ...)."""
    if not isinstance(data, Mapping) or not data:
        raise ConfigError("expected a non-empty mapping of training-config key paths to specs such as "
                          "{type: float, low: 0.0, high: 0.99}, got " + describe(data), source=source, path=where)
    out = []
    for key, spec in data.items():
        if not isinstance(key, str) or not key or any(not k for k in key.split(".")):
            raise ConfigError(f"expected a dotted training-config key such as ppo.gamma, got {describe(key)}",
                              source=source, path=where)
        out.append((key, parse_dim(f"{prefix}{TRAINING_PREFIX}{key}", spec, source, f"{where}.{key}")))
    return tuple(out)


def parse_slots(data: Any, source: str | None, parse_dim: DimensionParser) -> list[Slot]:
    """The ``alternatives:`` section: ``{slot path: {alternative name: {keep|entry, params, training}}}``."""
    if not isinstance(data, Mapping) or not data:
        raise ConfigError("expected a mapping of reward-config key paths to their alternatives, got "
                          + describe(data), source=source, path="alternatives")
    slots = []
    for path, alts in data.items():
        where = location(path)
        if not isinstance(path, str) or not path or (path != ROOT and any(not k for k in path.split("."))):
            raise ConfigError(f"expected a dotted key path such as components.latency, or '.' for the whole "
                              f"config, got {describe(path)}", source=source, path="alternatives")
        if not isinstance(alts, Mapping) or len(alts) < 2:
            raise ConfigError("expected a mapping of at least two named alternatives, got " + describe(alts),
                              source=source, path=where)
        slots.append(Slot(path, tuple(_parse_alternative(path, name, spec, source, parse_dim)
                                      for name, spec in alts.items())))
    for a in slots:
        for b in slots:
            if a is not b and a.contains(b.path):
                raise ConfigError(f"slot {b.path!r} lies inside slot {a.path!r}: give {a.path!r}'s alternatives "
                                  "their own entries instead", source=source, path=location(b.path))
    return slots


def location(slot: str) -> str:
    """How errors name a slot's section: ``alternatives.<path>`` (``alternatives.'.'`` for the whole config)."""
    return "alternatives.'.'" if slot == ROOT else f"alternatives.{slot}"


def _parse_alternative(slot: str, name: Any, spec: Any, source: str | None, parse_dim: DimensionParser) -> Alternative:
    where = f"{location(slot)}.{name}"
    if not isinstance(name, str) or not name or any(c in name for c in "[].") or name.startswith(TRAINING_PREFIX):
        raise ConfigError(f"expected an alternative name without '.', '[' or ']', got {describe(name)}",
                          source=source, path=f"alternatives.{slot}")
    if not isinstance(spec, Mapping):
        raise ConfigError("expected a mapping with keep: true or entry: {...}, and optional params and training, "
                          "got " + describe(spec), source=source, path=where)
    for key in spec:
        if key not in ALTERNATIVE_KEYS:
            raise ConfigError(f"unknown key; expected one of: {', '.join(sorted(ALTERNATIVE_KEYS))}",
                              source=source, path=f"{where}.{key}")
    keep = spec.get("keep", False)
    if keep not in (True, False):
        raise ConfigError(f"expected true or false, got {describe(keep)}", source=source, path=f"{where}.keep")
    if keep == ("entry" in spec):
        raise ConfigError("expected exactly one of keep: true (the base config's value) or entry: {...} "
                          "(the value to put at the slot)", source=source, path=where)
    params: list[tuple[str, Any]] = []
    if "params" in spec:
        block = spec["params"]
        if not isinstance(block, Mapping) or not block:
            raise ConfigError("expected a non-empty mapping of key paths (relative to the slot) to specs, got "
                              + describe(block), source=source, path=f"{where}.params")
        for rel, dim_spec in block.items():
            if not isinstance(rel, str) or not rel or any(not k for k in rel.split(".")):
                raise ConfigError(f"expected a dotted key path relative to the slot, got {describe(rel)}",
                                  source=source, path=f"{where}.params")
            params.append((rel, parse_dim(param_name(choice_name(slot), name, rel), dim_spec, source,
                                          f"{where}.params.{rel}")))
    training = ()
    if "training" in spec:
        training = parse_training(spec["training"], f"{where}.training", source, parse_dim,
                                  prefix=f"{choice_name(slot)}[{name}].")
    if slot == ROOT and not keep and not isinstance(spec.get("entry"), Mapping):
        raise ConfigError("expected a whole reward config (a mapping) as the entry of the slot '.'",
                          source=source, path=f"{where}.entry")
    return Alternative(name, copy.deepcopy(spec.get("entry")), bool(keep), tuple(params), training)
