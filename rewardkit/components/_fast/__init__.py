"""Fast paths of the built-in components, apart from their definitions.

A component's own module holds what it is (``compute`` and its declarations), the version to read
and to copy; a module here of the same name (or of its shared base's: ``_sigmoid``, ``_length``)
holds faster code that gives the same numbers (a NumPy layout, plain floats for one environment,
code the composer inlines) and an ``attach(cls)`` that sets it on the class. :func:`attach_all`
runs when ``rewardkit.components`` is imported. The composer calls ``compute_fast`` when a
component has one, else ``compute``; the component tests check every fast path against the
definition.
"""

from __future__ import annotations

import importlib
from typing import Any

#: component type name -> the module of its fast paths (a shared base's module serves each subclass)
FAST_PATHS = {
    "ema_delta": "rewardkit.components._fast.ema_delta",
    "length_penalty": "rewardkit.components._fast._length",
    "length_target": "rewardkit.components._fast._length",
    "linear": "rewardkit.components._fast.linear",
    "littles_law_latency": "rewardkit.components._fast.littles_law_latency",
    "load_imbalance": "rewardkit.components._fast.load_imbalance",
    "logistic_latency": "rewardkit.components._fast._sigmoid",
    "overlong_penalty": "rewardkit.components._fast._length",
    "potential_shaping": "rewardkit.components._fast.potential_shaping",
    "threshold_penalty": "rewardkit.components._fast.threshold_penalty",
    "throughput_sigmoid": "rewardkit.components._fast._sigmoid",
}


def attach_all(classes: dict[str, Any]) -> None:
    """Attach each built-in component's fast paths (``classes``: type name -> class)."""
    for name, module in FAST_PATHS.items():
        importlib.import_module(module).attach(classes[name])
