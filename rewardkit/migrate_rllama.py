"""Convert an RLlama reward config (``composer_settings`` / ``reward_components`` / ``reward_shaping``)
into a rewardkit config, and say what could not be converted with the line it came from.

RLlama's layout: ``reward_components.<name>: {class, params}`` lists the components,
``reward_shaping.<name>: {initial_weight, decay_schedule, decay_steps, decay_rate, min_weight,
max_weight, start_step}`` their weights (keyed by component name, or by the class's registered
name), and ``composer_settings: {normalize, normalization_strategy, norm_window}`` a per-component
normalization. The conversion:

- ``InfoValueReward`` (``info_key``, ``default_value``) -> ``info_value`` (``key``, ``default``);
  ``StepPenaltyReward`` / ``step_penalty`` (``penalty``) -> ``info_value`` reading a key the
  context does not have, so it always yields ``default: penalty``; ``GoalReward`` /
  ``goal_reward`` (``goal_key``, ``reward_value``) -> ``info_value`` on ``goal_key`` (0 when
  absent) scaled by ``reward_value``. Any other class is reported: write it as a rewardkit component.
- ``decay_schedule``: ``none`` -> a constant; ``linear`` -> ``linear`` from ``initial_weight`` to
  ``min_weight`` over ``decay_steps``; ``cosine`` -> ``cosine`` likewise; ``exponential`` ->
  ``exponential`` with ``rate = decay_rate ** (1 / decay_steps)`` and ``min: min_weight`` (RLlama's
  formula). ``start_step`` carries over. ``max_weight`` becomes ``max`` (RLlama never lets a
  decaying weight exceed ``initial_weight``, so a lower ``max_weight`` is reported).
- ``normalization_strategy: z_score`` (or ``normalize: true``) -> ``normalize: running_zscore`` on
  every term, ``min_max`` -> ``running_minmax``. rewardkit's statistics run over every value seen,
  so ``norm_window`` (a sliding window) is reported as not converted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .config import RLLAMA_KEYS, SCHEMA_VERSION, parse_config, parse_yaml
from .errors import ConfigError

DEFAULT_RLLAMA_WEIGHT = 1.0  # RLlama's shaper weighs a component absent from reward_shaping by 1.0
_NORMALIZERS = {"z_score": "running_zscore", "zscore": "running_zscore", "mean_std": "running_zscore",
                "standard": "running_zscore", "min_max": "running_minmax", "minmax": "running_minmax"}
_INFO_VALUE = ("InfoValueReward", "info_value")
_STEP_PENALTY = ("StepPenaltyReward", "step_penalty")
_GOAL = ("GoalReward", "goal_reward")


@dataclass
class Migration:
    """The converted config and one message per thing left behind (``file:line: key: why``)."""

    config: dict[str, Any]
    unconverted: list[str] = field(default_factory=list)

    def to_yaml(self) -> str:
        """The rewardkit config as YAML, headed by what was not converted (as comments)."""
        head = ["# Converted from an RLlama config by `rewardkit migrate rllama`."]
        if self.unconverted:
            head.append("# Not converted (fix by hand):")
            head.extend(f"#   {line}" for line in self.unconverted)
        return "\n".join(head) + "\n" + yaml.safe_dump(self.config, sort_keys=False)


class _LineLoader(yaml.SafeLoader):
    """Safe loader that records the line of every mapping key (1-based) as ``{path: line}``."""


def _load_with_lines(text: str, source: str) -> tuple[Any, dict[str, int]]:
    data = parse_yaml(text, source=source)  # the one loader's checks and limits come first
    lines: dict[str, int] = {}
    try:
        root = yaml.compose(text, Loader=_LineLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"expected valid YAML{where}: {getattr(exc, 'problem', exc)}", source=source) from None

    def walk(node: Any, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                sub = f"{path}.{key_node.value}" if path else str(key_node.value)
                lines[sub] = key_node.start_mark.line + 1
                walk(value_node, sub)

    walk(root, "")
    return data, lines


def looks_like_rllama(data: Any) -> bool:
    """Whether a config mapping uses RLlama's top-level keys."""
    return isinstance(data, Mapping) and bool(RLLAMA_KEYS & set(map(str, data)))


