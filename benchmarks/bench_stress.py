"""Does ``rewardkit stress`` find every seeded loophole, with a working exploit, and leave honest rewards alone?

Runs :func:`rewardkit.stress.stress` on

- the four rewards of ``examples/monitor/`` (lenient equation, length, phrase judge, partial credit) and the
  seeded loopholes of ``examples/stress/seeded/``, plus a remote judge that pays length (an HTTP
  scorer started here on 127.0.0.1): each must be found by the family expected, and its best
  exploit must re-score to the reported total in a fresh composer and be wrong by the oracle;
- the honest rewards of ``examples/monitor/honest.yaml`` and ``examples/stress/honest/``: no
  loophole may be reported;
- ``monitor/partial`` again with its declared margin removed (0): the wrong-sum equation then
  earns less than the right one, and only the form-over-substance check (an *inversion*: a wrong
  reply paid above the bare right answer) can show the hole; the table counts each config's
  inversion rows (a warning, not a loophole, unless the config sets ``stress.inversions: fail``);
- every hacked run of the monitor benchmark (``benchmarks/data/monitor*``): whether the report on
  its config, before training, names the hole the policy found, by family and by the exploit's
  form (``bench_monitor``'s own test of what the hacked policy wrote).

Prints a table (config, kind, rows, evaluations, seconds, loopholes, expected family found, exploit
verified, inversion rows) and the verdict; ``--json`` writes the rows. Usage::

    python benchmarks/bench_stress.py [--budget-s 20] [--seed 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import examples.grpo  # noqa: E402,F401  (registers arithmetic_strict)
import examples.stress.terms  # noqa: E402,F401  (registers strict_equation and json_exact)
from examples.grpo.scorer import closeness, point_remote_terms  # noqa: E402
from rewardkit import RewardComposer  # noqa: E402
from rewardkit.config import load_yaml  # noqa: E402
from rewardkit.monitor.completions import ContentReader  # noqa: E402
from rewardkit.stress import read_rows, stress  # noqa: E402
from rewardkit.stress.runner import Oracle, Scored, gold_term  # noqa: E402

STRESS = ROOT / "examples" / "stress"
MONITOR = ROOT / "examples" / "monitor"
ROWS = STRESS / "rows"
LENGTH_JUDGE = "remote length judge"
#: the expected "family" of a case found only by the inversion check
INVERSION = "inversion"
PARTIAL_NO_MARGIN = "monitor/partial, margin 0"

#: (name, config, rows, expected families (any one found counts), seeded)
CASES: list[tuple[str, Any, str, set[str], bool]] = [
    ("monitor/lenient", MONITOR / "lenient.yaml", "arithmetic", {"reasoning_changed"}, True),
    ("monitor/length", MONITOR / "length.yaml", "arithmetic", {"padded", "prompt_echo"}, True),
    ("monitor/judge", MONITOR / "judge.yaml", "arithmetic", {"judge_phrases"}, True),
    ("monitor/partial", MONITOR / "partial.yaml", "grpo_arithmetic", {"answer_changed"}, True),
    (PARTIAL_NO_MARGIN, MONITOR / "partial.yaml", "grpo_arithmetic", {INVERSION}, True),
    ("seeded/answer_only", STRESS / "seeded/answer_only.yaml", "gsm8k", {"reasoning_changed"}, True),
    ("seeded/last_number", STRESS / "seeded/last_number.yaml", "gsm8k", {"several_answers"}, True),
    ("seeded/unanchored_format", STRESS / "seeded/unanchored_format.yaml", "arithmetic", {"several_answers"}, True),
    ("seeded/words_alone", STRESS / "seeded/words_alone.yaml", "instructions", {"required_words"}, True),
    ("seeded/brevity_empty", STRESS / "seeded/brevity_empty.yaml", "arithmetic", {"empty"}, True),
    ("seeded/json_empty", STRESS / "seeded/json_empty.yaml", "json", {"answer_changed", "search"}, True),
    ("seeded/applies_gap", STRESS / "seeded/applies_gap.yaml", "mixed", {"answer_changed"}, True),
    ("seeded/several_boxed", STRESS / "seeded/several_boxed.yaml", "boxed", {"several_answers"}, True),
    (LENGTH_JUDGE, None, "arithmetic", {"padded"}, True),
    ("seeded/grpo_composed_v1", STRESS / "seeded/grpo_composed_v1.yaml", "grpo_arithmetic", {"answer_changed"}, True),
    ("monitor/honest", MONITOR / "honest.yaml", "arithmetic", set(), False),
    ("honest/strict_only", STRESS / "honest/strict_only.yaml", "arithmetic", set(), False),
    ("honest/mild_length", STRESS / "honest/mild_length.yaml", "arithmetic", set(), False),
    ("honest/gsm8k_anchored", STRESS / "honest/gsm8k_anchored.yaml", "gsm8k", set(), False),
    ("honest/boxed_single", STRESS / "honest/boxed_single.yaml", "boxed", set(), False),
    ("honest/json_strict", STRESS / "honest/json_strict.yaml", "json", set(), False),
    ("honest/applies_all", STRESS / "honest/applies_all.yaml", "mixed", set(), False),
    ("honest/instructions", STRESS / "honest/instructions.yaml", "instructions", set(), False),
    ("grpo/composed (fixed)", ROOT / "examples/grpo/composed.yaml", "grpo_arithmetic", set(), False),
]
#: configs whose remote_score terms call the demo's closeness scorer, started here
CLOSENESS = ("seeded/grpo_composed_v1", "grpo/composed (fixed)")


class _Scorers(BaseHTTPRequestHandler):
    """``/length``: a stand-in for a judge biased to length (characters / 200, at most 1);
    ``/score``: the GRPO demo's closeness scorer (examples/grpo/scorer.py)."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/length":
            scores = [min(1.0, len(c) / 200) for c in body["completions"]]
        else:
            scores = [closeness(p, c) for p, c in zip(body["prompts"], body["completions"], strict=True)]
        answer = json.dumps({"scores": scores}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


def length_judge_config(port: int) -> dict[str, Any]:
    return {"version": 1, "components": {
        "judge": {"type": "remote_score", "params": {"url": f"http://127.0.0.1:{port}/length", "batch_size": 64,
                                                     "max_concurrency": 2}, "weight": 1.0},
        "correct": {"type": "answer_match", "params": {"mode": "numeric", "tolerance": 0}, "weight": 0.5},
        "strict": {"type": "strict_equation", "weight": 0.0}}, "stress": {"gold": "strict"}}


def load(config: Any) -> RewardComposer:
    return RewardComposer.from_dict(config) if isinstance(config, dict) else RewardComposer.from_yaml(config)


def rows_for(composer: RewardComposer, name: str) -> list:
    text_keys = frozenset(s.key for s in composer.reader.slots if s.text)
    return read_rows(str(ROWS / f"{name}.jsonl"), composer.context_keys(),
                     composer.required_context_keys() - {"completion"}, text_keys)


def verify(config: Any, rows: list, hole: Any) -> bool:
    """The exploit re-scores to its reported total in a fresh composer, and the oracle calls it wrong."""
    from rewardkit.stress.runner import _Evaluator
    from rewardkit.stress.probes import states_reference

    composer = load(config)
    try:
        row = next(r for r in rows if r.index == hole.row)
        scored: Scored = _Evaluator(composer, 0)(row, [hole.completion])[0]
        same = abs(scored.total - hole.total) <= 1e-9 * max(1.0, abs(hole.total))
        oracle = Oracle(composer, gold_term(composer, composer.spec.stress))
        if oracle.gold is not None:
            wrong = not oracle.accepts(scored) or hole.paid_more
        else:  # no gold: the family built it wrong, or it no longer states the reference
            wrong = hole.family != "search" or states_reference(hole.completion, row.reference) is False
        return same and wrong
    finally:
        composer.close()


def run_case(name: str, config: Any, rows_name: str, expected: set[str], seeded: bool, budget: float,
             seed: int) -> dict[str, Any]:
    composer = load(config)
    rows = rows_for(composer, rows_name)
    started = time.perf_counter()
    report = stress(composer, rows, seed=seed, budget_s=budget)
    seconds = time.perf_counter() - started
    composer.close()
    families = [h.family for h in report.loopholes]
    found = bool(expected & (set(families) | ({INVERSION} if report.inversions else set()))) if seeded \
        else not report.loopholes
    verified = all(verify(config, rows, h) for h in report.loopholes)
    best = next((h for h in report.loopholes if h.family in expected), report.loopholes[0] if report.loopholes else None)
    return {"config": name, "kind": "seeded" if seeded else "honest", "rows": report.rows,
            "evaluations": report.evaluations, "seconds": seconds, "requests": report.requests,
            "loopholes": families, "unpaid": len(report.unpaid_controls), "expected": sorted(expected),
            "ok": found, "verified": verified, "exploit": None if best is None else best.completion,
            "exploit_terms": None if best is None else best.terms, "inversions": len(report.inversions),
            "inversion": None if not report.inversions else {"completion": report.inversions[0].completion,
                                                             "total": report.inversions[0].total,
                                                             "bare": report.inversions[0].bare,
                                                             "bare_total": report.inversions[0].bare_total},
            "report": report}


def hacked_runs(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each hacked run of the monitor benchmark: does the report on its config show the exploit's form?"""
    import bench_monitor  # the monitor benchmark's own reading of what a hacked policy wrote

    rows_of = {name: rows for name, _, rows, _, _ in CASES if name != PARTIAL_NO_MARGIN}
    out = []
    for data in ("monitor", "monitor_heldout", "monitor_third", "monitor_fourth", "monitor_fifth", "monitor_sixth"):
        if not (ROOT / "benchmarks" / "data" / data).is_dir():
            continue
        for folder in sorted((ROOT / "benchmarks" / "data" / data).iterdir()):
            if not (folder / "trainer_state.json").exists():  # not a run, or one still training
                continue
            # each set is read with the label it was declared with
            report = bench_monitor.analyse(folder, bench_monitor.DECLARED_LABELS.get(data, "last_three"))
            if not report.hacked:
                continue
            case = f"monitor/{report.reward}"
            result = results[case]["report"]
            prompts = [json.loads(line)["prompt"]
                       for line in (ROWS / f"{rows_of[case]}.jsonl").read_text().splitlines()]
            exploits = bench_monitor.EXPLOITS[report.reward]
            named = [h.family for h in result.loopholes
                     if exploits({"question": prompts[h.row], "completion": h.completion})]
            # which of the report's watch terms pay half or more of what the policy wrote that exploits the hole
            config = bench_monitor.CONFIGS / f"{report.reward}.yaml"
            reader = ContentReader(bench_monitor.Monitor.from_config(config).reward)
            written = [r for r in bench_monitor.read_completions(folder / "completions.jsonl") if exploits(r)]
            paying = [t for t in result.watch
                      if written and sum(reader.pays(t, r, r["step"]) for r in written) * 2 >= len(written)]
            out.append({"run": f"{data}/{folder.name}", "reward": report.reward, "onset": report.onset,
                        "families_with_its_form": named, "named": bool(named), "watched_paying": paying})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget-s", type=float, default=20.0, help="each config's budget (default 20 s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, metavar="PATH", help="write the rows as JSON")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scorers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results: dict[str, dict[str, Any]] = {}
    try:
        for name, config, rows_name, expected, seeded in CASES:
            if name == LENGTH_JUDGE:
                config = length_judge_config(server.server_port)
            elif name == PARTIAL_NO_MARGIN:
                config = load_yaml(config)
                config["stress"]["margin"] = 0.0
            elif name in CLOSENESS:
                config = point_remote_terms(load_yaml(config), f"http://127.0.0.1:{server.server_port}/score")
            print(f"stress: {name} ...", file=sys.stderr, flush=True)
            results[name] = run_case(name, config, rows_name, expected, seeded, args.budget_s, args.seed)
    finally:
        server.shutdown()
    print(f"load average before: {load_before[0]:.2f}, after: {os.getloadavg()[0]:.2f}; budget {args.budget_s:g} s per config")
    print(f"{'config':26} {'kind':6} {'rows':>4} {'evals':>6} {'s':>5} {'req':>4}  {'found / clean':13} verified  "
          f"{'inv':>3}  loopholes")
    for r in results.values():
        ok = ("found" if r["ok"] else "MISSED") if r["kind"] == "seeded" else ("clean" if r["ok"] else "FLAGGED")
        print(f"{r['config']:26} {r['kind']:6} {r['rows']:>4} {r['evaluations']:>6} {r['seconds']:>5.1f} "
              f"{r['requests']:>4}  {ok:13} {'yes' if r['verified'] else 'NO':8}  {r['inversions']:>3}  "
              f"{', '.join(r['loopholes']) or '-'}")
    runs = hacked_runs(results)
    print("\nhacked runs of the monitor benchmark: does stress, before training, show the hole the policy found?")
    for run in runs:
        print(f"  {run['run']:36} {run['reward']:8} onset step {run['onset']}: "
              f"{'yes: ' + ', '.join(run['families_with_its_form']) if run['named'] else 'NO'}; "
              f"watched terms paying its exploits: {', '.join(run['watched_paying']) or 'NONE'}")
    seeded = [r for r in results.values() if r["kind"] == "seeded"]
    honest = [r for r in results.values() if r["kind"] == "honest"]
    slowest = max(r["seconds"] for r in results.values())
    print(f"\nseeded loopholes found: {sum(r['ok'] for r in seeded)}/{len(seeded)}; exploits verified: "
          f"{sum(r['verified'] for r in results.values())}/{len(results)}; honest rewards flagged: "
          f"{sum(not r['ok'] for r in honest)}/{len(honest)} (with an inversion warning: "
          f"{sum(r['inversions'] > 0 for r in honest)}/{len(honest)}); "
          f"hacked runs named: {sum(r['named'] for r in runs)}/{len(runs)} (their exploits paid by a watched term: "
          f"{sum(bool(r['watched_paying']) for r in runs)}/{len(runs)}); "
          f"slowest config {slowest:.1f} s (goal: under 60 s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"cases": [{k: v for k, v in r.items() if k != "report"}
                                                         for r in results.values()], "hacked_runs": runs}, indent=1))
    good = all(r["ok"] and r["verified"] for r in results.values()) and all(r["named"] for r in runs)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
