"""The scripted runs the code-generation golden test replays: every reward config in the repository
and every built-in component alone, each called on drawn contexts one environment at a time and in
batches, recording totals and breakdowns bit for bit.

``python tests/rewardkit/compose/golden_cases.py`` re-records ``compose_golden.json`` (only when a
change is meant to alter what a reward pays; the test then pins the new numbers)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).with_name("compose_golden.json")
FOLDERS = ("configs", "examples", "docs")
SINGLE_CALLS = 8
BATCH_CALLS = 3
N_ENVS = 4
#: the examples' own components, which their configs name
PLUGINS = ("examples.grpo.terms", "examples.monitor.terms", "examples.stress.terms")


def config_files() -> list[Path]:
    """Every YAML file of the repository that is a reward config (it has a top-level ``components:``)."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.yaml")):
            if any(line.startswith("components:") for line in path.read_text().splitlines()):
                found.append(path)
    return found


def component_configs() -> dict[str, dict[str, Any]]:
    """One config per built-in synchronous component, its parameters drawn (derandomized)."""
    from rewardkit import get_component_class, registered
    from rewardkit.testing import params_strategy

    out = {}
    for name in registered():
        cls = get_component_class(name)
        if cls.asynchronous or not cls.__module__.startswith("rewardkit.components"):
            continue
        for k, params in enumerate(_draw(params_strategy(cls), 2)):
            out[f"component:{name}:{k}"] = {"version": 1, "components": {
                "term": {"type": name, "params": params, "weight": 1.5},
                "other": {"type": "linear", "inputs": {"value": "aux"}, "params": {"scale": 0.5}, "weight": -1.0}}}
    return out


def _draw(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """``count`` examples of ``strategy``, the same on every run (Hypothesis derandomized)."""
    drawn: list[Any] = []

    @settings(derandomize=True, max_examples=1, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(strategy, min_size=count, max_size=count))
    def collect(examples: list[Any]) -> None:
        drawn[:] = examples

    collect()
    return drawn


def encode(value: Any) -> Any:
    """A context value as JSON (arrays tagged with their dtype and shape; floats exact by repr)."""
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    return value


def decode(value: Any) -> Any:
    if isinstance(value, dict) and "array" in value:
        return np.array(value["array"], dtype=value["dtype"]).reshape(value["shape"])
    return value


def outputs(out: Any) -> dict[str, Any]:
    """Total and breakdown of one output, each float as its hex form (bit-identical comparison)."""
    def hexes(x: Any) -> Any:
        if isinstance(x, (bool, np.bool_)):
            return bool(x)
        if isinstance(x, np.ndarray):
            return [hexes(v) for v in x.tolist()]
        if isinstance(x, (float, int, np.floating)):
            return float(x).hex()
        return repr(x)

    return {"total": hexes(out.total),
            "terms": {name: [hexes(t.raw), hexes(t.normalized), hexes(t.weight), hexes(t.contribution),
                             hexes(t.applies)] for name, t in out.terms.items()}}


def scripted_calls(composer: Any) -> list[dict[str, Any]]:
    """The calls of one scripted run: single-environment contexts, then batches, with steps and flags."""
    from rewardkit.testing import contexts, steps

    single = _draw(st.tuples(contexts(composer), steps(composer), st.booleans(), st.booleans()), SINGLE_CALLS)
    batch = _draw(st.tuples(contexts(composer, n_envs=N_ENVS), steps(composer),
                            st.lists(st.booleans(), min_size=N_ENVS, max_size=N_ENVS)), BATCH_CALLS)
    calls = [{"ctx": {k: encode(v) for k, v in c.items()}, "step": s, "terminated": t, "truncated": u}
             for c, s, t, u in single]
    calls += [{"ctx": {k: encode(v) for k, v in c.items()}, "step": s, "terminated": encode(np.array(t)),
               "truncated": None} for c, s, t in batch]
    return calls


def run(composer: Any, calls: list[dict[str, Any]]) -> list[Any]:
    """Every call in order on ``composer`` (state carries over, as in training); an error is recorded as its type."""
    results = []
    for call in calls:
        ctx = {k: decode(v) for k, v in call["ctx"].items()}
        try:
            out = composer(ctx, step=call["step"], terminated=decode(call["terminated"]), truncated=call["truncated"])
        except Exception as exc:  # noqa: BLE001 - a refusal is part of the behaviour pinned
            results.append({"error": type(exc).__name__})
            continue
        results.append(outputs(out))
    return results


def plugin_components() -> dict[str, type]:
    """The examples' own components by type name (their configs name them)."""
    import importlib

    found = {}
    for module in PLUGINS:
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, type) and getattr(value, "type_name", None):
                found[value.type_name] = value
    return found


@contextlib.contextmanager
def plugins_registered() -> Iterator[None]:
    """The examples' components registered for the block, and only those that were missing taken out
    after it (another test may have cleared the registry of them, or may rely on them being there)."""
    from rewardkit import registry

    components = plugin_components()
    added = [name for name in components if name not in registry._REGISTRY]
    registry._REGISTRY.update({name: components[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            registry._REGISTRY.pop(name, None)


def load(case: str, config: Any) -> Any:
    from rewardkit import RewardComposer

    with plugins_registered():
        if isinstance(config, dict):
            return RewardComposer.from_dict(config, source=case)
        return RewardComposer.from_yaml(ROOT / config)


def record() -> dict[str, Any]:
    cases: dict[str, Any] = {}
    configs: dict[str, Any] = {str(p.relative_to(ROOT)): str(p.relative_to(ROOT)) for p in config_files()}
    configs.update(component_configs())
    for case, config in configs.items():
        try:
            calls = scripted_calls(load(case, config))
        except Exception as exc:  # noqa: BLE001 - configs needing a plug-in or a server are left out, and said
            print(f"left out {case}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
            continue
        cases[case] = {"config": config, "calls": calls, "results": run(load(case, config), calls)}
    return cases


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    recorded = record()
    GOLDEN.write_text(json.dumps(recorded, indent=None, sort_keys=True) + "\n")
    print(f"{len(recorded)} cases, {sum(len(c['calls']) for c in recorded.values())} calls -> {GOLDEN}")
