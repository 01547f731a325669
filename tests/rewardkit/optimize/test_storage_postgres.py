"""Several machines share a study through PostgreSQL: a real server, started here, shared by workers.

The server runs from PostgreSQL's own binaries (initdb, pg_ctl) in a temporary folder, listening
on 127.0.0.1 at a free port. Missing binaries fail the test (install them with
.ci/install-postgres.sh); it is never skipped.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import optuna
import pytest
from optuna.trial import TrialState

from optimize_support import calls, child_env, kill_while_hanging, make_study_folder, optimize_command
from rewardkit.optimize.storage import open_storage, parse_storage
from test_recovery import check_shared_study


def postgres_bin() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    which = shutil.which("initdb")
    if which:
        candidates.append(str(Path(os.path.realpath(which)).parent))
    for folder in candidates:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) not found: run .ci/install-postgres.sh "
                "(apt-get install -y postgresql)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    bin_dir = postgres_bin()
    # initdb refuses to run as root: run the server as the postgres (or nobody) user then
    user = None
    if os.geteuid() == 0:
        for name in ("postgres", "nobody"):
            try:
                user = pwd.getpwnam(name)
                break
            except KeyError:
                continue
        assert user is not None, "running as root and no 'postgres' or 'nobody' user to run the server as"
    root = Path(tempfile.mkdtemp(prefix="rewardkit-pg-"))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)

    def as_user() -> None:
        if user is not None:
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

    env = dict(os.environ, HOME=str(root), LC_ALL="C")
    port = free_port()
    data = root / "data"
    run = dict(env=env, preexec_fn=as_user, capture_output=True, text=True, timeout=120, cwd=root)
    result = subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                             "-E", "UTF8"], **run)
    assert result.returncode == 0, result.stdout + result.stderr
    result = subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w",
                             "-o", f"-h 127.0.0.1 -p {port} -k {root}", "start"], **run)
    assert result.returncode == 0, result.stdout + result.stderr + (root / "server.log").read_text()
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], **run)
        shutil.rmtree(root, ignore_errors=True)


def test_worker_processes_share_a_postgres_study(tmp_path, postgres_url):
    folder = make_study_folder(tmp_path)
    procs = [subprocess.Popen(optimize_command(postgres_url, 9), cwd=folder, env=child_env(TRIAL_SLEEP="0.3"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    check_shared_study(folder, postgres_url, 9, min_workers=2)


def test_killed_worker_on_postgres_is_retried(tmp_path, postgres_url):
    url = postgres_url
    folder = make_study_folder(tmp_path)
    (folder / "hang_on_trial").write_text("1")
    cmd = optimize_command(url, 4)
    cmd[cmd.index("--study") + 1] = "killed"
    kill_while_hanging(folder, cmd)
    (folder / "hang_on_trial").unlink()
    result = subprocess.run(cmd, cwd=folder, env=child_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    trials = optuna.load_study(study_name="killed", storage=open_storage(parse_storage(url, "killed"))).trials
    # the killed trial does not count toward the 4: its retry does
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL] + [TrialState.COMPLETE] * 3
    assert trials[2].system_attrs["failed_trial"] == 1 and trials[2].params == trials[1].params
    assert [c["trial"] for c in calls(folder)] == [0, 1, 2, 3, 4]
