"""Rank candidate answers by a preference score minus constraint penalties.

The config (preference_with_constraints.yaml) keeps the preference term as is and subtracts a
group of hinge penalties. The most preferred answers break a constraint, so they lose to a
slightly less preferred answer that respects all of them; among compliant answers the ranking is
the preference ranking. Run: python examples/preference_with_constraints.py
"""

from __future__ import annotations

from pathlib import Path

from rewardkit import RewardComposer

CONFIG = Path(__file__).with_name("preference_with_constraints.yaml")

# name -> (preference score, length in tokens, toxicity score, format error flag)
CANDIDATES = {
    "verbose_expert": (0.93, 720, 0.05, 0.0),
    "edgy_joke": (0.88, 140, 0.61, 0.0),
    "broken_json": (0.86, 200, 0.02, 1.0),
    "concise_correct": (0.81, 260, 0.03, 0.0),
    "short_vague": (0.55, 60, 0.01, 0.0),
}


def main() -> None:
    composer = RewardComposer.from_yaml(CONFIG)
    scored = []
    for name, (pref, length, tox, fmt) in CANDIDATES.items():
        ctx = {"preference": pref, "length": float(length), "toxicity": tox, "format_error": fmt}
        out = composer(ctx)
        penalty = out.terms["constraints"].contribution + 0.0  # turn -0.0 into 0.0 for printing
        scored.append((out.total, name, pref, penalty))

    print(f"{'candidate':<16} {'preference':>10} {'penalty':>9} {'reward':>8}")
    for total, name, pref, penalty in sorted(scored, reverse=True):
        print(f"{name:<16} {pref:>10.2f} {penalty:>9.3f} {total:>8.3f}")

    best_pref = max(scored, key=lambda s: s[2])[1]
    best = max(scored)[1]
    print(f"highest preference: {best_pref}")
    print(f"highest reward: {best}")
    compliant = [s for s in scored if s[3] == 0.0]
    same_order = sorted(compliant, key=lambda s: s[0]) == sorted(compliant, key=lambda s: s[2])
    print(f"compliant answers keep the preference order: {same_order}")


if __name__ == "__main__":
    main()
