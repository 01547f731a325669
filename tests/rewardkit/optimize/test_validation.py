"""The tuner tells a better reward from a lucky one: noise first, validation on fresh seeds, a guarded export.

A cheap synthetic objective with a known optimum and known noise stands in for training a policy:
its value is ``f(x)`` plus a training-run noise (new for every config and repeat) plus a seed
noise shared by every config on the same seed (what pairing cancels) plus per-run seed noise.
"""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml

from rewardkit.errors import ConfigError
from rewardkit.optimize import BayesianRewardOptimizer, SearchSpace
from rewardkit.optimize.evaluations import EvaluationStore
from rewardkit.optimize.intervals import joint_tail, paired_changes
from rewardkit.optimize.trial_context import (record_cost, record_seed_values, trial_repeat, trial_seeds,
                                              trial_training, tuning_seeds, validation_seeds, report_seeds)
from rewardkit.optimize.validation import NO_IMPROVEMENT, compute_table, measure_noise, validate

from optimize_support import BASE_YAML, child_env, load_trials

SPACE = {"components.progress.weight": {"type": "float", "low": 0.0, "high": 2.0}}
N_SEEDS = 3


class SyntheticObjective:
    """``f(w) + noise``: ``f`` flat (nothing beats the base) or a bowl with its minimum at w = 1.6.

    ``noise_seed`` picks the draws: studies meant as independent experiments get their own, else
    every study would re-run the one same draw of the base's noise on the validation seeds."""

    n_seeds = N_SEEDS

    def __init__(self, flat: bool, run_sd: float = 0.05, seed_sd: float = 0.05, noise_seed: int = 0) -> None:
        self.flat, self.run_sd, self.seed_sd, self.noise_seed = flat, run_sd, seed_sd, noise_seed
        self.calls = 0

    def f(self, w: float) -> float:
        return 1.0 if self.flat else 1.0 + (w - 1.6) ** 2

    def __call__(self, config: dict, trial) -> float:
        self.calls += 1
        w = config["components"]["progress"]["weight"]
        seeds, repeat = trial_seeds(trial), trial_repeat(trial)
        ident = int(abs(w) * 1e9) % 2**31
        run = np.random.default_rng([self.noise_seed, ident, repeat, seeds[0], 1]).normal(0, self.run_sd)
        values = [self.f(w) + run + np.random.default_rng([self.noise_seed, s, 7]).normal(0, self.seed_sd)
                  + np.random.default_rng([self.noise_seed, ident, repeat, s, 2]).normal(0, self.seed_sd)
                  for s in seeds]
        record_seed_values(trial, values)
        record_cost(trial, 100)
        return float(np.mean(values))


def make_optimizer(tmp_path: Path, objective, seed: int, base_weight: float = 1.0, **kw) -> BayesianRewardOptimizer:
    base = yaml.safe_load(BASE_YAML)
    base["components"]["progress"]["weight"] = base_weight
    opt = BayesianRewardOptimizer(base, kw.pop("space", SPACE), objective, study_name=f"s{seed}",
                                  storage=kw.pop("storage", str(tmp_path / f"s{seed}.journal")), seed=seed,
                                  n_seeds=N_SEEDS, **kw)
    opt.show_progress = False
    return opt


def run_study(tmp_path: Path, objective, seed: int, base_weight: float, n_trials: int = 12):
    """One study in memory (its trial files under the working folder: the tests chdir to tmp_path)."""
    opt = make_optimizer(tmp_path, objective, seed, base_weight, storage=optuna.storages.InMemoryStorage())
    measure_noise(opt, 3)
    opt.enqueue(opt.base_config)
    opt.optimize(n_trials=n_trials)
    return opt, validate(opt, k=3, repeats=3)


def test_seed_ranges_are_disjoint_and_repeats_get_their_own():
    tune = {s for r in range(4) for s in tuning_seeds(3, study_seed=7, repeat=r)}
    val = {s for r in range(4) for s in validation_seeds(3, r)}
    assert len(tune) == 12 and len(val) == 12 and not tune & val and not (tune | val) & set(report_seeds(3))
    assert validation_seeds(3, 0) != validation_seeds(3, 1)
    with pytest.raises(ValueError, match="repeat"):
        validation_seeds(3, -1)


