"""The demo's remote scorer: an HTTP service on 127.0.0.1 that grades how close a reply's number is.

``POST /score`` with ``{"prompts": [...], "completions": [...]}`` answers ``{"scores": [...]}``:
``1 / (1 + |n - truth|)`` where ``n`` is the last number in the completion and ``truth`` the sum
asked in the prompt (0.0 without a number). It stands for the reward-model or verifier service a
real run would call: partial credit a sparse exact-match reward never gives. Run with
``python -m examples.grpo.scorer --port 0``: it prints ``PORT <n>`` once it listens.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .task import truth_from_prompt

_NUMBER = re.compile(r"-?\d+")


def closeness(prompt: str, completion: str) -> float:
    """1.0 for the right number, less the further it is; 0.0 without a number or a question."""
    truth = truth_from_prompt(prompt)
    numbers = _NUMBER.findall(completion)
    if truth is None or not numbers:
        return 0.0
    return 1.0 / (1.0 + abs(int(numbers[-1]) - truth))


class Handler(BaseHTTPRequestHandler):
    """Answers POST /score; anything else is a 404."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if self.path != "/score":
            self.send_error(404)
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            scores = [closeness(p, c) for p, c in zip(body["prompts"], body["completions"], strict=True)]
        except (ValueError, KeyError, TypeError) as exc:
            self.send_error(400, str(exc))
            return
        data = json.dumps({"scores": scores}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # quiet: the demo prints its own progress
        pass


def point_remote_terms(config: dict[str, Any], url: str) -> dict[str, Any]:
    """A copy of a reward config whose ``remote_score`` terms call ``url``."""
    config = copy.deepcopy(config)
    for term in config["components"].values():
        if term.get("type") == "remote_score":
            term["params"]["url"] = url
    return config


class ScorerProcess:
    """The scorer in a child process for the length of a ``with`` block; ``url`` is its endpoint."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> "ScorerProcess":
        self.process = subprocess.Popen([sys.executable, "-m", "examples.grpo.scorer", "--port", "0"],
                                        stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("PORT "):
            self.__exit__()
            raise RuntimeError(f"the demo's scorer did not start (it printed {line!r})")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/score"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def _exit_with_parent(parent: int) -> None:
    """End this process once the demo that started it is gone (killed before it could stop us)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
