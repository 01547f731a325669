"""The layout's promises: no import cycles (function-level imports included), imports run one way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rewardkit", "schedulers")
#: schedulers' layers, every package and top-level module of it; a package may import only from layers
#: before it (and from itself), never from a sibling of its own layer. ``shared`` is the ground floor
#: both halves stand on (workload, arrivals, per-request reward, episode metrics, the engine protocol);
#: the simulator half (``sim``, ``rl``) and the serving half (``live``, ``loadgen``) stand side by side
#: on ``routing``; ``engines`` (test and benchmark rigs) sits on top; ``integrations`` (our policies inside
#: other serving systems) stands on the live view and the serving half; ``replay`` (routers judged on a
#: gateway's log in the simulator) stands on the simulator, evaluation and training.
LAYERS = (("paths", "bounds"), "shared", "routing", ("sim", "live", "loadgen", "rl"), ("serve", "environments"),
          ("train", "evaluate", "integrations"), ("tune", "replay"), ("cli", "engines"), "demo")
#: imports the layers would allow but the design does not: the gateway stands on the live view alone.
FORBIDDEN = {"serve": ("sim", "loadgen", "engines", "rl", "train", "evaluate", "tune")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Project modules ``path`` imports anywhere in its body (TYPE_CHECKING and function-level too)."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != mod and not mod.startswith(name + "."):
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    known = {module_name(p) for p in files}
    return {module_name(p): imported_modules(p, known) for p in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "schedulers" or len(parts) < 2:
        return None
    for i, layer in enumerate(LAYERS):
        if parts[1] in (layer if isinstance(layer, tuple) else (layer,)):
            return i
    return None


def test_schedulers_layers_import_one_way() -> None:
    wrong = []
    for module, imports in import_graph().items():
        mine = _layer(module)
        if mine is None:
            continue
        for other in imports:
            theirs = _layer(other)
            if theirs is not None and theirs > mine:
                wrong.append(f"{module} -> {other}")
            if theirs is not None and theirs == mine and other.split(".")[1] != module.split(".")[1]:
                wrong.append(f"{module} -> {other} (sibling packages)")
            if theirs is not None and other.split(".")[1] in FORBIDDEN.get(module.split(".")[1], ()):
                wrong.append(f"{module} -> {other} (forbidden)")
    assert wrong == []


def test_every_package_and_module_of_schedulers_has_a_layer() -> None:
    named = {name for layer in LAYERS for name in (layer if isinstance(layer, tuple) else (layer,))}
    present = {p.stem for p in (ROOT / "schedulers").iterdir()
               if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert present == named


def test_the_layer_check_catches_the_serving_halfs_old_imports() -> None:
    """live -> loadgen and loadgen -> sim (siblings), serve -> loadgen (forbidden) fail; live -> shared passes."""
    def bad(module: str, other: str) -> bool:
        mine, theirs = _layer(module), _layer(other)
        return (theirs > mine or (theirs == mine and other.split(".")[1] != module.split(".")[1])
                or other.split(".")[1] in FORBIDDEN.get(module.split(".")[1], ()))

    assert bad("schedulers.live.env", "schedulers.loadgen.runner")
    assert bad("schedulers.loadgen.sources", "schedulers.sim.arrivals")
    assert bad("schedulers.serve.gateway", "schedulers.loadgen.runner")
    assert bad("schedulers.shared.workload", "schedulers.routing.observation")
    assert not bad("schedulers.live.env", "schedulers.shared.engine_requests")


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("rewardkit", ("schedulers", "vidur", "torch")),
        ("schedulers/shared", ("vidur", "torch", "gymnasium", "pandas")),
        ("schedulers/routing", ("vidur", "torch", "gymnasium")),
        ("schedulers/live", ("vidur", "torch", "pandas")),
        ("schedulers/loadgen", ("vidur", "torch", "pandas")),
        ("schedulers/serve", ("vidur", "torch", "pandas")),
        ("schedulers/rl", ("vidur",)),
        ("schedulers/train", ("vidur",)),
        ("schedulers/evaluate", ("vidur",)),
    ],
)
def test_packages_import_only_what_their_layer_allows(package: str, forbidden: tuple[str, ...]) -> None:
    offenders = []
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _import_time_nodes(tree) if package == "rewardkit" else ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in forbidden]
    assert offenders == []


def _import_time_nodes(tree: ast.Module) -> list[ast.AST]:
    """Statements that run when the module is imported (module level, inside top-level if/try)."""
    out: list[ast.AST] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.If, ast.Try)):
            todo += node.body + node.orelse + getattr(node, "finalbody", [])
            todo += [stmt for handler in getattr(node, "handlers", []) for stmt in handler.body]
    return out


def test_rewardkit_never_imports_schedulers_even_lazily() -> None:
    offenders = [m for m, imports in import_graph().items() if m.startswith("rewardkit")
                 for other in imports if other.startswith("schedulers")]
    assert offenders == []


def _top_level(module: str) -> str:
    """``rewardkit.monitor.detectors`` -> ``rewardkit.monitor``; ``rewardkit.config`` stays itself."""
    return ".".join(module.split(".")[:2])


def package_graph(package: str = "rewardkit") -> dict[str, set[str]]:
    """Imports between ``package``'s first-level packages and top-level modules (function-level ones too)."""
    graph: dict[str, set[str]] = {}
    for module, imports in import_graph().items():
        if module.split(".")[0] != package:
            continue
        mine = _top_level(module)
        graph.setdefault(mine, set()).update(
            _top_level(other) for other in imports if other.split(".")[0] == package and _top_level(other) != mine)
    return graph


def test_package_graph_maps_modules_to_their_first_level_package() -> None:
    assert _top_level("rewardkit.monitor.detectors") == "rewardkit.monitor"
    assert _top_level("rewardkit.config") == "rewardkit.config"
    assert _top_level("rewardkit") == "rewardkit"
    graph = package_graph()
    assert "rewardkit.monitor" in graph and "rewardkit.config" in graph
    assert not any(name.count(".") > 1 for name in graph)


def test_rewardkit_packages_import_one_way() -> None:
    """No two of rewardkit's packages and top-level modules import each other, even lazily (a schema a
    config reads lives in a top-level ``*_spec`` module below ``config``; the package that runs it sits above)."""
    graph = package_graph()
    found = cycles(graph)
    edges = [f"{a} -> {b}" for component in found for a in component for b in sorted(graph[a] & set(component))]
    assert found == [], "packages that import each other: " + "; ".join(edges)
