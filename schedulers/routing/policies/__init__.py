"""The built-in routing policies, one module per family; importing this package registers them all.

===================  ==================================================================================================
module               policies
===================  ==================================================================================================
``vidur``            Vidur's own ``round_robin``, ``random``, ``lor`` (reproduced so every env runs them)
``load``             ``jsq``, ``least_kv``, ``least_tokens``, ``least_prefill``, ``power_of_two``
``prefix``           ``prefix_aware``, SGLang's ``cache_aware``, llm-d's ``affinity_token_load`` (its README's example)
``speed``            ``cap_jsq``, ``cap_least_tokens``, ``cap_least_prefill``, ``adaptive``, ``oracle``
``llm_d``            ``llm_d_default``: llm-d's router with no configuration
``ray_prefix``       ``ray_prefix_affinity``: Ray Serve LLM's ``PrefixCacheAffinityRouter`` rule
``llm_d_optimized``  ``llm_d_optimized``: llm-d's optimized baseline (affinity filter, token-load scorer)
``least_load``       ``least_load``: SGLang gateway's (``smg``) least expected wait, a KV-pressure barrier
``dynamo_kv``        ``dynamo_kv``: NVIDIA Dynamo's KV router cost (uncached prefill and decode blocks)
``learned``          ``ppo``: a checkpoint written by ``rewardkit train``
===================  ==================================================================================================

Adding a policy is one module: a :class:`~schedulers.routing.policy.Policy` subclass under
``@register_policy("name")`` (imported here, or published by another package through the
``schedulers.policies`` entry-point group).
"""

# each registers its policies; the order is the registry's (and the order error messages list names in)
from . import vidur, load, prefix, speed, llm_d, ray_prefix, llm_d_optimized, least_load, dynamo_kv, learned  # noqa: F401
