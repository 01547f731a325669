"""The serving half imports and runs without Vidur (nor pandas): the live env routes an episode over
stub engines, the load generator replays a live env's workload, the gateway builds its router."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared/vidur/traces"

CODE = """
import sys, importlib.abc
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("vidur", "pandas"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
import yaml
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread, StubEngine
from schedulers.environments import make_env, policy_action
from schedulers.loadgen.sources import lengths_from_env
from schedulers.routing.policy import make_policy
from schedulers.serve.gateway import Gateway, GatewaySettings

servers = [ServerThread(StubEngine(n).app(), free_port()).start() for n in ("a", "b")]
path = sys.argv[1] + "/live.yaml"
yaml.safe_dump({"trace_file": sys.argv[2], "qps": 50.0, "requests_per_episode": 6, "max_tokens": 4096,
                "reward_config": sys.argv[3],
                "live": {"backends": [s.url for s in servers], "model": "stub-model", "length_scale": 0.01,
                         "max_model_len": 64, "timeout_s": 20}}, open(path, "w"))
env = make_env(path)
policy = make_policy("least_prefill", seed=1, simulated=False)
obs, _ = env.reset(seed=101)
credits = []
while True:
    obs, reward, terminated, truncated, info = env.step(policy_action(policy, env, obs))
    credits += info["credits"]
    if truncated:
        break
env.close()
assert len(credits) == 6, credits
assert len(lengths_from_env(path, 101)) == 6
Gateway(GatewaySettings([s.url for s in servers], router="adaptive"))
for s in servers:
    s.stop()
assert not any(m.split(".")[0] in ("vidur", "pandas") or m.startswith("schedulers.sim") for m in sys.modules), \\
    sorted(m for m in sys.modules if m.startswith(("vidur", "pandas", "schedulers.sim")))
print("served without vidur")
"""


def test_the_live_env_loadgen_and_gateway_run_without_vidur(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-c", CODE, str(tmp_path), str(TRACES / "splitwise_conv.csv"),
                          str(ROOT / "configs/rewards/request_ttft_live.yaml")],
                         capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert "served without vidur" in out.stdout, out.stdout + out.stderr
