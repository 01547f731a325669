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
        applies_to: {key: value}  # optional (terms): a value only where the keys hold these values
    total:
      transforms: [...]
    expect: {...}                 # optional promises checked by `rewardkit check` (see expectations.py)
    monitor: {...}                # optional: what the reward-hacking monitor reads (see monitor_spec.py)
    stress: {...}                 # optional: what `rewardkit stress` checks (see stress_spec.py)

Every error is a :class:`~rewardkit.errors.ConfigError` naming the file, the key path and what
was expected. YAML is parsed with a safe loader that also rejects duplicate keys.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import yaml

from .applies import Conditions, conditions_to_spec, parse_applies_to
from .base import BaseReward
from .errors import ConfigError
from .expectations import Expectations, parse_expectations
from .monitor_spec import MonitorSettings, parse_monitor
from .stress_spec import StressSettings, parse_stress
from .normalizers import Normalizer, make_normalizer
from .params import describe
from .registry import get_component_class
from .schedules import Schedule, make_schedule
from .transforms import Transform, make_transforms

SCHEMA_VERSION = 1
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")  # matched whole (fullmatch)
TOP_KEYS = {"version", "components", "total", "description", "expect", "monitor", "stress"}
TERM_KEYS = {"type", "params", "weight", "inputs", "normalize", "transforms", "description", "applies_to"}
GROUP_KEYS = {"type", "components", "weight", "normalize", "transforms", "description"}
TOTAL_KEYS = {"transforms"}
# top-level keys of an RLlama config: a rewardkit config given one points at `rewardkit migrate rllama`
RLLAMA_KEYS = frozenset({"composer_settings", "reward_components", "reward_shaping", "shaper_settings"})
_MISSING = object()  # marks an absent key, so that errors can tell it from an explicit null

# ---- limits on every document rewardkit reads (documented in docs/configuration.md#limits) -----
#: largest YAML file read, in bytes (pure-Python PyYAML parses one this size in about two seconds).
MAX_FILE_BYTES = 131_072
#: most values (scalars, lists, mappings and keys) a document may hold once aliases and merge
#: keys are expanded: a few hundred bytes of nested aliases would otherwise expand to billions.
MAX_EXPANDED_VALUES = 200_000
#: deepest nesting of lists and mappings (after alias expansion); a group level takes two.
MAX_DEPTH = 100
#: most terms and groups in one reward config.
MAX_TERMS = 1000


@dataclass
class TermNode:
    """A leaf: one component with its weight, normalizer and transforms."""

    name: str
    component: BaseReward
    weight: Schedule
    normalizer: Normalizer | None = None
    transforms: list[Transform] = field(default_factory=list)
    description: str | None = None
    #: ``applies_to``: context key -> values (as text) where the term gives a value (rewardkit.applies)
    applies_to: Conditions | None = None


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
    expect: Expectations | None = None
    monitor: MonitorSettings | None = None
    stress: StressSettings | None = None


# ---- the one YAML loader ---------------------------------------------------------------------
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _SafeLoader(yaml.SafeLoader):
    """Safe YAML loader that refuses duplicate keys and nesting deeper than ``MAX_DEPTH``.

    Merge keys (``<<: *base``) work; keys written explicitly next to them override the merged
    ones, as YAML specifies, and only explicit keys count as duplicates.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._checked: set[int] = set()

    def compose_node(self, parent: Any, index: Any) -> Any:
        # PyYAML composes recursively: refuse deep documents before Python's stack runs out.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"expected at most {MAX_DEPTH} levels of nested lists and mappings, got more",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # The scanner looks ahead across every open '[' or '{' (quadratic in their nesting): stop early.
        if self.flow_level >= MAX_DEPTH:
            raise yaml.scanner.ScannerError(
                None, None, f"expected at most {MAX_DEPTH} levels of nested lists and mappings, got more",
                self.get_mark())
        super().fetch_flow_collection_start(token_class)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Called on every mapping before merge keys rewrite its pairs: check the written keys here.
        if id(node) not in self._checked:
            self._checked.add(id(node))
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable: SafeConstructor reports it
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {describe(key)} (first at line {first + 1})", key_node.start_mark)
                seen[key] = key_node.start_mark.line
        super().flatten_mapping(node)


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML document: its ``data``, the ``source`` named in messages, and line lookup."""

    data: Any
    source: str
    root: yaml.Node | None = field(default=None, repr=False, compare=False)

    def line_of(self, path: str) -> int | None:
        """1-based line of the value at key path ``a.b[2].c`` (as in error messages), or None."""
        node = self.root
        for part in _split_path(path):
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
            else:
                return None
        return None if node is None else node.start_mark.line + 1


