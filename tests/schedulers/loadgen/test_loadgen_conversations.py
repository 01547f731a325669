"""``rewardkit loadgen --shared-prefix G:T --sessions S`` against an engine with a 1,024-token model length
: every prompt fits (the oldest turns left out, as chat clients do) and the run says how many
prompts were shortened. Before, conversations grew past the model length and the engine refused them."""

from __future__ import annotations

import json

import pytest

from rewardkit.cli import main as rewardkit_main
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread, StubEngine


@pytest.mark.parametrize("scale", ["0.1", "0.03"])
def test_conversations_stay_within_the_engines_model_length(scale, tmp_path, capsys):
    engine = StubEngine("a", max_model_len=1024)
    server = ServerThread(engine.app(), free_port()).start()
    out = tmp_path / "run.json"
    try:
        code = rewardkit_main(["loadgen", "--url", server.url, "--env", "configs/envs/hetero.yaml", "--requests", "240",
                               "--qps", "400", "--length-scale", scale, "--shared-prefix", "4:64", "--sessions", "60",
                               "--no-progress", "--out", str(out)])
    finally:
        server.stop()
    result = json.loads(out.read_text())
    assert code == 0 and result["summary"]["failed"] == 0 and result["summary"]["completed"] == 240
    err = capsys.readouterr().err
    assert "max model length 1024 (from" in err
    shortened = result["workload"]["shortened_prompts"]
    assert f"{shortened} prompts shortened to fit the model length" in err
    if scale == "0.1":
        assert shortened > 0 and result["workload"]["dropped_turns"] >= shortened
