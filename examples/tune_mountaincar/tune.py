"""Tune the shaping reward of MountainCarContinuous with rewardkit.optimize.

Each trial trains a small PPO with the trial's reward (reward.yaml with the weights of
space.yaml sampled by TPE) and scores the policy on the environment's own return. The study is
a journal file, so running again continues it. Run:

    python examples/tune_mountaincar/tune.py --trials 20 --steps 20000 --out runs/mountaincar

or the same through the command line, from this folder:

    MOUNTAINCAR_STEPS=20000 rewardkit optimize --study mountaincar --base reward.yaml \
        --search-space space.yaml --objective objective:mountaincar --n-trials 20 --pruner median
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from objective import make_objective  # noqa: E402

from rewardkit.optimize import BayesianRewardOptimizer  # noqa: E402
from rewardkit.optimize.results import best_table, save_plots  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="the study's total of trials")
    parser.add_argument("--steps", type=int, default=20000, help="PPO training steps per trial")
    parser.add_argument("--eval-steps", type=int, default=999, help="length cap of evaluation episodes")
    parser.add_argument("--out", default="runs/mountaincar", help="folder of the study's journal and files")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    objective = make_objective(args.steps, eval_steps=args.eval_steps)
    opt = BayesianRewardOptimizer(HERE / "reward.yaml", HERE / "space.yaml", objective, study_name="mountaincar",
                                  storage=str(out / "mountaincar.journal"), pruner="median",
                                  directions=objective.directions, n_seeds=objective.n_seeds, seed=0)
    opt.enqueue(HERE / "reward.yaml")  # the hand-set weights are trial 0
    opt.optimize(n_trials=args.trials)
    print(best_table(opt))
    for path in save_plots(opt):
        print(f"wrote {path}")
    print(f"wrote {opt.export_best(out / 'best_reward.yaml')}")


if __name__ == "__main__":
    main()
