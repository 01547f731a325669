"""Property tests of rewards for users' own test suites, and the engine of ``rewardkit check``.

- :func:`check_component`: every promise a component declares (range, direction, finiteness,
  batched and compiled paths, state round trip, reset, deep copy), checked with Hypothesis.
- :func:`assert_monotone`, :func:`assert_range`, :func:`assert_finite`: promises of a composed
  reward, sampled across contexts and the steps of its weight schedules.
- :func:`check_config`: every expectation of a config's ``expect:`` section, proved statically
  where possible, else sampled.
- :func:`contexts`, :func:`steps`: Hypothesis strategies for what a composer reads.

Needs Hypothesis (``pip install 'rewardkit[testing]'``); ``import rewardkit`` does not import it.
"""

from .component_checks import ComponentCheckError, check_component
from .strategies import contexts, params_strategy, steps

__all__ = ["ComponentCheckError", "check_component", "contexts", "params_strategy", "steps"]
