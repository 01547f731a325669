"""Learned policies: ``ppo``, a checkpoint written by ``rewardkit train``.

The network and its loading need torch, which the routing package never imports: the class
registered here declares what the policy needs, and :meth:`PPOPolicy.create` imports
:mod:`schedulers.rl.ppo_router` (whose ``PPORouter`` subclasses it) only when one is built.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..policy import Policy, register_policy

#: the module that builds a ``ppo`` policy (needs torch)
PPO_MODULE = "schedulers.rl.ppo_router"


@register_policy("ppo")
class PPOPolicy(Policy):
    """A trained replica scorer on the observation rows its checkpoint was trained with.

    Options: ``deterministic`` (arg-max, the default; else a seeded sample), ``temperature`` (overrides
    the saved one); ``threads`` sets torch's thread count first.
    """

    needs_checkpoint = True
    learned = True

    @classmethod
    def create(cls, *, params: Any = None, checkpoint: Any = None, threads: int | None = None,
               **options: Any) -> Policy:
        module = importlib.import_module(PPO_MODULE)
        return module.make_ppo_router(checkpoint, threads=threads, **options)
