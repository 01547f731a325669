"""Train the PPO prefix router on a workload mix (configs/ppo_prefix.yaml on configs/mixes/prefix_train.yaml).

``rewardkit train`` trains on one env YAML; this script hands :func:`schedulers.train.trainer.train`
an env factory whose every episode plays one variant of the mix (episode seed mod the number of
variants: :class:`schedulers.sim.workload_mix.WorkloadMixEnv`). Resumes an interrupted run.

Usage::

    PYTHONPATH=$PWD python benchmarks/bench_prefix_train.py --out runs/ppo_prefix
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/ppo_prefix.yaml")
    p.add_argument("--mix", default="configs/mixes/prefix_train.yaml")
    p.add_argument("--out", default="runs/ppo_prefix")
    args = p.parse_args(argv)
    os.environ.setdefault("WANDB_MODE", "disabled")
    from rewardkit.config import load_yaml

    from schedulers.paths import resolve_path
    from schedulers.sim.workload_mix import WorkloadMixEnv, load_workload_mix
    from schedulers.train.trainer import train

    mix = load_workload_mix(args.mix)
    reward = str(resolve_path(load_yaml(args.config)["reward"], args.config))
    result = train(args.config, args.out, env_factory=lambda: WorkloadMixEnv(mix, reward))
    print(f"trained {result.updates} updates, {result.global_step} env steps; policy: {result.policy_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
