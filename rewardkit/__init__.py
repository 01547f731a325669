"""rewardkit: compose reinforcement-learning rewards from declared, validated parts.

``RewardComposer.from_yaml(path)`` builds a reward from registered components; see ``docs/``.
Importing rewardkit never imports torch, optuna, gymnasium or vidur.
"""

from __future__ import annotations

from . import components as _components  # noqa: F401  (registers the built-in components)
from .backend import array_namespace
from .base import BaseReward, PerEnvState
from .composer import RewardComposer, RewardOutput, TermOutput
from .errors import ConfigError, MissingInputError, NonFiniteInputError, RewardKitError
from .normalizers import NORMALIZERS, Normalizer
from .params import Param
from .registry import get_component_class, register, registered
from .schedules import SCHEDULES, Schedule, make_schedule
from .shaper import RewardShaper
from .transforms import Transform

__version__ = "0.1.0"

__all__ = [
    "BaseReward", "PerEnvState", "RewardComposer", "RewardOutput", "TermOutput", "ConfigError",
    "MissingInputError", "NonFiniteInputError", "RewardKitError", "Normalizer", "NORMALIZERS",
    "Param", "register", "registered", "get_component_class", "Schedule", "SCHEDULES",
    "make_schedule", "RewardShaper", "Transform", "array_namespace", "__version__",
]
