"""Print how schedule-driven weights move a reward's emphasis over training.

curriculum_weights.yaml gives each term a weight schedule (linear, cosine, piecewise, step). The
script prints every weight at a few steps, then drives the composer with one fixed context per
step so its own step counter moves the weights, and shows which term dominates the total.
Run: python examples/curriculum_weights.py
"""

from __future__ import annotations

from pathlib import Path

from rewardkit import RewardComposer

CONFIG = Path(__file__).with_name("curriculum_weights.yaml")
STEPS = (0, 1000, 2000, 4000, 6000, 8000, 12000)
# One fixed situation, so that only the weights change between rows.
CONTEXT = {"success": 1.0, "progress": 0.6, "energy": 2.0, "novelty": 1.0}


def main() -> None:
    composer = RewardComposer.from_yaml(CONFIG)
    names = list(composer.term_names)

    print("weights by step")
    print(f"{'step':>6} " + " ".join(f"{n:>9}" for n in names))
    for step in STEPS:
        weights = composer.shaper.weights(step)
        print(f"{step:>6} " + " ".join(f"{weights[n]:>9.4f}" for n in names))

    # Drive the composer step by step, as training would: each call advances composer.step by 1.
    print()
    print("contributions on a fixed context while training runs")
    print(f"{'step':>6} " + " ".join(f"{n:>9}" for n in names) + f" {'total':>8}  dominant")
    for step in range(max(STEPS) + 1):
        out = composer(CONTEXT)  # step taken from composer.step
        if step in STEPS:
            contrib = {n: out.terms[n].contribution for n in names}
            dominant = max(contrib, key=lambda n: abs(contrib[n]))
            print(f"{step:>6} " + " ".join(f"{contrib[n]:>9.4f}" for n in names)
                  + f" {out.total:>8.4f}  {dominant}")
    print(f"composer.step after the run: {composer.step}")


if __name__ == "__main__":
    main()