def test_guard_exports_the_base_when_nothing_is_better(tmp_path, monkeypatch):
    """20 seeded studies of a flat objective: every candidate is the base plus noise."""
    monkeypatch.chdir(tmp_path)
    exported_base = 0
    for seed in range(20):
        _, v = run_study(tmp_path, SyntheticObjective(flat=True, noise_seed=seed), seed, base_weight=1.0)
        exported_base += v.chosen.label == "base"
        assert (NO_IMPROVEMENT in v.verdict()) == (v.chosen.label == "base")
    assert exported_base >= 18


def test_guard_exports_a_clearly_better_config(tmp_path, monkeypatch):
    """20 seeded studies of a bowl: the base (w = 0.2) is far worse than the optimum (w = 1.6)."""
    monkeypatch.chdir(tmp_path)
    found = []
    for seed in range(20):
        opt, v = run_study(tmp_path, SyntheticObjective(flat=False, noise_seed=seed), seed, base_weight=0.2)
        chosen = v.chosen
        if chosen.label != "base":
            found.append(chosen.params["components.progress.weight"])
            assert "improves on the base" in v.verdict()
    assert len(found) >= 18
    assert np.median(np.abs(np.array(found) - 1.6)) < 0.3


def test_intervals_are_paired_and_simultaneous():
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0, 1.0, (3, 3))  # large, shared by every config on a seed
    base = 5 + seed_effect + rng.normal(0, 0.01, (3, 3))
    better = 4.9 + seed_effect + rng.normal(0, 0.01, (3, 3))
    one, = paired_changes([better], base)
    assert one.improves("minimize") and one.high < 0 and one.wins == 3
    # two more candidates with their own noise: the same one's interval widens (simultaneous over more comparisons)
    others = [base + rng.normal(0, 0.3, (3, 3)), base + rng.normal(0, 0.3, (3, 3))]
    three = paired_changes([better, *others], base)
    assert three[0].high - three[0].low > one.high - one.low
    # near copies of one candidate are one comparison, not three: no widening (Bonferroni would widen)
    copies = paired_changes([better, better + 1e-6, better - 1e-6], base)
    assert copies[0].high - copies[0].low == pytest.approx(one.high - one.low, rel=0.02)
    bonferroni = paired_changes([better, better + 1e-6, better - 1e-6], base, adjust="bonferroni")
    assert bonferroni[0].high - bonferroni[0].low > 1.2 * (one.high - one.low)


def test_joint_tail_lies_between_one_comparison_and_bonferroni():
    rng = np.random.default_rng(1)
    shared = rng.normal(size=4000)
    assert joint_tail(shared[None, :].repeat(3, axis=0), 0.9) == pytest.approx(0.05, abs=0.003)
    independent = joint_tail(rng.normal(size=(3, 4000)), 0.9)
    assert 0.1 / 6 <= independent < 0.02  # Sidak's 0.0176 for three independent comparisons
    flat = np.vstack([shared, np.zeros(4000)])  # a candidate without spread is no comparison
    assert joint_tail(flat, 0.9) == pytest.approx(0.05, abs=0.003)


def test_guard_keeps_its_false_alarm_rate_with_a_noisy_base_and_correlated_finalists():
    """The benchmark's noise structure: a base whose training runs spread 30%, three near-identical
    finalists no better than it. Over 200 simulated validations (5 repeats of 3 seeds), the guard calls a
    win at most ~5% of the time (90% two-sided intervals; 9% allows for the simulation's own noise)."""
    rng = np.random.default_rng(7)
    calls = 0
    for i in range(200):
        seed_effect = rng.normal(0, 0.05, (5, 3))
        base = 0.3 + seed_effect + rng.normal(0, 0.09, (5, 1)) + rng.normal(0, 0.02, (5, 3))
        shared = rng.normal(0, 0.03, (5, 1))
        finalists = [0.3 + seed_effect + shared + rng.normal(0, 0.003, (5, 1)) + rng.normal(0, 0.02, (5, 3))
                     for _ in range(3)]
        changes = paired_changes(finalists, base, n_resamples=1000, seed=i)
        calls += any(c.improves("minimize") for c in changes)
    assert calls <= 18


