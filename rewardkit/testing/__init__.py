"""Property tests of rewards for users' own test suites, the engine of ``rewardkit check``, and
``rewardkit stress``.

- :func:`check_component`: every promise a component declares (range, direction, finiteness,
  batched and compiled paths, state round trip, reset, deep copy), checked with Hypothesis.
- :func:`assert_monotone`, :func:`assert_range`, :func:`assert_finite`: promises of a composed
  reward, sampled across contexts and the steps of its weight schedules.
- :func:`check_config`: every expectation of a config's ``expect:`` section, proved statically
  where possible (:mod:`.static_proofs`), else sampled.
- :func:`contexts`, :func:`steps`, :func:`params_strategy`: Hypothesis strategies for what a
  composer or a component reads.
- :mod:`.stress`: loophole search over a config and rows of data (no Hypothesis needed).

The Hypothesis-based names need Hypothesis (``pip install 'rewardkit[testing]'``); they are
imported on first use, so ``rewardkit.testing.stress`` works without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ComponentCheckError": "component_checks", "check_component": "component_checks",
    "ExpectationError": "config_checks", "ExpectationResult": "config_checks", "assert_finite": "config_checks",
    "assert_monotone": "config_checks", "assert_range": "config_checks", "check_config": "config_checks",
    "Proof": "static_proofs", "prove_finite": "static_proofs", "prove_monotone": "static_proofs",
    "prove_range": "static_proofs",
    "contexts": "strategies", "params_strategy": "strategies", "steps": "strategies",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import hypothesis  # noqa: F401  (the optional extra: checked first so that a missing one names the install)
    except ImportError as exc:
        raise ImportError(f"rewardkit.testing needs Hypothesis: pip install 'rewardkit[testing]' ({exc})",
                          name=exc.name) from exc
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
