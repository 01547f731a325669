"""The built-in routing policies, one module per family; importing this package registers them all.

=============  ====================================================================================
module         policies
=============  ====================================================================================
``vidur``      Vidur's own ``round_robin``, ``random``, ``lor`` (reproduced so every env runs them)
``load``       ``jsq``, ``least_kv``, ``least_tokens``, ``least_prefill``, ``power_of_two``
``prefix``     ``prefix_aware``, SGLang's ``cache_aware``, llm-d's ``affinity_token_load``
``speed``      ``cap_jsq``, ``cap_least_tokens``, ``cap_least_prefill``, ``adaptive``, ``oracle``
``llm_d``      ``llm_d_default``: llm-d's router with no configuration
``ray_prefix``  ``ray_prefix_affinity``: Ray Serve LLM's ``PrefixCacheAffinityRouter`` rule
``learned``    ``ppo``: a checkpoint written by ``rewardkit train``
=============  ====================================================================================

Adding a policy is one module: a :class:`~schedulers.routing.policy.Policy` subclass under
``@register_policy("name")`` (imported here, or published by another package through the
``schedulers.policies`` entry-point group).
"""

from . import vidur, load, prefix, speed, llm_d, ray_prefix, learned  # noqa: F401 - each registers its policies
