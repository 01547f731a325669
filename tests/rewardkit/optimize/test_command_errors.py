"""``rewardkit optimize`` under bad input and damaged storage: a located one-line error
and a non-zero exit, never a traceback; a torn journal loses at most the torn record."""

from __future__ import annotations

import json

import optuna
import pytest
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from optimize_support import make_study_folder

from rewardkit.cli import main as cli_main

BAD_MODULE = """\
import os, sys
mode = os.environ.get("BAD_MODE", "")
if mode == "import":
    raise ZeroDivisionError("boom at import")
if mode == "exit":
    sys.exit(3)

def objective(config, trial):
    if trial.number < 0:  # validation and --report run on a FixedTrial numbered -1
        raise RuntimeError("fails outside the search")
    return 1.0

def always_fails(config, trial):
    raise RuntimeError("never works")

def seeds(config, trial):
    return 1.0

def dirs(config, trial):
    return 1.0
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    make_study_folder(tmp_path)
    (tmp_path / "badmod.py").write_text(BAD_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    from rewardkit.optimize.optimizer import BayesianRewardOptimizer
    monkeypatch.setattr(BayesianRewardOptimizer, "show_progress", False)
    return tmp_path


def optimize(*extra: str, objective: str = "objmod:objective", study: str = "s", trials: int | None = 2) -> list[str]:
    args = ["optimize", "--study", study, "--base", "base.yaml", "--search-space", "space.yaml",
            "--objective", objective, "--validate", "0", *extra]
    return args + (["--n-trials", str(trials)] if trials is not None else [])


def located_error(capsys, code: int, *needles: str) -> str:
    """The command failed with one ``error: ...`` line naming what was wrong."""
    err = capsys.readouterr().err
    assert code != 0
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---- storage ---------------------------------------------------------------------------------
@pytest.mark.parametrize("storage, needle", [
    (".", "got the folder"),
    ("sub/", "got the folder"),
    ("foo://somewhere", "unknown database scheme 'foo'"),
    ("sqlite:relative.db", "expected a URL such as"),
    ("/proc/rewardkit.journal", "cannot create or read the journal file"),
    ("base.yaml/s.journal", "cannot create or read the journal file"),
    ("sqlite:////nonexistent-rewardkit-dir/s.db", "cannot open the database"),
    ("postgresql://user:secret@127.0.0.1:1/db", "cannot open the database postgresql://user:***@"),
])
def test_bad_storage_is_a_located_error(folder, capsys, storage, needle):
    (folder / "sub").mkdir()
    line = located_error(capsys, cli_main(optimize("--storage", storage)), "--storage", needle)
    assert "secret" not in line


def test_a_file_that_is_not_a_journal_is_refused_and_left_alone(folder, capsys):
    (folder / "notes.txt").write_text("my notes\n")
    located_error(capsys, cli_main(optimize("--storage", "notes.txt")), "notes.txt", "not an Optuna journal file")
    assert (folder / "notes.txt").read_text() == "my notes\n"


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".", "a\\b", " padded"])
def test_study_names_cannot_escape_their_folder(folder, capsys, name):
    located_error(capsys, cli_main(optimize(study=name)), "--study")
    assert not (folder.parent / "escape").exists() and not (folder.parent / "escape.journal").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["badmod.py", "base.yaml", "objmod.py", "space.yaml"]


def trials_of(folder, journal="s.journal"):
    storage = JournalStorage(JournalFileBackend(str(folder / journal)))
    return optuna.load_study(study_name="s", storage=storage)


def test_a_torn_last_record_is_removed_said_and_the_study_goes_on(folder, capsys):
    assert cli_main(optimize(trials=2)) == 0
    journal = folder / "s.journal"
    whole = journal.read_bytes()
    torn = b'{"op_code":6,"worker_id":"dead","trial_id":1,"par'
    journal.write_bytes(whole + torn)  # a write cut off by SIGKILL
    capsys.readouterr()
    assert cli_main(optimize(trials=4)) == 0
    err = capsys.readouterr().err
    assert "removed the last record, torn by a killed write" in err and "s.journal.torn" in err
    assert (folder / "s.journal.torn").read_bytes().startswith(torn)
    study = trials_of(folder)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 4
    assert cli_main(optimize(trials=None)) == 0  # every later command works
    assert "torn" not in capsys.readouterr().err


def test_a_torn_record_with_later_writes_appended_is_split_off(folder, capsys):
    """What older versions left: the torn bytes, then the next writer's record on the same line."""
    assert cli_main(optimize(trials=2)) == 0
    journal = folder / "s.journal"
    with journal.open("ab") as f:
        f.write(b'{"op_code":6,"worker_id":"dead","tri')
    raw = JournalStorage(JournalFileBackend(str(journal)))  # Optuna itself appends after the torn bytes
    study = optuna.load_study(study_name="s", storage=raw)
    study.set_user_attr("written after the tear", 1)
    with pytest.raises(ValueError):  # what every later command hit
        again = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(journal))))
        again.set_user_attr("and after that", 2)
    capsys.readouterr()
    assert cli_main(optimize(trials=3)) == 0
    assert "removed a torn record" in capsys.readouterr().err
    study = trials_of(folder)
    assert study.user_attrs["written after the tear"] == 1
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3