def test_noise_is_measured_first_and_reused_by_validation(tmp_path):
    objective = SyntheticObjective(flat=True)
    opt = make_optimizer(tmp_path, objective, 0)
    noise = measure_noise(opt, 3)
    assert objective.calls == 3 and noise.spread > 0 and "smallest resolvable difference" in noise.describe()
    opt.optimize(n_trials=4)
    calls = objective.calls
    validate(opt, k=2, repeats=3, max_repeats=3)  # no race past the first look
    assert objective.calls == calls + 2 * 3  # the base's three runs are the noise runs
    stored = EvaluationStore(opt.study).all()
    assert len(stored) == 9 and all(e.cost == 100 for e in stored.values())
    # 4 search trials at full cost (nothing pruned) + 9 validation runs, against 4 trials x 3 repeats
    table = compute_table(opt, 3, full_cost=100)
    assert re.search(r"^total +13 +1300 ", table, re.M) and "(1200): -8% saved" in table
    assert "pruning (0 trials stopped early) saved 0" in table


class BudgetedObjective(SyntheticObjective):
    """A synthetic objective with a training budget: its stored runs belong to that budget."""

    def __init__(self, budget: int) -> None:
        super().__init__(flat=True)
        self.budget = budget

    def fidelity(self) -> dict:
        return {"updates": self.budget}


def test_stored_runs_of_another_fidelity_run_again_and_the_same_fidelity_reuses_them(tmp_path, capsys):
    objective = BudgetedObjective(8)
    opt = make_optimizer(tmp_path, objective, 0)
    first = measure_noise(opt, 3)
    assert objective.calls == 3
    measure_noise(make_optimizer(tmp_path, objective, 0), 3)  # resumed, same budget: nothing recomputed
    assert objective.calls == 3
    longer = BudgetedObjective(24)
    again = measure_noise(make_optimizer(tmp_path, longer, 0), 3)
    assert longer.calls == 3 and "3 stored evaluation(s) were made under other objective settings" in capsys.readouterr().err
    assert again.values == first.values  # this synthetic objective ignores its budget; the runs were still redone
    measure_noise(make_optimizer(tmp_path, longer, 0), 3)
    assert longer.calls == 3


