"""Reference text generated from the registry, so documentation cannot drift from the code.

One structured description per component (and per normalizer and schedule) feeds two renderings:
the plain-text listing of ``rewardkit components`` and the Markdown of ``docs/components.md``
(``rewardkit docs --out docs/components.md``).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .base import BaseReward
from .normalizers import NORMALIZERS
from .params import Param
from .registry import get_component_class, registered
from .schedules import SCHEDULES
from .transforms import Transform

AXES = {0: "float", 1: "vector, one value per replica"}


@dataclass(frozen=True)
class ParamInfo:
    """One declared parameter as shown to users."""

    name: str
    default: str
    expected: str
    doc: str


@dataclass(frozen=True)
class InputInfo:
    """One input a component reads from the context."""

    name: str
    kind: str
    optional: bool
    key_param: str | None  # the parameter naming the context key, when the key is configurable


@dataclass(frozen=True)
class ComponentInfo:
    """Everything the reference says about one registered component."""

    name: str
    summary: str
    details: str
    params: tuple[ParamInfo, ...]
    inputs: tuple[InputInfo, ...]
    output_range: tuple[float, float]
    monotone: tuple[tuple[str, str], ...]
    stateful: bool


def format_value(value: Any) -> str:
    """Render a default the way it is written in YAML (``null``, ``true``, ``[0, 1]``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)


def param_infos(spec: Mapping[str, Param]) -> tuple[ParamInfo, ...]:
    """Describe a ``params`` declaration, in declaration order."""
    return tuple(
        ParamInfo(name, "required" if p.required else format_value(p.default), p.expected, p.doc)
        for name, p in spec.items()
    )


def _doc_parts(obj: Any) -> tuple[str, str]:
    """(first line, remaining paragraphs) of an object's docstring, dedented."""
    doc = inspect.cleandoc(obj.__doc__ or "")
    first, _, rest = doc.partition("\n")
    return first.strip(), rest.strip()


def _key_param(cls: type[BaseReward], input_name: str) -> str | None:
    """Name of the parameter that chooses the context key of ``input_name``, if any.

    Builds the component with its defaults and marker strings for required string params, then
    looks for a marker among the resolved input keys. Returns None for fixed keys.
    """
    markers: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    for name, p in cls.params.items():
        if p.required:
            try:
                kwargs[name] = p.check(f"@{name}")
                markers[f"@{name}"] = name
            except ValueError:
                return None  # a required non-string param: cannot probe, assume a fixed key
    try:
        keys = cls(**kwargs).input_keys
    except Exception:  # noqa: BLE001 - probing only; a component that cannot be probed keeps fixed keys
        return None
    key = keys.get(input_name)
    if key in markers:
        return markers[key]
    for name, p in cls.params.items():
        if not p.required and isinstance(p.default, str) and key == p.default and name != input_name:
            return name
    return None


def component_info(name: str) -> ComponentInfo:
    """Structured description of the component registered under ``name``."""
    cls = get_component_class(name)
    summary, details = _doc_parts(cls)
    inputs = tuple(
        InputInfo(inp, "text: a str per environment (a list of str batched)" if inp in cls.text_inputs
                  else AXES.get(nd, f"array with {nd} axes"), inp in cls.optional_inputs, _key_param(cls, inp))
        for inp, nd in cls.inputs.items()
    )
    return ComponentInfo(
        name=name,
        summary=summary,
        details=details,
        params=param_infos(cls.params),
        inputs=inputs,
        output_range=tuple(cls.output_range),  # type: ignore[arg-type]
        monotone=tuple(sorted(cls.monotone.items())),
        stateful=bool(cls.stateful),
    )


def _range_text(r: tuple[float, float]) -> str:
    low, high = r
    left = "(-inf" if math.isinf(low) else f"[{format_value(float(low))}"
    right = "inf)" if math.isinf(high) else f"{format_value(float(high))}]"
    return f"{left}, {right}"


def _input_kind(i: InputInfo) -> str:
    return i.kind + (", optional" if i.optional else "")


def _input_source(i: InputInfo, code: str = "'") -> str:
    if i.key_param:
        return f"read from the context key named by param {code}{i.key_param}{code}"
    return f"context key {code}{i.name}{code} (remap with {code}inputs:{code})"


def _input_text(i: InputInfo) -> str:
    return f"{i.name} ({_input_kind(i)}), {_input_source(i)}"