def test_a_damaged_line_that_cannot_be_repaired_is_a_located_error(folder, capsys):
    assert cli_main(optimize(trials=1)) == 0
    journal = folder / "s.journal"
    lines = journal.read_bytes().split(b"\n")
    lines.insert(1, b'{"op_code": garbage')
    journal.write_bytes(b"\n".join(lines))
    located_error(capsys, cli_main(optimize(trials=2)), "line 2 of the journal file", "cannot be repaired")


# ---- other flags and the objective -----------------------------------------------------------
def test_export_best_naming_a_folder(folder, capsys):
    (folder / "out").mkdir()
    located_error(capsys, cli_main(optimize("--export-best", "out")), "--export-best", "the folder out")


@pytest.mark.parametrize("mode, needle", [("import", "ZeroDivisionError: boom at import"),
                                          ("exit", "SystemExit: 3")])
def test_an_objective_module_that_fails_on_import(folder, capsys, monkeypatch, mode, needle):
    monkeypatch.setenv("BAD_MODE", mode)
    line = located_error(capsys, cli_main(optimize(objective="badmod:objective")), "--objective", needle)
    assert "badmod.py:" in line


def test_an_objective_that_raises_during_report(folder, capsys):
    located_error(capsys, cli_main(optimize("--report", objective="badmod:objective")), "--report",
                  "RuntimeError: fails outside the search")


def test_an_objective_that_raises_during_validation(folder, capsys):
    args = optimize(objective="badmod:objective")
    args[args.index("--validate") + 1] = "2"
    located_error(capsys, cli_main(args), "validate run of the base, repeat 0", "RuntimeError")


def test_every_trial_failed_exits_nonzero(folder, capsys):
    assert cli_main(optimize(objective="badmod:always_fails")) == 1
    assert "verdict: no complete trial" in capsys.readouterr().out


def test_negative_seed_is_a_usage_error(folder, capsys):
    assert cli_main(optimize("--seed", "-1")) == 2
    assert "--seed: expected an integer from 0 to 4294967295" in capsys.readouterr().err


@pytest.mark.parametrize("attr, value, needle", [
    ("n_seeds", 0, "n_seeds: expected an integer from 1 to 100000"),
    ("n_seeds", "3", "n_seeds: expected an integer"),
    ("n_seeds", 10**8, "n_seeds: expected an integer"),
    ("n_seeds", True, "n_seeds: expected an integer"),
    ("directions", "minimize", "directions: expected a non-empty list"),
    ("directions", ("up",), "directions: expected a non-empty list"),
    ("directions", (), "directions: expected a non-empty list"),
])
def test_bad_objective_attributes(folder, capsys, monkeypatch, attr, value, needle):
    import badmod
    target = badmod.seeds if attr == "n_seeds" else badmod.dirs
    monkeypatch.setattr(target, attr, value, raising=False)
    name = "badmod:seeds" if attr == "n_seeds" else "badmod:dirs"
    located_error(capsys, cli_main(optimize(objective=name)), f"{name}.{needle}")


def test_storage_repair_keeps_records_json(folder):
    assert cli_main(optimize(trials=1)) == 0
    for line in (folder / "s.journal").read_text().splitlines():
        assert isinstance(json.loads(line), dict)


@pytest.mark.parametrize("flag, value", [("--workers", "0"), ("--workers", "-3"), ("--n-trials", "-1"),
                                         ("--trial-timeout", "0"), ("--trial-timeout", "nan"), ("--seed", "x")])
def test_bad_numbers_are_usage_errors_even_when_no_trial_runs(folder, capsys, flag, value):
    assert cli_main(optimize(flag, value, trials=None)) == 2
    assert f"argument {flag}: expected" in capsys.readouterr().err


def test_a_pipe_as_journal_is_refused_without_blocking(folder, capsys):
    import os
    os.mkfifo(folder / "pipe")
    located_error(capsys, cli_main(optimize("--storage", "pipe")), "--storage", "expected a regular file")