def _split_path(path: str) -> list[str | int]:
    parts: list[str | int] = []
    for dotted in path.split(".") if path else []:
        name, *indices = dotted.split("[")
        if name:
            parts.append(name)
        parts.extend(int(i.rstrip("]")) for i in indices if i.rstrip("]").isdigit())
    return parts


def require_path(path: Any, caller: str) -> None:
    """Refuse anything but a ``str`` or ``os.PathLike`` as a file path, with a ``TypeError`` naming
    ``caller``: ``open`` takes an int as a file descriptor (``0`` would read standard input)."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{caller}: expected a file path (str or pathlib.Path), got {type(path).__name__} "
                        f"{describe(path)}")


def read_yaml(path: str | Path) -> YamlDocument:
    """Read a YAML file with rewardkit's safe loader; every problem is a located ``ConfigError``.

    The one loader for all YAML the project reads: safe tags only, no duplicate keys, merge keys
    allowed, and the limits ``MAX_FILE_BYTES``, ``MAX_EXPANDED_VALUES`` and ``MAX_DEPTH``. ``path``
    must be a ``str`` or ``os.PathLike`` (:func:`require_path`).
    """
    require_path(path, "read_yaml")
    source = str(path)
    if "\x00" in source:  # open() would raise ValueError, not OSError
        raise ConfigError("expected a file path, got one containing a NUL byte", source=repr(source))
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError("expected an existing YAML file, got a missing path", source=source) from None
    except OSError as exc:
        raise ConfigError(f"expected a readable UTF-8 file: {exc}", source=source) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"expected a file of at most {MAX_FILE_BYTES} bytes, got a larger one", source=source)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"expected a readable UTF-8 file: {exc}", source=source) from None
    return parse_yaml_document(text, source=source)


def load_yaml(path: str | Path) -> Any:
    """The data of a YAML file read by :func:`read_yaml` (safe, no duplicate keys, bounded)."""
    require_path(path, "load_yaml")
    return read_yaml(path).data


def parse_yaml(text: str, *, source: str = "<string>") -> Any:
    """Parse YAML text with the same loader and limits as :func:`read_yaml`; return the data."""
    return parse_yaml_document(text, source=source).data


def parse_yaml_document(text: str, *, source: str = "<string>") -> YamlDocument:
    """Parse YAML text into a :class:`YamlDocument` (data plus line lookup)."""
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(f"expected a document of at most {MAX_FILE_BYTES} characters, got a larger one",
                          source=source)
    loader = None
    try:
        loader = _SafeLoader(text)  # the reader refuses control characters here
        root = loader.get_single_node()
        if root is None:
            return YamlDocument(None, source, None)
        _check_node_graph(root, source)
        return YamlDocument(loader.construct_document(root), source, root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"expected valid YAML{where}: {problem}", source=source) from None
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. unhashable keys
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"expected valid YAML: {describe(str(exc))}", source=source) from None
    finally:
        if loader is not None:
            loader.dispose()


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_node_graph(root: yaml.Node, source: str) -> None:
    """Refuse recursive aliases and documents whose alias expansion passes the limits.

    Sizes and depths are computed once per node (an alias is a shared node), so this costs time
    proportional to the text, not to the expanded document.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _node_children(node)
        if finished:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            line = f" (the value at line {node.start_mark.line + 1})"
            if size[key] > MAX_EXPANDED_VALUES:
                raise ConfigError(f"expected at most {MAX_EXPANDED_VALUES} values once aliases are expanded, "
                                  f"got more{line}", source=source)
            if depth[key] > MAX_DEPTH:
                raise ConfigError(f"expected at most {MAX_DEPTH} levels of nested lists and mappings once "
                                  f"aliases are expanded, got more{line}", source=source)
            continue
        if key in size:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise ConfigError(f"expected no alias inside its own anchor, got a recursive one at line "
                                  f"{child.start_mark.line + 1}", source=source)
            if id(child) not in size:
                stack.append((child, False))


