"""optuna-dashboard, started on a study's journal file on localhost, serves the study back over HTTP."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from optimize_support import make_study_folder, run_optimize


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError):
            assert time.monotonic() < deadline, f"{url} did not answer"
            time.sleep(0.3)


def test_dashboard_serves_the_study(tmp_path):
    folder = make_study_folder(tmp_path)
    run_optimize(folder, "s.journal", 4)
    exe = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent))
    assert exe, "optuna-dashboard is not installed (pip install 'rewardkit[dashboard]')"
    port = free_port()
    server = subprocess.Popen([exe, "s.journal", "--host", "127.0.0.1", "--port", str(port), "--quiet"],
                              cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        studies = get_json(f"http://127.0.0.1:{port}/api/studies")["study_summaries"]
        assert [s["study_name"] for s in studies] == ["s"]
        detail = get_json(f"http://127.0.0.1:{port}/api/studies/{studies[0]['study_id']}")
        assert len(detail["trials"]) == 4
        assert {t["state"] for t in detail["trials"]} == {"Complete"}
        params = {p["name"] for p in detail["trials"][0]["params"]}
        assert params == {"components.progress.weight", "components.effort.weight"}
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/dashboard", timeout=10).read()
        assert b"<html" in page.lower()
    finally:
        server.terminate()
        server.wait(timeout=30)