def migrate_rllama_file(path: str | Path) -> Migration:
    """Read an RLlama YAML file and convert it (see the module docstring)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"expected a readable RLlama YAML file: {exc}", source=source) from None
    data, lines = _load_with_lines(text, source)
    return migrate_rllama(data, source=source, lines=lines)


def migrate_rllama(data: Any, *, source: str = "<rllama>", lines: Mapping[str, int] | None = None) -> Migration:
    """Convert a parsed RLlama config; the result validates as a rewardkit config."""
    lines = lines or {}

    def where(path: str) -> str:
        line = lines.get(path)
        return f"{source}:{line}: {path}" if line else f"{source}: {path}"

    if not isinstance(data, Mapping) or not isinstance(data.get("reward_components"), Mapping) \
            or not data["reward_components"]:
        raise ConfigError("expected an RLlama config with a non-empty 'reward_components' mapping", source=source,
                          path="reward_components")
    notes: list[str] = []
    settings = data.get("composer_settings") or {}
    normalize = _normalizer(settings, where, notes)
    shaping = data.get("reward_shaping") or {}
    used_shaping: set[str] = set()
    components: dict[str, Any] = {}
    for name, entry in data["reward_components"].items():
        path = f"reward_components.{name}"
        entry = entry or {}
        cls = str(entry.get("class", entry.get("type", "")))
        term = _component(str(name), cls, dict(entry.get("params") or {}), path, where, notes)
        if term is None:
            continue
        key = name if name in shaping else (cls if cls in shaping else None)
        if key is not None:
            used_shaping.add(key)
            term["weight"] = _weight(shaping[key] or {}, f"reward_shaping.{key}", where, notes)
        else:
            term["weight"] = DEFAULT_RLLAMA_WEIGHT
        if normalize:
            term["normalize"] = normalize
        components[_safe_name(str(name))] = term
    for key in shaping:
        if key not in used_shaping:
            notes.append(f"{where(f'reward_shaping.{key}')}: matches no converted component")
    for key in data:
        if key not in {"composer_settings", "reward_components", "reward_shaping"}:
            notes.append(f"{where(str(key))}: RLlama section with no rewardkit counterpart")
    if not components:
        raise ConfigError("no component could be converted:\n  " + "\n  ".join(notes), source=source)
    config = {"version": SCHEMA_VERSION, "components": components}
    parse_config(config, source=f"{source} (converted)")  # the result must validate
    return Migration(config, notes)


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def _component(name: str, cls: str, params: dict[str, Any], path: str, where: Any, notes: list[str]) -> dict | None:
    if cls in _INFO_VALUE:
        out = {"type": "info_value", "params": {"key": str(params.pop("info_key", name))}}
        if "default_value" in params:
            out["params"]["default"] = float(params.pop("default_value"))
    elif cls in _STEP_PENALTY:
        out = {"type": "info_value", "params": {"key": f"{_safe_name(name)}_unused",
                                                "default": float(params.pop("penalty", -0.01))},
               "description": "RLlama step_penalty: a constant (the context never has this key)"}
    elif cls in _GOAL:
        out = {"type": "info_value", "params": {"key": str(params.pop("goal_key", "goal_reached")), "default": 0.0},
               "transforms": [{"scale": float(params.pop("reward_value", 1.0))}],
               "description": "RLlama goal_reward: the context's goal flag (0 or 1) times reward_value"}
    else:
        notes.append(f"{where(f'{path}.class')}: class {cls or '(none)'!r} is not built into rewardkit; "
                     "write it as a rewardkit component (see docs/concepts.md) and add it by hand")
        return None
    for key in params:
        notes.append(f"{where(f'{path}.params.{key}')}: parameter of {cls} with no rewardkit counterpart")
    return out


def _normalizer(settings: Mapping[str, Any], where: Any, notes: list[str]) -> str | None:
    strategy = settings.get("normalization_strategy")
    if strategy is None and settings.get("normalize"):
        strategy = "z_score"
    name = None
    if strategy is not None:
        name = _NORMALIZERS.get(str(strategy).lower())
        if name is None:
            notes.append(f"{where('composer_settings.normalization_strategy')}: strategy {strategy!r} has no "
                         f"rewardkit normalizer (known: {', '.join(sorted(_NORMALIZERS))})")
    if "norm_window" in settings and name is not None:
        notes.append(f"{where('composer_settings.norm_window')}: windowed normalization is not supported; "
                     f"{name} keeps statistics over every value seen")
    return name


def _weight(spec: Mapping[str, Any], path: str, where: Any, notes: list[str]) -> Any:
    initial = float(spec.get("initial_weight", spec.get("weight", DEFAULT_RLLAMA_WEIGHT)))
    kind = str(spec.get("decay_schedule", "none")).lower()
    low = float(spec.get("min_weight", 0.0))
    steps = int(spec.get("decay_steps", 1000))
    start_step = int(spec.get("start_step", 0))
    if kind == "none":
        weight: dict[str, Any] = {"schedule": "constant", "value": initial}
    elif kind in ("linear", "cosine"):
        weight = {"schedule": kind, "start": initial, "end": low, "steps": steps}
    elif kind == "exponential":
        rate = float(spec.get("decay_rate", 0.99)) ** (1.0 / steps)
        weight = {"schedule": "exponential", "start": initial, "rate": rate, "min": low}
    else:
        notes.append(f"{where(f'{path}.decay_schedule')}: schedule {kind!r} has no rewardkit counterpart; "
                     f"kept the constant initial_weight {initial}")
        weight = {"schedule": "constant", "value": initial}
    if start_step:
        weight["start_step"] = start_step
    if "max_weight" in spec:
        high = float(spec["max_weight"])
        if high >= initial:
            weight["max"] = high
        else:
            notes.append(f"{where(f'{path}.max_weight')}: {high} is below initial_weight {initial}; RLlama does "
                         "not cap decaying weights with it, so it was left out")
    if weight["schedule"] == "constant" and set(weight) == {"schedule", "value"}:
        return initial
    return weight
