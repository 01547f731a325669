"""Code generation: a reward config compiled into two Python functions.

``reward_single_env`` (numbers in, no NumPy on the hot path; it is the composer's ``__call__``) and
``reward_batched`` (a leading environment axis). Each is written by small emitters that take what
they need and return lines and the globals those lines name (:class:`~.source.Emitted`):
:mod:`.inputs` (reading the context), :mod:`.weights`, :mod:`.terms` (one term's raw value),
:mod:`.combine` (normalizers, transforms, sums); :mod:`.scalar` and :mod:`.vector` assemble them into
functions over one :class:`~.layout.Layout` (what the config is), each in a :class:`~.names.Scope`
of its own; :class:`~.plan.CompiledPlan` defines both and rebuilds them when a weight changes.
``composer.generated_code()`` shows them.

Contract of the two functions:

- ``single_env(ctx, step=None, terminated=None, truncated=None) -> RewardOutput`` evaluates one
  environment and advances ``store.step`` when training; a context it cannot take (a batch,
  asynchronous terms, a missing key, not a mapping) goes, before any state moves, to
  ``fallback(ctx, step, terminated, truncated, exc)`` given at construction.
- ``batched(*slot_values, step, terminated, truncated, done, start) -> (total, flat values)``
  takes the reader's checked :class:`~rewardkit.inputs.BatchInputs` values in slot order and the
  episode flags; ``start`` launches the asynchronous terms (``rewardkit.async_terms``). It does not
  snapshot state or clear ended episodes: the caller does (see ``RewardComposer``).
"""

from .plan import CompiledPlan, GeneratedSources

__all__ = ["CompiledPlan", "GeneratedSources"]
