"""Property tests of rewards for users' own test suites, and the engine of ``rewardkit check``.

- :func:`check_component`: every promise a component declares (range, direction, finiteness,
  batched and compiled paths, state round trip, reset, deep copy), checked with Hypothesis.
- :func:`assert_monotone`, :func:`assert_range`, :func:`assert_finite`: promises of a composed
  reward, sampled across contexts and the steps of its weight schedules.
- :func:`check_config`: every expectation of a config's ``expect:`` section, proved statically
  where possible (:mod:`.static_proofs`), else sampled.
- :func:`contexts`, :func:`steps`, :func:`params_strategy`: Hypothesis strategies for what a
  composer or a component reads.

Needs Hypothesis (``pip install 'rewardkit[testing]'``); ``import rewardkit`` does not import it.
"""

try:
    import hypothesis  # noqa: F401  (the optional extra: checked first so that a missing one names the install)
except ImportError as exc:
    raise ImportError(f"rewardkit.testing needs Hypothesis: pip install 'rewardkit[testing]' ({exc})",
                      name=exc.name) from exc

from .component_checks import ComponentCheckError, check_component
from .config_checks import (ExpectationError, ExpectationResult, assert_finite, assert_monotone, assert_range,
                            check_config)
from .static_proofs import Proof, prove_finite, prove_monotone, prove_range
from .strategies import contexts, params_strategy, steps

__all__ = [
    "ComponentCheckError", "check_component", "ExpectationError", "ExpectationResult", "assert_monotone",
    "assert_range", "assert_finite", "check_config", "Proof", "prove_monotone", "prove_range", "prove_finite",
    "contexts", "steps", "params_strategy",
]
