"""Keys for finished runs: a run is reused only when what made it is the same.

The key hashes the reward config's contents, the source of the code that trains and scores
(this package's task, model and training modules, and each rewardkit component module the config
names), and the run's settings (task, arm, seed, budget, held-out size, library versions). An
edited config, component or budget gives a new key, so an old result is never printed for it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: the example's modules whose code decides a run's result
SOURCES = ("task.py", "instructions.py", "model.py", "training.py", "scorer.py")
LIBRARIES = ("torch", "transformers", "trl", "peft")


def component_files(config: dict[str, Any]) -> list[Path]:
    """The source files of the components ``config`` names (groups searched too), sorted."""
    from rewardkit.registry import get_component_class

    found: set[Path] = set()

    def walk(components: dict[str, Any]) -> None:
        for entry in components.values():
            if entry.get("type") == "group":
                walk(entry.get("components", {}))
            else:
                module = sys.modules[get_component_class(entry["type"]).__module__]
                found.add(Path(module.__file__ or ""))

    walk(config.get("components", {}))
    return sorted(found)


def run_key(config: dict[str, Any], settings: dict[str, Any]) -> str:
    """A 16-hex-digit digest of the config, the code and the settings (dataclasses become dicts)."""
    digest = hashlib.sha256()
    plain = {k: asdict(v) if is_dataclass(v) and not isinstance(v, type) else v for k, v in settings.items()}
    versions = {name: _version(name) for name in LIBRARIES}
    digest.update(json.dumps({"config": config, "settings": plain, "versions": versions}, sort_keys=True,
                             default=str).encode())
    for path in [*(HERE / name for name in SOURCES), *component_files(config)]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"