ALT_SPACE = {
    "components.effort.weight": {"type": "float", "low": -1.0, "high": 0.0},
    "alternatives": {
        "components.progress": {
            "linear": {"keep": True, "params": {"weight": {"type": "float", "low": 0.0, "high": 2.0}},
                       "training": {"ppo.gamma": {"type": "float", "low": 0.9, "high": 0.999}}},
            "hinge": {"entry": {"type": "threshold_penalty", "inputs": {"latency": "progress"},
                                "params": {"threshold": 1.0, "slope": 1.0}, "weight": -1.0},
                      "params": {"params.threshold": {"type": "float", "low": 0.0, "high": 3.0},
                                 "weight": {"type": "float", "low": -2.0, "high": -0.1}}},
        },
    },
    "training": {"ppo.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
}


class StructureObjective:
    """Records what each trial ran with; refuses a gamma above 0.995 in its training check."""

    def __init__(self) -> None:
        self.seen: list[tuple[dict, dict, dict]] = []
        self.checked: list[dict] = []

    def check_training(self, settings: dict) -> None:
        self.checked.append(settings)
        if settings.get("ppo.gamma", 0) > 0.995:
            raise ConfigError(f"expected at most 0.995, got {settings['ppo.gamma']}", path="ppo.gamma")

    def __call__(self, config: dict, trial) -> float:
        self.seen.append((config, dict(trial.params), trial_training(trial)))
        entry = config["components"]["progress"]
        return abs(entry["weight"]) + entry.get("params", {}).get("threshold", 0.0)


def test_conditional_parameters_are_sampled_only_when_their_alternative_is_chosen(tmp_path):
    space = json.loads(json.dumps(ALT_SPACE))
    space["alternatives"]["components.progress"]["linear"]["training"]["ppo.gamma"]["high"] = 0.99
    objective = StructureObjective()
    opt = make_optimizer(tmp_path, objective, 0, space=space)
    assert {"ppo.gamma": 0.99} in objective.checked and {"ppo.learning_rate": 1e-4} in objective.checked
    opt.optimize(n_trials=16)
    kinds = set()
    for config, params, training in objective.seen:
        choice = params["components.progress"]
        kinds.add(choice)
        linear_keys = {"components.progress[linear].weight", "components.progress[linear].training.ppo.gamma"}
        hinge_keys = {"components.progress[hinge].params.threshold", "components.progress[hinge].weight"}
        mine, other = (linear_keys, hinge_keys) if choice == "linear" else (hinge_keys, linear_keys)
        assert mine <= set(params) and not other & set(params)
        assert set(training) == ({"ppo.learning_rate", "ppo.gamma"} if choice == "linear" else {"ppo.learning_rate"})
        entry = config["components"]["progress"]
        assert entry["type"] == ("linear" if choice == "linear" else "threshold_penalty")
        if choice == "hinge":
            assert entry["params"]["threshold"] == params["components.progress[hinge].params.threshold"]
    assert kinds == {"linear", "hinge"}


def test_structure_is_checked_before_any_trial(tmp_path):
    objective = StructureObjective()
    with pytest.raises(ConfigError, match=r"alternatives\.components\.progress\.linear\.training\.ppo\.gamma"):
        make_optimizer(tmp_path, objective, 0, space=ALT_SPACE)  # high 0.999 > 0.995
    bad = json.loads(json.dumps(ALT_SPACE))
    bad["alternatives"]["components.progress"]["linear"]["training"]["ppo.gamma"]["high"] = 0.99
    bad["alternatives"]["components.progress"]["hinge"]["entry"]["type"] = "no_such_component"
    with pytest.raises(ConfigError, match=r"alternatives\.components\.progress\.hinge"):
        make_optimizer(tmp_path, StructureObjective(), 1, space=bad)
    inside = json.loads(json.dumps(ALT_SPACE))
    inside["components.progress.weight"] = {"type": "float", "low": 0.0, "high": 1.0}
    with pytest.raises(ConfigError, match="inside the slot"):
        SearchSpace.from_dict(inside)
    with pytest.raises(ConfigError, match="check_training"):
        make_optimizer(tmp_path, SyntheticObjective(flat=True), 2, space={"training": ALT_SPACE["training"],
                                                                        **SPACE})
    assert objective.seen == []


# ---- the command: verdict, exit code, export, no matplotlib, SIGKILL during validation ----------------
OBJECTIVE_PY = """\
import json, os, time
from pathlib import Path
import numpy as np
from rewardkit.optimize import trial_seeds, trial_phase
from rewardkit.optimize.trial_context import trial_repeat, record_seed_values

def objective(config, trial):
    w = config["components"]["progress"]["weight"]
    phase, repeat = trial_phase(trial), trial_repeat(trial)
    with open("calls.log", "a") as f:
        f.write(json.dumps({"phase": phase, "repeat": repeat, "w": w}) + "\\n")
        f.flush(); os.fsync(f.fileno())
    hang = Path("hang_after")
    if phase == "validate" and hang.exists():
        done = sum(1 for line in open("calls.log") if '"validate"' in line)
        if done > int(hang.read_text()):
            Path("hanging").write_text(str(os.getpid()))
            time.sleep(300)
    seeds = trial_seeds(trial)
    rng = np.random.default_rng([int(w * 1e6), repeat, seeds[0]])
    values = [1.0 + (0.0 if os.environ.get("FLAT") else (w - 1.6) ** 2) + rng.normal(0, 0.05) for s in seeds]
    record_seed_values(trial, values)
    return float(np.mean(values))

objective.n_seeds = 2
"""


def command(storage: str, n_trials: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rewardkit", "optimize", "--study", "s", "--base", "base.yaml",
            "--search-space", "space.yaml", "--objective", "valmod:objective", "--storage", storage,
            "--n-trials", str(n_trials), "--seed", "0", "--validate", "2", "--repeats", "3", *extra]


def study_folder(tmp_path: Path, base_weight: float) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    base = yaml.safe_load(BASE_YAML)
    base["components"]["progress"]["weight"] = base_weight
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(SPACE))
    (tmp_path / "valmod.py").write_text(OBJECTIVE_PY)
    return tmp_path


