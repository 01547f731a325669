"""Re-evaluate the best trials on fresh seeds (``rewardkit optimize --report``).

The best of many noisy trials is optimistic: its value was picked for being lucky on the tuning
seeds. The report runs the objective again for the best trials (the Pareto front with two
objectives) and for the base config, on seeds the study never used, and writes
``<study folder>/report/report.csv`` next to each candidate's ``reward.yaml``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from .evaluations import EvaluationStore, Job, config_key, run_missing
from .optimizer import BayesianRewardOptimizer, write_reward_yaml
from .results import format_table
from .trial_context import report_seeds

PHASE = "report"


def run_report(opt: BayesianRewardOptimizer, top_k: int = 3, workers: int = 1) -> tuple[str, Path]:
    """Evaluate the best ``top_k`` trials and the base config on fresh seeds; return (table, csv).

    The runs are evaluations like validation's (stored as they finish, in ``workers`` processes
    whose loss is retried; a failure is an :class:`.limits.EvaluationError`)."""
    out_dir = opt.study_dir / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = report_seeds(opt.settings.n_seeds)
    candidates: list[tuple[str, dict[str, Any], dict[str, Any], list[float] | None]] = [
        (f"trial {t.number}", dict(t.params), opt.config_of(t), list(t.values)) for t in opt.best_trials()[:top_k]]
    candidates.append(("base", {}, opt.base_config, None))
    n_obj = len(opt.settings.directions)
    jobs = []
    for label, params, config, _ in candidates:
        folder = out_dir / label.replace(" ", "_")
        folder.mkdir(parents=True, exist_ok=True)
        write_reward_yaml(folder / "reward.yaml", config, f"{label} of study {opt.study_name}, re-evaluated on seeds {seeds}")
        jobs.append(Job(PHASE, config_key(params), 0, seeds, config, params, opt.space.training_values(params), folder))
    done = run_missing(EvaluationStore(opt.study), opt.objective, jobs, n_obj, workers, desc="report",
                       show_progress=opt.show_progress, timeout=opt.trial_timeout)
    rows = []
    for (label, _params, _, study_values), job in zip(candidates, jobs, strict=True):
        evaluation = done[(job.key, 0)]
        fresh = [evaluation.value] if n_obj == 1 else list(evaluation.values or [evaluation.value])
        rows.append((label, study_values, fresh))
    names = ["value"] if n_obj == 1 else [f"value{i + 1}" for i in range(n_obj)]
    header = ["candidate", *(f"study {n}" for n in names), *(f"fresh {n}" for n in names)]
    text_rows = [[label, *(("-",) * n_obj if sv is None else (f"{v:.4g}" for v in sv)), *(f"{v:.4g}" for v in fv)]
                 for label, sv, fv in rows]
    csv_path = out_dir / "report.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header + ["seeds"])
        for label, sv, fv in rows:
            writer.writerow([label, *([""] * n_obj if sv is None else sv), *fv, " ".join(map(str, seeds))])
    title = f"re-evaluated on fresh seeds {seeds} (the study used other seeds):\n"
    return title + format_table(header, text_rows), csv_path
