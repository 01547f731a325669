"""Adapters to other RL libraries, each an optional extra imported only by its own module.

- :mod:`rewardkit.integrations.sb3`: Stable-Baselines3 (``pip install rewardkit[sb3]``).
- :mod:`rewardkit.integrations.trl`: TRL's GRPO reward functions (``pip install rewardkit[trl]``).
- :mod:`rewardkit.integrations.verl`: veRL's custom reward functions (per sample, batched, async);
  needs nothing to import (veRL calls them).
- :mod:`rewardkit.integrations.text_scoring` and :mod:`rewardkit.integrations.coalescer`: the shared
  core of the text adapters and of ``rewardkit serve-reward`` (contexts from lists of texts, one
  composer call per batch, concurrent requests merged into one call).

Gymnasium's wrappers live in :mod:`rewardkit.gym`.
"""
