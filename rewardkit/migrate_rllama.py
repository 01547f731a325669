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

from .config import SCHEMA_VERSION, parse_config, parse_yaml, require_path
from .errors import ConfigError
from .params import describe, is_finite_number

DEFAULT_RLLAMA_WEIGHT = 1.0  # RLlama's shaper weighs a component absent from reward_shaping by 1.0
_NORMALIZERS = {"z_score": "running_zscore", "zscore": "running_zscore", "mean_std": "running_zscore",
                "standard": "running_zscore", "min_max": "running_minmax", "minmax": "running_minmax"}
_INFO_VALUE = ("InfoValueReward", "info_value")
_STEP_PENALTY = ("StepPenaltyReward", "step_penalty")
_GOAL = ("GoalReward", "goal_reward")
_MISSING = object()
MAX_STEPS = 2**53  # decay_steps and start_step: steps beyond this are not exact as floats


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


def migrate_rllama_file(path: str | Path) -> Migration:
    """Read an RLlama YAML file and convert it (see the module docstring)."""
    require_path(path, "migrate_rllama_file")
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"expected a readable RLlama YAML file: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"expected a UTF-8 text file, got a byte that is not UTF-8 at offset {exc.start}",
                          source=source) from None
    data, lines = _load_with_lines(text, source)
    return migrate_rllama(data, source=source, lines=lines)