def check_structure(data: Any, *, source: str | None = None) -> None:
    """Refuse cyclic data and data beyond ``MAX_DEPTH`` or ``MAX_EXPANDED_VALUES`` (a ConfigError).

    Walks iteratively and stops at the limits, so any input costs bounded time; configs given as
    Python dicts get the same limits as YAML files.
    """
    count = 0
    on_path: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(data, 1, False)]
    while stack:
        value, level, finished = stack.pop()
        if finished:
            on_path.discard(id(value))
            continue
        count += 1
        if count > MAX_EXPANDED_VALUES:
            raise ConfigError(f"expected at most {MAX_EXPANDED_VALUES} values (counting shared ones each time "
                              "they appear), got more", source=source)
        if isinstance(value, Mapping):
            children = [c for pair in value.items() for c in pair]
        elif isinstance(value, (list, tuple)):
            children = list(value)
        else:
            continue
        if level > MAX_DEPTH:
            raise ConfigError(f"expected at most {MAX_DEPTH} levels of nested lists and mappings, got more",
                              source=source)
        if id(value) in on_path:
            raise ConfigError("expected data without cycles, got a list or mapping that contains itself",
                              source=source)
        on_path.add(id(value))
        stack.append((value, level, True))
        stack.extend((c, level + 1, False) for c in reversed(children))


