"""Reading and validating reward configs (YAML or dicts) into a tree of terms and groups.

Schema (``version: 1``)::

    version: 1
    components:
      <name>:                     # letters, digits, '_' and '-'
        type: <registered name>   # or 'group', which has its own 'components'
        params: {...}             # validated against the component's declared params
        weight: 1.0               # a number or {schedule: linear, ...}
        inputs: {local: ctx_key}  # optional remapping of input names to context keys
        normalize: running_zscore # optional: a name or {type: name, <param>: value, ...}
        transforms: [...]         # optional: [{scale: k}, {clip: [lo, hi]}, tanh]
    total:
      transforms: [...]

Every error is a :class:`~rewardkit.errors.ConfigError` naming the file, the key path and what
was expected. YAML is parsed with a safe loader that also rejects duplicate keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .base import BaseReward
from .errors import ConfigError
from .normalizers import Normalizer, make_normalizer
from .params import describe
from .registry import get_component_class
from .schedules import Schedule, make_schedule
from .transforms import Transform, make_transforms

SCHEMA_VERSION = 1
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")
TOP_KEYS = {"version", "components", "total", "description"}
TERM_KEYS = {"type", "params", "weight", "inputs", "normalize", "transforms", "description"}
GROUP_KEYS = {"type", "components", "weight", "normalize", "transforms", "description"}
TOTAL_KEYS = {"transforms"}
# top-level keys of an RLlama config: a rewardkit config given one points at `rewardkit migrate rllama`
RLLAMA_KEYS = frozenset({"composer_settings", "reward_components", "reward_shaping", "shaper_settings"})
_MISSING = object()  # marks an absent key, so that errors can tell it from an explicit null


@dataclass
class TermNode:
    """A leaf: one component with its weight, normalizer and transforms."""

    name: str
    component: BaseReward
    weight: Schedule
    normalizer: Normalizer | None = None
    transforms: list[Transform] = field(default_factory=list)
    description: str | None = None


@dataclass
class GroupNode:
    """A group: the weighted sum of its children, itself normalized, transformed and weighted."""

    name: str
    children: list["TermNode | GroupNode"]
    weight: Schedule
    normalizer: Normalizer | None = None
    transforms: list[Transform] = field(default_factory=list)
    description: str | None = None


@dataclass
class RewardSpec:
    """A validated config: the top-level nodes and the transforms of the total."""

    nodes: list[TermNode | GroupNode]
    total_transforms: list[Transform]
    description: str | None = None


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML loader that refuses a mapping with the same key twice."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: str | Path) -> Any:
    """Parse a YAML file safely; unreadable or malformed files raise ``ConfigError``."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("expected an existing YAML file, got a missing path", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"expected a readable UTF-8 file: {exc}", source=source) from None
    return parse_yaml(text, source=source)