# ---- plain text (``rewardkit components``) ---------------------------------------------------
def components_text(names: Iterable[str] | None = None) -> str:
    """The listing printed by ``rewardkit components``: summary, params and inputs of each."""
    blocks = []
    for name in (registered() if names is None else names):
        info = component_info(name)
        lines = [f"{info.name}: {info.summary}"]
        if info.params:
            lines.append("  params:")
            w_name = max(len(p.name) for p in info.params)
            w_def = max(len(p.default) for p in info.params)
            w_exp = max(len(p.expected) for p in info.params)
            for p in info.params:
                lines.append(f"    {p.name:<{w_name}}  {p.default:<{w_def}}  {p.expected:<{w_exp}}  {p.doc}".rstrip())
        else:
            lines.append("  params: none")
        lines.append("  inputs:")
        for i in info.inputs:
            lines.append(f"    {_input_text(i)}")
        extra = [f"output range {_range_text(info.output_range)}"]
        if info.stateful:
            extra.append("stateful (per-environment state, reset at episode end)")
        lines.append("  " + "; ".join(extra))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


# ---- Markdown (``rewardkit docs``) -----------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _param_table(params: tuple[ParamInfo, ...]) -> list[str]:
    if not params:
        return ["No parameters.", ""]
    rows = ["| param | default | expected | meaning |", "|---|---|---|---|"]
    for p in params:
        default = "required" if p.default == "required" else f"`{_cell(p.default)}`"
        rows.append(f"| `{p.name}` | {default} | {_cell(p.expected)} | {_cell(p.doc)} |")
    return rows + [""]


def _transform_classes() -> list[type[Transform]]:
    found: dict[str, type[Transform]] = {}
    pending = list(Transform.__subclasses__())
    while pending:
        cls = pending.pop(0)
        if cls.name:
            found.setdefault(cls.name, cls)
        pending.extend(cls.__subclasses__())
    return [found[n] for n in sorted(found)]


TRANSFORM_SYNTAX = {"scale": "{scale: k}", "clip": "{clip: [low, high]}", "tanh": "tanh"}


def components_markdown(names: Iterable[str] | None = None) -> str:
    """The Markdown reference checked in as ``docs/components.md``."""
    names = registered() if names is None else list(names)
    out = [
        "# Component reference",
        "",
        "<!-- Generated by `rewardkit docs --out docs/components.md` from the registry; do not edit. -->",
        "",
        "Every component returns one raw term per environment. The composer then applies the",
        "term's normalizer, its transforms and its weight (see [concepts](concepts.md)); the",
        "YAML keys are described in [configuration](configuration.md).",
        "",
        "Components: " + ", ".join(f"[`{n}`](#{n})" for n in names) + ".",
        "",
    ]
    for name in names:
        info = component_info(name)
        out += [f"## {name}", "", _cell(info.summary), ""]
        if info.details:
            out += [info.details, ""]
        out += ["**Parameters**", ""] + _param_table(info.params)
        out += ["**Inputs**", ""]
        out += [f"- `{i.name}` ({_input_kind(i)}): {_input_source(i, '`')}" for i in info.inputs] + [""]
        props = [f"output range `{_range_text(info.output_range)}`"]
        if info.monotone:
            props.append("monotone: " + ", ".join(f"{d} in `{k}`" for k, d in info.monotone))
        props.append("stateful (per-environment state, reset at episode end)" if info.stateful else "stateless")
        out += ["**Properties**: " + "; ".join(props) + ".", ""]

    out += ["# Normalizers", "",
            "Written as `normalize: <name>` or `normalize: {type: <name>, <param>: <value>}`.", ""]
    for name, cls in NORMALIZERS.items():
        summary, details = _doc_parts(cls)
        out += [f"## {name}", "", summary, ""] + ([details, ""] if details else [])
        out += _param_table(param_infos(cls.params))

    out += ["# Schedules", "",
            "A weight is a number or `{schedule: <name>, <param>: <value>, ...}` over the global step.", ""]
    for name, cls in SCHEDULES.items():
        summary, details = _doc_parts(cls)
        out += [f"## {name}", "", summary, ""] + ([details, ""] if details else [])
        out += _param_table(param_infos(cls.params))

    out += ["# Transforms", "", "A list applied in order, to a term (`transforms:`) or to the total "
            "(`total: {transforms: [...]}`).", "",
            "| transform | written as | effect |", "|---|---|---|"]
    for cls in _transform_classes():
        summary, _ = _doc_parts(cls)
        out.append(f"| `{cls.name}` | `{TRANSFORM_SYNTAX.get(cls.name, cls.name)}` | {_cell(summary)} |")
    out.append("")
    return "\n".join(out)
