"""The main job (``make demo``): train a short PPO router in Vidur, then compare it with heuristics.

Trains with ``configs/ppo_demo.yaml`` into ``runs/demo`` (an interrupted demo resumes), then runs
every policy on the same evaluation seeds and arrivals and prints the comparison table; plots
and CSV/JSON files land in ``runs/demo/eval``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli import DEFAULT_BASELINES, evaluation_seeds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/ppo_demo.yaml", help="training config")
    parser.add_argument("--out", default="runs/demo", help="run folder")
    parser.add_argument("--seeds", default="3", help="evaluation seeds: a count or a list")
    parser.add_argument("--baselines", default=DEFAULT_BASELINES, help="heuristics to compare with")
    args = parser.parse_args(argv)

    from .evaluate.paired import evaluate_policies
    from .rl.ppo_router import PPORouter
    from .routing.router import HeuristicRouter
    from .sim.env_config import load_env_config
    from .train.config import load_config
    from .train.trainer import train

    print(f"[demo] training with {args.config} into {args.out} (resumes if interrupted)", flush=True)
    result = train(args.config, args.out)
    cfg, source = load_config(args.config)
    env_cfg = load_env_config(cfg["env"], cfg.get("env_overrides") or None)
    routers = {name: HeuristicRouter(name) for name in args.baselines.split(",") if name}
    routers["ppo"] = PPORouter.from_checkpoint(result.policy_path)
    seeds = evaluation_seeds(args.seeds)
    print(f"[demo] evaluating on seeds {seeds} (never used in training)", flush=True)
    results = evaluate_policies(env_cfg, routers, seeds, out_dir=Path(args.out) / "eval")
    print(results.format_table())
    print(f"[demo] learning curves: {Path(args.out) / 'learning_curves.png'}; "
          f"comparison plots: {Path(args.out) / 'eval'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
