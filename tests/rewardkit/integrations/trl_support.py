"""A GRPOTrainer on a tiny model built here (CPU, offline), for the tests of rewardkit.integrations.trl."""

from __future__ import annotations

from typing import Any

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer

WORDS = ["[PAD]", "[UNK]", "[EOS]"] + "the a cat dog sat ran on mat yes no 1 2 3 4 answer is".split()
DATA = {"prompt": ["the cat sat", "a dog ran", "the answer is", "yes no"], "answer": ["1", "2", "3", "yes"]}


def tiny_trainer(tmp_path: Any, reward_funcs: list, reward_weights: list[float], data: dict | None = None,
                 **config: object) -> GRPOTrainer:
    """A two-step GRPOTrainer (batches of 4, 2 generations, completions of up to 4 tokens) on
    ``data`` (columns of 4 rows; a prompt and an answer column by default)."""
    vocab = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    vocab.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=vocab, pad_token="[PAD]", eos_token="[EOS]",
                                        unk_token="[UNK]")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(WORDS), n_positions=32, n_embd=16, n_layer=1, n_head=2,
                                       bos_token_id=2, eos_token_id=2, pad_token_id=0))
    data = Dataset.from_dict(DATA if data is None else data)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=4, max_steps=2, report_to=[], use_cpu=True, logging_steps=1,
                      save_strategy="no", bf16=False, reward_weights=reward_weights, **config)
    return GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args, train_dataset=data,
                       processing_class=tokenizer)
