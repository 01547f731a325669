"""``rewardkit gateway`` as a child process (for benchmarks and real-engine tests): start, wait, read counters, stop.

Uses only the command line the issue fixes (``--backend URL ... --router NAME [--checkpoint PATH]
--host H --port P``) plus any extra arguments, so it does not import the gateway's package.
Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Sequence

from .replicas import ROOT, free_port


class GatewayProcess:
    """A gateway over ``backends`` routing with ``router``; its output goes to ``log``."""

    def __init__(self, backends: Sequence[str], router: str, *, checkpoint: str | None = None,
                 extra: Sequence[str] = (), log: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = Path(sys.executable).with_name("rewardkit")
        cmd = [str(exe), "gateway", "--router", router, "--host", "127.0.0.1", "--port", str(self.port)]
        for backend in backends:
            cmd += ["--backend", backend]
        if checkpoint:
            cmd += ["--checkpoint", str(checkpoint)]
        self.cmd = cmd + list(extra)
        self.log = Path(log) if log else ROOT / "runs" / "engines" / f"gateway-{router}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> "GatewayProcess":
        """Start it and wait until ``GET /health`` answers 200 (RuntimeError with its log otherwise)."""
        with open(self.log, "w", encoding="utf-8") as fh:
            self.proc = subprocess.Popen(self.cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, cwd=str(ROOT))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with code {self.proc.returncode}: {' '.join(self.cmd)}\n"
                                   + self.log.read_text(errors="replace")[-2000:])
            if self.status("/health") == 200:
                return self
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"gateway not healthy after {timeout_s:.0f} s: {' '.join(self.cmd)}\n"
                           + self.log.read_text(errors="replace")[-2000:])

    def status(self, path: str) -> int | None:
        """HTTP status of ``GET path`` (None when nothing answers)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (urllib.error.URLError, OSError):
            return None

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as resp:
            return resp.read().decode("utf-8", "replace")

    def routed(self) -> dict[str, float]:
        """``rewardkit_gateway_routed_total`` per replica label."""
        out: dict[str, float] = {}
        for line in self.metrics_text().splitlines():
            if line.startswith("rewardkit_gateway_routed_total{") and 'replica="' in line:
                label = line.split('replica="', 1)[1].split('"', 1)[0]
                out[label] = out.get(label, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (the gateway drains in-flight requests), SIGKILL after ``grace_s``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass

    def __enter__(self) -> "GatewayProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
