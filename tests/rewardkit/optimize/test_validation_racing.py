"""The tuner is useful at its defaults: with noise about 30% of the base's value, a config
about four standard errors better is found, and with nothing better the base is kept.

Known truth, synthetic objective, in-memory storage, one process: 40 studies at the defaults of
``rewardkit optimize`` (``--validate 3 --repeats 3``, no ``--max-repeats``: the race's cap).
Every study draws its own noise (``noise_seed``): twenty studies are twenty experiments.
"""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest
import yaml

from optimize_support import BASE_YAML
from rewardkit.optimize import BayesianRewardOptimizer, trial_repeat, trial_seeds
from rewardkit.optimize.validation import BETTER, NO_IMPROVEMENT, measure_noise, race_looks, validate

BASE_VALUE = 1.0
SD = 0.3 * BASE_VALUE                 # one run's noise: 30% of the base's value
STANDARD_ERROR = SD / math.sqrt(3)    # of a config's mean over the default 3 repeats
GOOD_WEIGHT = 2.0                     # the one better choice
SPACE = {"components.progress.weight": {"type": "categorical", "choices": [0.0, 0.5, 1.5, GOOD_WEIGHT]},
         "components.effort.weight": {"type": "float", "low": -1.0, "high": 0.0}}  # no effect: many lucky neutrals
DEFAULTS = {"k": 3, "repeats": 3}     # rewardkit optimize's --validate and --repeats


class NoisyObjective:
    """Minimize: ``BASE_VALUE`` (minus ``effect`` with the good weight) plus a run's noise of sd ``SD``."""

    n_seeds = 1

    def __init__(self, effect: float, noise_seed: int) -> None:
        self.effect, self.noise_seed = effect, noise_seed

    def truth(self, config: dict) -> float:
        good = config["components"]["progress"]["weight"] == GOOD_WEIGHT
        return BASE_VALUE - (self.effect if good else 0.0)

    def __call__(self, config: dict, trial) -> float:
        c = config["components"]
        ident = int(c["progress"]["weight"] * 1000) * 10**6 + int(abs(c["effort"]["weight"]) * 10**6)
        rng = np.random.default_rng([self.noise_seed, ident, trial_repeat(trial), trial_seeds(trial)[0]])
        return self.truth(config) + rng.normal(0, SD)


def study(objective: NoisyObjective, seed: int, n_trials: int = 12):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    opt = BayesianRewardOptimizer(yaml.safe_load(BASE_YAML), SPACE, objective, study_name=f"s{seed}",
                                  storage=optuna.storages.InMemoryStorage(), seed=seed)
    opt.show_progress = False
    measure_noise(opt, DEFAULTS["repeats"])
    opt.optimize(n_trials=n_trials)
    return opt, validate(opt, **DEFAULTS)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an in-memory study keeps its trial files under the working folder


def test_a_config_four_standard_errors_better_is_exported_at_the_defaults():
    found, repeats = 0, []
    for seed in range(20):
        objective = NoisyObjective(effect=4 * STANDARD_ERROR, noise_seed=seed)
        opt, v = study(objective, seed)
        chosen = v.chosen
        if chosen.label != "base":
            assert objective.truth(opt.space.apply(opt.base_config, chosen.params)) < BASE_VALUE, v.table()
            found += 1
        repeats.append(max(v.repeats_of(c) for c in v.candidates))
        assert v.stop_reason and "the race stopped: " + v.stop_reason in v.table()
    assert found >= 18, found
    assert min(repeats) < max(repeats)  # repeats go where they decide something: not every study races to the cap


def test_with_nothing_better_the_base_is_exported_at_the_defaults():
    kept = 0
    for seed in range(20):
        _, v = study(NoisyObjective(effect=0.0, noise_seed=100 + seed), seed)
        kept += v.chosen.label == "base"
        assert (NO_IMPROVEMENT in v.verdict()) == (v.chosen.label == "base")
    assert kept >= 18, kept


def test_a_clearly_worse_finalist_stops_early_and_the_race_says_why():
    """A finalist far worse than the base is dropped at an early look; the others race on to the cap."""
    class WithABadChoice(NoisyObjective):
        def truth(self, config):
            return BASE_VALUE + (5 * SD if config["components"]["progress"]["weight"] == 0.0 else 0.0)

    opt = BayesianRewardOptimizer(yaml.safe_load(BASE_YAML), SPACE, WithABadChoice(0.0, 7), study_name="bad",
                                  storage=optuna.storages.InMemoryStorage(), seed=7)
    opt.show_progress = False
    for weight in (0.0, 0.5, 1.5):
        opt.enqueue({"components": {**opt.base_config["components"],
                                    "progress": {**opt.base_config["components"]["progress"], "weight": weight}}})
    opt.optimize(n_trials=3)
    v = validate(opt, **DEFAULTS)
    bad = next(c for c in v.candidates[1:] if c.params["components.progress.weight"] == 0.0)
    assert v.repeats_of(bad) < 12 and v.statuses[v.candidates.index(bad) - 1].startswith("dropped")
    assert max(v.repeats_of(c) for c in v.candidates) == race_looks(3, 12)[-1] == 12
    assert "reached the cap of 12 repeats" in v.stop_reason and v.chosen.label == "base"
    assert BETTER not in v.statuses
