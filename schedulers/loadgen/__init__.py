"""``rewardkit loadgen``: a load generator for OpenAI-compatible endpoints (a gateway or an engine).

:mod:`~schedulers.loadgen.sources` picks the requests from the command line (an env YAML's
workload or a trace; the prompts come from :mod:`schedulers.shared.requests`),
:mod:`~schedulers.loadgen.runner` replays them open loop with the one engine client
(:mod:`schedulers.shared.engine_requests`) and summarizes TTFT/TPOT/ITL/e2e, :mod:`~schedulers.loadgen.cli`
is the subcommand. It imports nothing from the simulator nor from the live env.
"""