class _Checker:
    """Type checks of the RLlama file, each a ``ConfigError`` located at ``file:line`` and the key path."""

    def __init__(self, source: str, lines: Mapping[str, int]) -> None:
        self.source = source
        self.lines = lines

    def where(self, path: str) -> str:
        line = self.lines.get(path)
        return f"{self.source}:{line}: {path}" if line else f"{self.source}: {path}"

    def error(self, path: str, expected: str, value: Any = _MISSING) -> ConfigError:
        line = self.lines.get(path)
        got = "" if value is _MISSING else f", got {describe(value)}"
        return ConfigError(f"expected {expected}{got}", source=f"{self.source}:{line}" if line else self.source,
                           path=path)

    def mapping(self, value: Any, path: str, what: str = "a mapping") -> Mapping[str, Any]:
        """``value`` when it is a mapping (null reads as empty)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(path, what, value)
        return value

    def text(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(path, "a non-empty string", value)
        return value

    def number(self, value: Any, path: str, *, low: float | None = None, positive: bool = False) -> float:
        if isinstance(value, bool) or not is_finite_number(value):
            raise self.error(path, "a finite number", value)
        number = float(value)
        if positive and number <= 0:
            raise self.error(path, "a number > 0", value)
        if low is not None and number < low:
            raise self.error(path, f"a number >= {low:g}", value)
        return number

    def count(self, value: Any, path: str, low: int) -> int:
        if isinstance(value, bool) or not is_finite_number(value) or float(value) != int(value) or value < low \
                or value > MAX_STEPS:
            raise self.error(path, f"an integer from {low} to {MAX_STEPS}", value)
        return int(value)


def migrate_rllama(data: Any, *, source: str = "<rllama>", lines: Mapping[str, int] | None = None) -> Migration:
    """Convert a parsed RLlama config; the result validates as a rewardkit config.

    Malformed input (a section that is not a mapping, a number that is not one, two component
    names that become one rewardkit name) is a ``ConfigError`` naming the file, the line and the key.
    """
    check = _Checker(source, lines or {})
    where = check.where
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected an RLlama config (a mapping with reward_components), got {describe(data)}",
                          source=source)
    raw_components = data.get("reward_components")
    if not isinstance(raw_components, Mapping) or not raw_components:
        raise check.error("reward_components", "a non-empty mapping of component names to {class, params}",
                          raw_components if "reward_components" in data else _MISSING)
    notes: list[str] = []
    settings = check.mapping(data.get("composer_settings"), "composer_settings")
    normalize = _normalizer(settings, check, notes)
    shaping = check.mapping(data.get("reward_shaping"), "reward_shaping")
    used_shaping: set[str] = set()
    components: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for name, entry in raw_components.items():
        path = f"reward_components.{name}"
        if not isinstance(name, str) or not name:
            raise check.error("reward_components", "component names that are non-empty strings", name)
        entry = check.mapping(entry, path, "a mapping such as {class: InfoValueReward, params: {...}}")
        cls = entry.get("class", entry.get("type", ""))
        if cls != "" and not isinstance(cls, str):
            raise check.error(f"{path}.class", "a class name (a string)", cls)
        params = dict(check.mapping(entry.get("params"), f"{path}.params"))
        term = _component(name, cls, params, path, check, notes)
        if term is None:
            continue
        key = name if name in shaping else (cls if cls in shaping else None)
        if key is not None:
            used_shaping.add(key)
            spec = check.mapping(shaping[key], f"reward_shaping.{key}")
            term["weight"] = _weight(spec, f"reward_shaping.{key}", check, notes)
        else:
            term["weight"] = DEFAULT_RLLAMA_WEIGHT
        if normalize:
            term["normalize"] = normalize
        new_name = _safe_name(name)
        if new_name in origin:
            raise check.error(path, f"a component name that stays distinct in rewardkit: {name!r} and "
                                    f"{origin[new_name]!r} both become {new_name!r} (rewardkit names keep letters, "
                                    "digits, '_' and '-'); rename one of them", name)
        origin[new_name] = name
        components[new_name] = term
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


def _component(name: str, cls: str, params: dict[str, Any], path: str, check: _Checker,
               notes: list[str]) -> dict | None:
    at = f"{path}.params"
    if cls in _INFO_VALUE:
        key = check.text(params.pop("info_key"), f"{at}.info_key") if "info_key" in params else name
        out: dict[str, Any] = {"type": "info_value", "params": {"key": key}}
        if "default_value" in params:
            out["params"]["default"] = check.number(params.pop("default_value"), f"{at}.default_value")
    elif cls in _STEP_PENALTY:
        penalty = check.number(params.pop("penalty"), f"{at}.penalty") if "penalty" in params else -0.01
        out = {"type": "info_value", "params": {"key": f"{_safe_name(name)}_unused", "default": penalty},
               "description": "RLlama step_penalty: a constant (the context never has this key)"}
    elif cls in _GOAL:
        goal = check.text(params.pop("goal_key"), f"{at}.goal_key") if "goal_key" in params else "goal_reached"
        value = check.number(params.pop("reward_value"), f"{at}.reward_value") if "reward_value" in params else 1.0
        out = {"type": "info_value", "params": {"key": goal, "default": 0.0},
               "transforms": [{"scale": value}],
               "description": "RLlama goal_reward: the context's goal flag (0 or 1) times reward_value"}
    else:
        notes.append(f"{check.where(f'{path}.class')}: class {cls or '(none)'!r} is not built into rewardkit; "
                     "write it as a rewardkit component (see docs/concepts.md) and add it by hand")
        return None
    for key in params:
        notes.append(f"{check.where(f'{at}.{key}')}: parameter of {cls} with no rewardkit counterpart")
    return out


def _normalizer(settings: Mapping[str, Any], check: _Checker, notes: list[str]) -> str | None:
    strategy = settings.get("normalization_strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise check.error("composer_settings.normalization_strategy", "a strategy name such as z_score", strategy)
    flag = settings.get("normalize")
    if flag is not None and not isinstance(flag, bool):
        raise check.error("composer_settings.normalize", "true or false", flag)
    if strategy is None and flag:
        strategy = "z_score"
    name = None
    if strategy is not None:
        name = _NORMALIZERS.get(strategy.lower())
        if name is None:
            notes.append(f"{check.where('composer_settings.normalization_strategy')}: strategy {strategy!r} has no "
                         f"rewardkit normalizer (known: {', '.join(sorted(_NORMALIZERS))})")
    if "norm_window" in settings and name is not None:
        notes.append(f"{check.where('composer_settings.norm_window')}: windowed normalization is not supported; "
                     f"{name} keeps statistics over every value seen")
    return name


def _weight(spec: Mapping[str, Any], path: str, check: _Checker, notes: list[str]) -> Any:
    def num(key: str, default: float, **kw: Any) -> float:
        return check.number(spec[key], f"{path}.{key}", **kw) if key in spec else default

    initial_key = "initial_weight" if "initial_weight" in spec else "weight"
    initial = num(initial_key, DEFAULT_RLLAMA_WEIGHT)
    kind = spec.get("decay_schedule", "none")
    if not isinstance(kind, str):
        raise check.error(f"{path}.decay_schedule", "none, linear, cosine or exponential", kind)
    kind = kind.lower()
    low = num("min_weight", 0.0)
    steps = check.count(spec["decay_steps"], f"{path}.decay_steps", 1) if "decay_steps" in spec else 1000
    start_step = check.count(spec["start_step"], f"{path}.start_step", 0) if "start_step" in spec else 0
    if kind == "none":
        weight: dict[str, Any] = {"schedule": "constant", "value": initial}
    elif kind in ("linear", "cosine"):
        weight = {"schedule": kind, "start": initial, "end": low, "steps": steps}
    elif kind == "exponential":
        decay = num("decay_rate", 0.99, positive=True)
        weight = {"schedule": "exponential", "start": initial, "rate": decay ** (1.0 / steps), "min": low}
    else:
        notes.append(f"{check.where(f'{path}.decay_schedule')}: schedule {kind!r} has no rewardkit counterpart; "
                     f"kept the constant initial_weight {initial}")
        weight = {"schedule": "constant", "value": initial}
    if start_step:
        weight["start_step"] = start_step
    if "max_weight" in spec:
        high = num("max_weight", 0.0)
        if high >= initial:
            weight["max"] = high
        else:
            notes.append(f"{check.where(f'{path}.max_weight')}: {high} is below initial_weight {initial}; RLlama "
                         "does not cap decaying weights with it, so it was left out")
    if weight["schedule"] == "constant" and set(weight) == {"schedule", "value"}:
        return initial
    return weight