def test_command_exports_the_base_without_reliable_improvement_and_works_without_matplotlib(tmp_path):
    folder = study_folder(tmp_path, base_weight=1.0)
    hide_matplotlib = ("import sys; sys.modules['matplotlib'] = None; from rewardkit.cli import main; "
                       "sys.exit(main(sys.argv[1:]))")
    argv = command("s.journal", 6, "--export-best", "out.yaml")
    result = subprocess.run([sys.executable, "-c", hide_matplotlib, *argv[3:]], cwd=folder,
                            env=child_env(FLAT="1"), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("verdict:") and NO_IMPROVEMENT in lines[-1]
    assert any(line.startswith("plots skipped: matplotlib is not installed") for line in lines)
    assert any(line.startswith("noise: the base over 3 repeats") for line in lines)
    assert any(line.startswith("seeds: search") and "validation 500000-500005" in line for line in lines)
    exported = yaml.safe_load((folder / "out.yaml").read_text())
    assert exported == yaml.safe_load((folder / "base.yaml").read_text())


def test_command_exports_a_validated_winner(tmp_path):
    folder = study_folder(tmp_path, base_weight=0.2)
    result = subprocess.run(command("s.journal", 10, "--export-best", "out.yaml"), cwd=folder, env=child_env(),
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("verdict: trial") and "improves on the base" in last
    assert yaml.safe_load((folder / "out.yaml").read_text())["components"]["progress"]["weight"] != 0.2
    assert "compute (" in result.stdout and "saved" in result.stdout


def test_sigkill_during_validation_then_resume_recomputes_nothing(tmp_path):
    folder = study_folder(tmp_path, base_weight=0.2)
    (folder / "hang_after").write_text("4")  # the noise (3 runs) is in; hang on the 5th validation run
    proc = subprocess.Popen(command("s.journal", 6), cwd=folder, env=child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (folder / "hanging").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "never reached validation"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    (folder / "hang_after").unlink()
    storage = "s.journal"
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        from rewardkit.optimize.storage import open_storage, parse_storage
        study = optuna.load_study(study_name="s", storage=open_storage(parse_storage(storage, "s")))
        stored_before = set(EvaluationStore(study).all())
    finally:
        os.chdir(cwd)
    assert len(stored_before) == 4  # 3 base runs, then 1 candidate run finished before the kill
    calls_before = len((folder / "calls.log").read_text().splitlines())
    result = subprocess.run(command(storage, 6), cwd=folder, env=child_env(), capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("verdict:")
    new_calls = [json.loads(line) for line in (folder / "calls.log").read_text().splitlines()[calls_before:]]
    # the search was complete; validation has 3 x 3 runs, 4 of which were stored: 5 run now, nothing twice
    assert [c["phase"] for c in new_calls] == ["validate"] * 5
    assert len(load_trials(folder, storage)) >= 6


def test_the_whole_reward_can_be_a_slot_with_its_own_promises(tmp_path):
    """Slot '.': each alternative a complete reward (terms, expect block); the shipped structure space checks."""
    from rewardkit.optimize.optimizer import load_base_config

    root = Path(__file__).resolve().parents[3]
    base, source = load_base_config(root / "configs" / "rewards" / "vidur_hybrid.yaml")
    space = SearchSpace.from_yaml(root / "configs" / "tune" / "vidur_hybrid_structure_space.yaml")
    space.check_against(base, base_source=source)
    space.check_structure(base, base_source=source)
    assert space.values_in(base)["reward"] == "hybrid"
    config = space.apply(base, {"reward": "per_request",
                                "reward[per_request].components.latency.components.e2e.weight": -0.1})
    assert "expect" not in config and config["components"]["latency"]["components"]["e2e"]["weight"] == -0.1
    assert space.apply(base, {"reward": "hybrid"}) == base
    with pytest.raises(ConfigError, match="inside the slot"):
        SearchSpace.from_dict({**space.to_dict(), "components.delta.weight": {"type": "float", "low": 0, "high": 1}})
    bad = space.to_dict()
    bad["alternatives"]["."]["little_ttft"]["entry"]["components"]["time_in_system"]["weight"] = "heavy"
    with pytest.raises(ConfigError, match=r"alternatives\.'\.'\.little_ttft"):
        SearchSpace.from_dict(bad).check_structure(base, base_source=source)