# ---- the reward config schema ------------------------------------------------------------------
class _Problems:
    """Collects the ConfigErrors of one config so that all of them are reported together."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.errors: list[ConfigError] = []

    def add(self, message: str, path: str | None) -> None:
        self.errors.append(ConfigError(message, source=self.source, path=path))

    def attempt(self, path: str | None, build: Callable[[], Any], default: Any = None) -> Any:
        """``build()``, or ``default`` after recording its ConfigError located at ``path``."""
        try:
            return build()
        except ConfigError as exc:
            self.errors.append(exc.within(self.source, path))
            return default


def parse_config(data: Any, *, source: str | None = None) -> RewardSpec:
    """Validate a config mapping and build its tree of components.

    Every problem is reported at once: the ``ConfigError`` raised lists them in ``.errors``.
    """
    if not isinstance(data, Mapping):
        got = "an empty document" if data is None else describe(data)
        raise ConfigError(f"expected a mapping with 'version' and 'components' at the top level, got {got}",
                          source=source)
    _refuse_rllama(data, source)
    check_structure(data, source=source)
    problems = _Problems(source)
    _check_keys(data, TOP_KEYS, "", problems)
    version = data.get("version", _MISSING)
    if version is _MISSING:
        problems.add(f"expected {SCHEMA_VERSION}, got nothing (the key is missing)", "version")
    elif isinstance(version, bool) or not isinstance(version, int) or version != SCHEMA_VERSION:
        problems.add(f"expected {SCHEMA_VERSION}, got {describe(version)}", "version")
    leaves: list[tuple[TermNode, str]] = []
    nodes = _parse_components(data.get("components", _MISSING), "components", "", problems, leaves)
    total = data.get("total")
    total = {} if total is None else total
    total_transforms: list[Transform] = []
    if not isinstance(total, Mapping):
        problems.add(f"expected a mapping with 'transforms', got {describe(total)}", "total")
    else:
        _check_keys(total, TOTAL_KEYS, "total", problems)
        total_transforms = problems.attempt(
            None, lambda: make_transforms(total.get("transforms"), path="total.transforms", source=source), [])
    description = _description(data, "", problems)
    n_nodes = sum(1 for _ in walk(nodes))
    if n_nodes > MAX_TERMS:
        problems.add(f"expected at most {MAX_TERMS} terms and groups, got {n_nodes}", "components")
    if not problems.errors:
        _check_input_shapes(leaves, problems)
    expect = None
    if not problems.errors:
        expect = problems.attempt(None, lambda: parse_expectations(data.get("expect"), _context_keys(nodes), source=source), None)
    monitor = None
    if not problems.errors:
        monitor = problems.attempt(None, lambda: parse_monitor(data.get("monitor"), [n.name for n in nodes],
                                                               source=source), None)
    stress = None
    if not problems.errors:
        stress = problems.attempt(None, lambda: parse_stress(data.get("stress"), [n.name for n in nodes],
                                                             source=source), None)
    if problems.errors:
        raise ConfigError.combine(problems.errors)
    return RewardSpec(nodes, total_transforms, description, expect, monitor, stress)


def walk(nodes: Iterable[TermNode | GroupNode], *, children_first: bool = False) -> Iterator[TermNode | GroupNode]:
    """Every term and group of a config tree: in evaluation (pre-)order, or with ``children_first`` each
    group after its children (the order normalizers update in). Iterative: no depth limit."""
    stack: list[tuple[TermNode | GroupNode, bool]] = [(node, False) for node in reversed(list(nodes))]
    while stack:
        node, expanded = stack.pop()
        if not isinstance(node, GroupNode) or expanded:
            yield node
            continue
        if children_first:
            stack.append((node, True))
        else:
            yield node
        stack.extend((child, False) for child in reversed(node.children))


def leaves(nodes: Iterable[TermNode | GroupNode]) -> Iterator[TermNode]:
    """Every term of a config tree (no groups), in evaluation order: the one walker for code that
    needs the components."""
    return (node for node in walk(nodes) if isinstance(node, TermNode))


def _context_keys(nodes: list[TermNode | GroupNode]) -> set[str]:
    """Every context key the terms of ``nodes`` (groups included) read."""
    return {key for node in walk(nodes) if isinstance(node, TermNode)
            for key in [*node.component.input_keys.values(), *(node.applies_to or ())]}


def _refuse_rllama(data: Mapping, source: str | None) -> None:
    """An RLlama config gets a hint at the converter rather than an unknown-key error."""
    found = sorted(RLLAMA_KEYS & {str(k) for k in data})
    if found:
        file = source if source and not source.startswith("<") else "OLD.yaml"
        raise ConfigError(f"unknown key; this looks like an RLlama config; convert it with "
                          f"`rewardkit migrate rllama {file} -o NEW.yaml`", source=source, path=found[0])


def _description(d: Mapping, path: str, problems: _Problems) -> str | None:
    """The optional free-text ``description`` of a config or an entry."""
    text = d.get("description")
    if text is not None and not isinstance(text, str):
        problems.add(f"expected a string, got {describe(text)}", f"{path}.description" if path else "description")
        return None
    return text


def _check_keys(d: Mapping, allowed: set[str], path: str, problems: _Problems) -> None:
    for key in d:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            where = f"{path}.{key}" if path else str(key)
            problems.add(f"unknown key{hint}; expected one of: {', '.join(sorted(allowed))}", where)


def _parse_components(spec: Any, path: str, prefix: str, problems: _Problems,
                      leaves: list[tuple[TermNode, str]]) -> list[TermNode | GroupNode]:
    if not isinstance(spec, Mapping) or not spec:
        got = "nothing (the key is missing)" if spec is _MISSING else describe(spec)
        problems.add(f"expected a non-empty mapping of component name to settings, got {got}", path)
        return []
    nodes: list[TermNode | GroupNode] = []
    for name, entry in spec.items():
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            shown = name if isinstance(name, str) and name.isprintable() else describe(name)
            problems.add(f"expected a name of letters, digits, '_' or '-', got {describe(name)}", f"{path}.{shown}")
            continue
        node = _parse_node(name, entry, f"{path}.{name}", prefix, problems, leaves)
        if node is not None:
            nodes.append(node)
    return nodes


def _parse_node(name: str, entry: Any, path: str, prefix: str, problems: _Problems,
                leaves: list[tuple[TermNode, str]]) -> TermNode | GroupNode | None:
    source = problems.source
    if not isinstance(entry, Mapping):
        problems.add(f"expected a mapping with 'type', got {describe(entry)}", path)
        return None
    kind = entry.get("type", _MISSING)
    if not isinstance(kind, str):
        got = "nothing (the key is missing)" if kind is _MISSING else describe(kind)
        problems.add(f"expected a component type (a registered name or 'group'), got {got}", f"{path}.type")
        return None
    n_before = len(problems.errors)
    full_name = f"{prefix}{name}"
    cls = None if kind == "group" else problems.attempt(f"{path}.type", lambda: get_component_class(kind))
    _check_keys(entry, GROUP_KEYS if kind == "group" else TERM_KEYS, path, problems)
    weight = problems.attempt(None, lambda: make_schedule(entry.get("weight", 1.0), path=f"{path}.weight",
                                                          source=source))
    normalizer = problems.attempt(None, lambda: make_normalizer(entry.get("normalize"), path=f"{path}.normalize",
                                                                source=source))
    transforms = problems.attempt(None, lambda: make_transforms(entry.get("transforms"), path=f"{path}.transforms",
                                                                source=source), [])
    description = _description(entry, path, problems)
    applies_to = None
    if entry.get("applies_to") is not None and kind != "group":  # on a group: the unknown-key error above
        if entry.get("normalize") is not None:
            problems.add("expected no normalize on a term with applies_to (its statistics would count the "
                         "samples it does not apply to); normalize a group holding it instead", f"{path}.normalize")
        else:
            applies_to = problems.attempt(None, lambda: parse_applies_to(entry["applies_to"], f"{path}.applies_to"))
    if kind == "group":
        children = _parse_components(entry.get("components", _MISSING), f"{path}.components", f"{full_name}/",
                                     problems, leaves)
        if len(problems.errors) > n_before:
            return None
        return GroupNode(full_name, children, weight, normalizer, transforms, description)
    params = entry.get("params")
    params = {} if params is None else params
    if not isinstance(params, Mapping):
        problems.add(f"expected a mapping of parameters, got {describe(params)}", f"{path}.params")
        return None
    inputs = entry.get("inputs")
    if not _check_inputs(inputs, f"{path}.inputs", problems) or cls is None:
        return None
    try:
        component = cls(name=full_name, inputs=inputs, **{str(k): v for k, v in params.items()})
    except ConfigError as exc:
        problems.errors.append(exc.within(source, path))
        return None
    except (TypeError, ValueError) as exc:
        problems.add(f"expected valid parameters for {kind}: {describe(str(exc))}", f"{path}.params")
        return None
    if len(problems.errors) > n_before:
        return None
    node = TermNode(full_name, component, weight, normalizer, transforms, description, applies_to)
    leaves.append((node, path))
    return node


def _check_inputs(inputs: Any, path: str, problems: _Problems) -> bool:
    """``inputs`` is absent/null or maps input names to context keys (non-empty, printable)."""
    if inputs is None:
        return True
    if not isinstance(inputs, Mapping):
        problems.add(f"expected a mapping of input name to context key, got {describe(inputs)}", path)
        return False
    ok = True
    for local, key in inputs.items():
        where = f"{path}.{local}" if isinstance(local, str) else path
        if not isinstance(local, str):
            problems.add(f"expected input names (strings) as keys, got {describe(local)}", where)
            ok = False
        elif not isinstance(key, str) or not key:
            problems.add(f"expected a context key (non-empty string), got {describe(key)}", where)
            ok = False
        elif not key.isprintable() or key != key.strip():
            problems.add(f"expected a context key without control characters or surrounding spaces, got "
                         f"{describe(key)}", where)
            ok = False
    return ok


def _check_input_shapes(leaves: list[tuple[TermNode, str]], problems: _Problems) -> None:
    """Every term that reads a context key must read it with the same number of axes."""
    first: dict[str, tuple[int, str]] = {}
    for node, path in leaves:
        comp = node.component
        for local, key in comp.input_keys.items():
            ndim = comp.inputs[local]
            seen = first.setdefault(key, (ndim, path))
            if seen[0] != ndim:
                problems.add(f"expected context key {key!r} read as {_shape_name(seen[0])} like {seen[1]} reads "
                             f"it, got {_shape_name(ndim)} (input {local!r} of {comp.type_name})",
                             f"{path}.inputs.{local}")


def _shape_name(ndim: int) -> str:
    return "a scalar" if ndim == 0 else "a vector" if ndim == 1 else f"an array of {ndim} axes"


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
            if node.applies_to:
                out["applies_to"] = conditions_to_spec(node.applies_to)
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
    if spec.expect is not None:
        result["expect"] = spec.expect.to_dict()
    if spec.monitor is not None:
        result["monitor"] = spec.monitor.to_dict()
    if spec.stress is not None:
        result["stress"] = spec.stress.to_dict()
    return result