def parse_yaml(text: str, *, source: str = "<string>") -> Any:
    """Parse YAML text with the duplicate-refusing safe loader."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"expected valid YAML{where}: {problem}", source=source) from None
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. unhashable keys
        raise ConfigError(f"expected valid YAML: {exc}", source=source) from None


def parse_config(data: Any, *, source: str | None = None) -> RewardSpec:
    """Validate a config mapping and build its tree of components."""
    if not isinstance(data, Mapping):
        got = "an empty document" if data is None else describe(data)
        raise ConfigError(f"expected a mapping with 'version' and 'components' at the top level, got {got}",
                          source=source)
    _refuse_rllama(data, source)
    _check_keys(data, TOP_KEYS, "", source)
    if "version" not in data:
        raise ConfigError(f"expected {SCHEMA_VERSION}, got nothing (the key is missing)", source=source, path="version")
    version = data["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version != SCHEMA_VERSION:
        raise ConfigError(f"expected {SCHEMA_VERSION}, got {describe(version)}", source=source, path="version")
    nodes = _parse_components(data.get("components", _MISSING), "components", "", source)
    total = data.get("total")
    total = {} if total is None else total
    if not isinstance(total, Mapping):
        raise ConfigError(f"expected a mapping with 'transforms', got {describe(total)}", source=source, path="total")
    _check_keys(total, TOTAL_KEYS, "total", source)
    total_transforms = make_transforms(total.get("transforms"), path="total.transforms", source=source)
    return RewardSpec(nodes, total_transforms, _description(data, "", source))


def _refuse_rllama(data: Mapping, source: str | None) -> None:
    """An RLlama config gets a hint at the converter rather than an unknown-key error."""
    found = sorted(RLLAMA_KEYS & {str(k) for k in data})
    if found:
        file = source if source and not source.startswith("<") else "OLD.yaml"
        raise ConfigError(f"unknown key; this looks like an RLlama config; convert it with "
                          f"`rewardkit migrate rllama {file} -o NEW.yaml`", source=source, path=found[0])


def _description(d: Mapping, path: str, source: str | None) -> str | None:
    """The optional free-text ``description`` of a config or an entry."""
    text = d.get("description")
    if text is not None and not isinstance(text, str):
        raise ConfigError(f"expected a string, got {describe(text)}", source=source,
                          path=f"{path}.description" if path else "description")
    return text


def _check_keys(d: Mapping, allowed: set[str], path: str, source: str | None) -> None:
    for key in d:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            raise ConfigError(f"unknown key; expected one of: {', '.join(sorted(allowed))}", source=source, path=where)


def _parse_components(spec: Any, path: str, prefix: str, source: str | None) -> list[TermNode | GroupNode]:
    if not isinstance(spec, Mapping) or not spec:
        got = "nothing (the key is missing)" if spec is _MISSING else describe(spec)
        raise ConfigError(f"expected a non-empty mapping of component name to settings, got {got}",
                          source=source, path=path)
    nodes: list[TermNode | GroupNode] = []
    for name, entry in spec.items():
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise ConfigError(f"expected a name of letters, digits, '_' or '-', got {describe(name)}",
                              source=source, path=f"{path}.{name}")
        nodes.append(_parse_node(name, entry, f"{path}.{name}", prefix, source))
    return nodes


def _parse_node(name: str, entry: Any, path: str, prefix: str, source: str | None) -> TermNode | GroupNode:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"expected a mapping with 'type', got {describe(entry)}", source=source, path=path)
    kind = entry.get("type", _MISSING)
    if not isinstance(kind, str):
        got = "nothing (the key is missing)" if kind is _MISSING else describe(kind)
        raise ConfigError(f"expected a component type (a registered name or 'group'), got {got}",
                          source=source, path=f"{path}.type")
    full_name = f"{prefix}{name}"
    _check_keys(entry, GROUP_KEYS if kind == "group" else TERM_KEYS, path, source)
    weight = make_schedule(entry.get("weight", 1.0), path=f"{path}.weight", source=source)
    normalizer = make_normalizer(entry.get("normalize"), path=f"{path}.normalize", source=source)
    transforms = make_transforms(entry.get("transforms"), path=f"{path}.transforms", source=source)
    description = _description(entry, path, source)
    if kind == "group":
        children = _parse_components(entry.get("components", _MISSING), f"{path}.components", f"{full_name}/", source)
        return GroupNode(full_name, children, weight, normalizer, transforms, description)
    try:
        cls = get_component_class(kind)
    except ConfigError as exc:
        raise exc.within(source, f"{path}.type") from None
    params = entry.get("params")
    params = {} if params is None else params
    if not isinstance(params, Mapping):
        raise ConfigError(f"expected a mapping of parameters, got {describe(params)}", source=source, path=f"{path}.params")
    try:
        component = cls(name=full_name, inputs=entry.get("inputs"), **{str(k): v for k, v in params.items()})
    except ConfigError as exc:
        raise exc.within(source, path) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"expected valid parameters for {kind}: {exc}", source=source, path=f"{path}.params") from None
    return TermNode(full_name, component, weight, normalizer, transforms, description)


def spec_to_dict(spec: RewardSpec) -> dict[str, Any]:
    """Inverse of :func:`parse_config`: a plain mapping that rebuilds the same composer."""

    def weight_spec(s: Schedule) -> Any:
        d = s.to_dict()
        if d.get("schedule") == "constant" and set(d) <= {"schedule", "value", "start_step"}:
            return d["value"]
        return d

    def node_dict(node: TermNode | GroupNode) -> dict[str, Any]:
        if isinstance(node, GroupNode):
            out: dict[str, Any] = {"type": "group",
                                   "components": {c.name.rsplit("/", 1)[-1]: node_dict(c) for c in node.children}}
        else:
            out = node.component.to_dict()
        out["weight"] = weight_spec(node.weight)
        if node.normalizer is not None:
            out["normalize"] = node.normalizer.to_spec()
        if node.transforms:
            out["transforms"] = [t.to_spec() for t in node.transforms]
        if node.description:
            out["description"] = node.description
        return out

    result: dict[str, Any] = {"version": SCHEMA_VERSION,
                              "components": {n.name: node_dict(n) for n in spec.nodes}}
    if spec.total_transforms:
        result["total"] = {"transforms": [t.to_spec() for t in spec.total_transforms]}
    if spec.description:
        result["description"] = spec.description
    return result
