"""Adapters to other RL libraries, each an optional extra imported only by its own module.

- :mod:`rewardkit.integrations.sb3`: Stable-Baselines3 (``pip install rewardkit[sb3]``).
- :mod:`rewardkit.integrations.trl`: TRL's GRPO reward functions (``pip install rewardkit[trl]``).

Gymnasium's wrappers live in :mod:`rewardkit.gym`.
"""
