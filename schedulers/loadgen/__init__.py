"""``rewardkit loadgen``: a load generator for OpenAI-compatible endpoints (a gateway or an engine).

:mod:`~schedulers.loadgen.workload` makes the requests (arrivals and lengths from an env YAML or
a trace, shared-prefix prompts), :mod:`~schedulers.loadgen.runner` replays them and measures
TTFT/TPOT/ITL/e2e, :mod:`~schedulers.loadgen.cli` is the subcommand.
"""
