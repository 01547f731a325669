"""rewardkit.integrations.verl through veRL's own reward managers, on a DataProto built on CPU.

veRL 0.9 is installed --no-deps with what its reward-manager modules import (see the Makefile);
its trainer, rollout workers and Ray actors need GPUs and are not exercised here.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.errors import InvalidInputError
from rewardkit.integrations.text_scoring import TextScorer
from rewardkit.integrations.verl import make_async_compute_score, make_batch_compute_score, make_compute_score

INSTALL = "pip install 'rewardkit[verl]' && pip install --no-deps verl==0.9.1 tensordict==0.10.0 pyvers==0.1.0"

CONFIG = {"version": 1, "components": {
    "correct": {"type": "answer_match", "params": {"mode": "numeric"}, "weight": 2.0},
    "length": {"type": "length_penalty", "params": {"unit": "words", "max": 4},
               "weight": {"schedule": "piecewise", "points": [[0, 0.0], [9, 0.0], [10, 1.0]]}},
}}

PROMPTS = ["What is 8 * 9?", "What is 2 + 2?", "What is 10 - 3?", "What is 6 / 2?"]
RESPONSES = ["The answer is 72.", "5", "It is seven, so the answer is 7 for sure", "3"]
TRUTHS = ["72", "4", "7", 3]


def test_per_sample_function_returns_the_total_or_a_dict_of_terms() -> None:
    total = make_compute_score(CONFIG)
    parts = make_compute_score(CONFIG, return_dict=True)
    assert total("gsm8k", "The answer is 72.", "72") == 2.0
    # the length weight is 0 before step 10, then 1: the step comes from extra_info
    out = parts("gsm8k", "so the answer is 7 for sure", "7", {"global_step": 12})
    assert out == {"score": 2.0 - 3.0, "correct": 2.0, "length": -3.0}
    assert parts("gsm8k", "so the answer is 7 for sure", "7", {"global_step": 3})["length"] == 0.0
    assert total("gsm8k", "The answer is 72.", 72) == 2.0  # a numeric ground truth is compared as text


def test_without_a_step_the_composer_counts_completions_or_the_given_batch_size() -> None:
    fn = make_compute_score(CONFIG, return_dict=True)
    lengths = [fn("d", "one two three four five six", "1", {})["length"] for _ in range(12)]
    assert lengths[:10] == [0.0] * 10 and lengths[10:] == [-2.0, -2.0]  # composer step = completions scored
    per_step = make_compute_score(CONFIG, return_dict=True, completions_per_step=4)
    lengths = [per_step("d", "one two three four five six", "1", None)["length"] for _ in range(44)]
    assert lengths[39] == 0.0 and lengths[40] == -2.0  # step = completions // 4 reaches 10 at the 41st


def test_bad_inputs_are_clear_errors() -> None:
    fn = make_compute_score(CONFIG)
    with pytest.raises(InvalidInputError, match=r"extra_info\['global_step'\] of sample 0: expected a non-negative"):
        fn("d", "7", "7", {"global_step": -1})
    with pytest.raises(InvalidInputError, match="completion 0: expected a string"):
        fn("d", None, "7")
    with pytest.raises(ValueError, match="named 'score'"):
        make_compute_score({"version": 1, "components": {"score": {"type": "answer_match"}}}, return_dict=True)
    needs_column = {"version": 1, "components": {"x": {"type": "linear", "inputs": {"value": "difficulty"}}}}
    with pytest.raises(InvalidInputError, match="reads 'difficulty'.*available: completion, reference, data_source"):
        make_compute_score(needs_column)("d", "7", "7", {})
    assert make_compute_score(needs_column)("d", "7", "7", {"difficulty": 0.5}) == 0.5
    with pytest.raises(ValueError, match="completions_per_step"):
        make_compute_score(CONFIG, completions_per_step=0)


def test_a_failed_call_counts_no_completions() -> None:
    fn = make_compute_score(CONFIG, return_dict=True, completions_per_step=1)
    for _ in range(9):  # steps 0 to 8
        fn("d", "one two three four five six", "1")
    with pytest.raises(InvalidInputError):
        fn("d", None, "1")
    assert fn("d", "one two three four five six", "1")["length"] == 0.0  # step 9 (weight 0), not 10


def test_a_column_only_some_samples_have_is_an_error() -> None:
    pytest.importorskip("httpx", reason="pip install 'rewardkit[remote]'")
    remote = {"version": 1, "components": {"rm": {"type": "remote_score", "params": {"url": "http://127.0.0.1:9/score"}}}}
    scorer = TextScorer(RewardComposer.from_dict(remote))  # its `prompt` is optional: absent everywhere is fine
    assert scorer.context(["a", "b"], rows=[{}, {}]) == {"completion": ["a", "b"]}
    with pytest.raises(InvalidInputError, match="reads 'prompt', which sample 1 lacks"):
        scorer.context(["a", "b"], rows=[{"prompt": "p"}, {}])
    needs = {"version": 1, "components": {"c": {"type": "answer_match"}, "n": {
        "type": "linear", "inputs": {"value": "difficulty"}}}}
    fn = make_batch_compute_score(needs)
    with pytest.raises(InvalidInputError, match="reads 'difficulty', which sample 1 lacks"):
        fn(["d", "d"], ["1", "2"], ["1", "2"], [{"difficulty": 1.0}, {}])
    assert fn(["d", "d"], ["1", "2"], ["1", "3"], [{"difficulty": 1.0}, {"difficulty": 0.5}]) == [2.0, 0.5]


def test_batched_form_calls_the_composer_once_per_batch() -> None:
    fn = make_batch_compute_score(CONFIG, return_dict=True)
    out = fn(data_sources=["d"] * 4, solution_strs=RESPONSES, ground_truths=TRUTHS,
             extra_infos=[{"global_step": 20}] * 4)
    assert [o["score"] for o in out] == [2.0, 0.0, 2.0 - 6.0, 2.0]
    assert fn.composer.step == 24  # one batched call at step 20 advanced the counter by 4
    with pytest.raises(InvalidInputError, match="different training steps"):
        fn(["d", "d"], ["1", "2"], ["1", "2"], [{"global_step": 1}, {"global_step": 2}])


def test_async_form_merges_concurrent_samples_into_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    evaluate = TextScorer.evaluate  # every composer evaluation goes through it

    def counting(self, ctx, n, step=None):
        calls.append(n)
        return evaluate(self, ctx, n, step)

    monkeypatch.setattr(TextScorer, "evaluate", counting)
    fn = make_async_compute_score(CONFIG, return_dict=True)

    async def chunk() -> list:
        return await asyncio.gather(*(fn("d", r, t, {"global_step": 20}) for r, t in zip(RESPONSES, TRUTHS, strict=True)))

    out = asyncio.run(chunk())
    assert calls == [4]  # the four samples waited together: one composer call
    assert [o["score"] for o in out] == [2.0, 0.0, 2.0 - 6.0, 2.0]
    assert out[2] == {"score": -4.0, "correct": 2.0, "length": -6.0}
    # samples at different steps are not merged (a call is evaluated at one step)
    calls.clear()

    async def two_steps() -> list:
        return await asyncio.gather(fn("d", "1", "1", {"global_step": 1}), fn("d", "2", "2", {"global_step": 2}))

    asyncio.run(two_steps())
    assert calls == [1, 1]
    with pytest.raises(InvalidInputError, match="completion 0: expected a string"):
        asyncio.run(fn("d", 5, "5"))


# ---- through veRL's own code -----------------------------------------------------------------
def rollout_batch(tokenizer, step: int | None = None):
    """A DataProto as veRL's trainer hands it to a reward manager: left-padded prompts, right-padded
    responses, the attention mask over both, and the dataset's non-tensor columns."""
    torch = pytest.importorskip("torch")
    verl = pytest.importorskip("verl", reason=INSTALL)

    def pad(texts: list[str], left: bool) -> tuple:
        ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        width = max(map(len, ids)) + 2
        rows, masks = [], []
        for seq in ids:
            fill = [0] * (width - len(seq))
            rows.append(fill + seq if left else seq + fill)
            masks.append([0] * len(fill) + [1] * len(seq) if left else [1] * len(seq) + [0] * len(fill))
        return torch.tensor(rows), torch.tensor(masks)

    prompts, prompt_mask = pad(PROMPTS, left=True)
    responses, response_mask = pad(RESPONSES, left=False)
    extra = [{"index": i, "question": q, **({"global_step": step} if step is not None else {})}
             for i, q in enumerate(PROMPTS)]
    return verl.DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses,
                 "input_ids": torch.cat([prompts, responses], dim=1),
                 "attention_mask": torch.cat([prompt_mask, response_mask], dim=1)},
        non_tensors={"data_source": np.array(["gsm8k"] * 4, dtype=object),
                     "reward_model": np.array([{"ground_truth": g, "style": "rule"} for g in TRUTHS], dtype=object),
                     "extra_info": np.array(extra, dtype=object)})


def expected_totals(step: int) -> list[float]:
    composer = RewardComposer.from_dict(CONFIG)
    out = composer({"completion": RESPONSES, "reference": [str(t) for t in TRUTHS]}, step=step,
                   terminated=np.ones(4, dtype=bool))
    return np.asarray(out.total).tolist()


def last_token_rewards(reward_tensor, batch) -> list[float]:
    prompt_len = batch.batch["prompts"].shape[-1]
    lengths = batch.batch["attention_mask"][:, prompt_len:].sum(-1)
    assert float(reward_tensor.sum()) == pytest.approx(sum(reward_tensor[i, n - 1].item() for i, n in enumerate(lengths)))
    return [reward_tensor[i, n - 1].item() for i, n in enumerate(lengths)]


def reward_file(tmp_path: Path, factory: str, return_dict: bool) -> Path:
    """A user's reward file as veRL loads it (custom_reward_function.path / name)."""
    path = tmp_path / "my_reward.py"
    path.write_text(textwrap.dedent(f"""
        from rewardkit.integrations.verl import {factory}
        CONFIG = {CONFIG!r}
        compute_score = {factory}(CONFIG, return_dict={return_dict})
    """))
    return path


def custom_reward_fn(tmp_path: Path, factory: str, return_dict: bool):
    """The function as veRL's trainer builds it: ``get_custom_reward_fn`` on an OmegaConf config."""
    omegaconf = pytest.importorskip("omegaconf", reason=INSTALL)
    reward = pytest.importorskip("verl.trainer.ppo.reward", reason=INSTALL)
    config = omegaconf.OmegaConf.create({"reward": {"custom_reward_function": {
        "path": str(reward_file(tmp_path, factory, return_dict)), "name": "compute_score", "reward_kwargs": {}}}})
    return reward.get_custom_reward_fn(config)


def test_verl_naive_reward_manager(tmp_path: Path, char_tokenizer) -> None:
    managers = pytest.importorskip("verl.workers.reward_manager", reason=INSTALL)
    tokenizer = char_tokenizer
    fn = custom_reward_fn(tmp_path, "make_compute_score", True)
    manager = managers.get_reward_manager_cls("naive")(tokenizer=tokenizer, num_examine=0, compute_score=fn)
    batch = rollout_batch(tokenizer, step=15)
    out = manager(batch, return_dict=True)
    assert last_token_rewards(out["reward_tensor"], batch) == expected_totals(15)
    assert out["reward_extra_info"]["correct"] == [2.0, 0.0, 2.0, 2.0]
    assert out["reward_extra_info"]["length"] == [0.0, 0.0, -6.0, 0.0]
    assert out["reward_extra_info"]["score"] == expected_totals(15)


def test_verl_batch_reward_manager(tmp_path: Path, char_tokenizer) -> None:
    managers = pytest.importorskip("verl.workers.reward_manager", reason=INSTALL)
    tokenizer = char_tokenizer
    fn = custom_reward_fn(tmp_path, "make_batch_compute_score", False)
    manager = managers.get_reward_manager_cls("batch")(tokenizer=tokenizer, num_examine=0, compute_score=fn)
    batch = rollout_batch(tokenizer)  # no step in extra_info: the composer's counter, 0 for this first batch
    rewards = last_token_rewards(manager(batch), batch)
    assert rewards == expected_totals(0) == [2.0, 0.0, 2.0, 2.0]
    assert batch.batch["acc"].tolist() == rewards  # BatchRewardManager stores the scores as acc


def test_verl_reward_loop_manager_calls_from_threads(tmp_path: Path, char_tokenizer) -> None:
    """veRL 0.9's reward loop (the trainer's default path): ``run_single`` per sample, all of a chunk
    at once, the synchronous function in a thread pool; as RewardLoopWorker.compute_score_batch does."""
    loop_managers = pytest.importorskip("verl.experimental.reward_loop.reward_manager", reason=INSTALL)
    omegaconf = pytest.importorskip("omegaconf")
    tokenizer = char_tokenizer
    fn = custom_reward_fn(tmp_path, "make_compute_score", True)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        manager = loop_managers.get_reward_manager_cls("naive")(omegaconf.OmegaConf.create({}), tokenizer, fn)
        batch = rollout_batch(tokenizer, step=30)

        async def chunk() -> list[dict]:
            return await asyncio.gather(*(manager.run_single(batch[i:i + 1]) for i in range(len(batch))))

        outputs = loop.run_until_complete(chunk())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert [o["reward_score"] for o in outputs] == expected_totals(30)
    assert [o["reward_extra_info"]["length"] for o in outputs] == [0.0, 0.0, -6.0, 0.0]
    rm_scores = loop_managers.base.RewardManagerBase.assemble_rm_scores(batch, [o["reward_score"] for o in outputs])
    assert last_token_rewards(rm_scores, batch) == expected_totals(30)


def test_verl_reward_loop_manager_awaits_the_async_form(tmp_path: Path, char_tokenizer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The async form through veRL's reward loop: veRL wraps it as a coroutine (get_custom_reward_fn),
    its manager awaits it on the worker's loop, and the samples of the chunk share composer calls."""
    calls: list[int] = []
    evaluate = TextScorer.evaluate  # every composer evaluation goes through it
    monkeypatch.setattr(TextScorer, "evaluate", lambda self, ctx, n, step=None: calls.append(n) or evaluate(self, ctx, n, step))
    loop_managers = pytest.importorskip("verl.experimental.reward_loop.reward_manager", reason=INSTALL)
    omegaconf = pytest.importorskip("omegaconf")
    fn = custom_reward_fn(tmp_path, "make_async_compute_score", True)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        manager = loop_managers.get_reward_manager_cls("naive")(omegaconf.OmegaConf.create({}), char_tokenizer, fn)
        assert manager.is_async_reward_score
        batch = rollout_batch(char_tokenizer, step=30)

        async def chunk() -> list[dict]:
            return await asyncio.gather(*(manager.run_single(batch[i:i + 1]) for i in range(len(batch))))

        outputs = loop.run_until_complete(chunk())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert [o["reward_score"] for o in outputs] == expected_totals(30)
    assert [o["reward_extra_info"]["correct"] for o in outputs] == [2.0, 0.0, 2.0, 2.0]
    # every sample scored once; how many share a call depends on when veRL's decode threads finish
    # ([3, 1] in every run here); the merging itself is asserted without threads above
    assert sum(calls) == 4


def worker_config(tmp_path: Path, tokenizer, factory: str, workers: int = 1):
    """veRL's trainer config as its reward loop reads it: the model's tokenizer folder, the reward
    manager by registered name, the custom reward function, no reward model."""
    omegaconf = pytest.importorskip("omegaconf", reason=INSTALL)
    model_dir = tmp_path / "model"
    tokenizer.save_pretrained(model_dir)
    return omegaconf.OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": str(model_dir), "tokenizer_path": None}},
        "reward": {"num_workers": workers,
                   "reward_manager": {"source": "register", "name": "naive", "module": {"path": None, "name": None}},
                   "custom_reward_function": {"path": str(reward_file(tmp_path, factory, True)),
                                              "name": "compute_score", "reward_kwargs": {}},
                   "reward_model": {"enable": False, "enable_resource_pool": False},
                   "sandbox_fusion": None}})


@pytest.mark.parametrize("factory", ["make_compute_score", "make_async_compute_score"])
def test_verl_reward_loop_worker(tmp_path: Path, char_tokenizer, factory: str) -> None:
    """veRL's RewardLoopWorker (what each reward worker actor runs, here without Ray): it loads the
    tokenizer from the model folder and the function from the file through load_reward_manager,
    and scores a chunk with compute_score_batch."""
    reward_loop = pytest.importorskip("verl.experimental.reward_loop.reward_loop", reason=INSTALL)
    config = worker_config(tmp_path, char_tokenizer, factory)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        worker = reward_loop.RewardLoopWorker(config)
        batch = rollout_batch(char_tokenizer, step=30)
        outputs = loop.run_until_complete(worker.compute_score_batch(batch))
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert [o["reward_score"] for o in outputs] == expected_totals(30)
    assert [o["reward_extra_info"]["length"] for o in outputs] == [0.0, 0.0, -6.0, 0.0]


def test_verl_reward_loop_manager_on_a_local_ray_cluster(tmp_path: Path, char_tokenizer) -> None:
    """The trainer's reward path end to end on CPU: RewardLoopManager starts two RewardLoopWorker Ray
    actors (each loads the function from the file), splits the batch between them, and returns the
    rm_scores tensor and the terms as reward_extra_info, as RayPPOTrainer reads them."""
    ray = pytest.importorskip("ray", reason=INSTALL)
    reward_loop = pytest.importorskip("verl.experimental.reward_loop.reward_loop", reason=INSTALL)
    reward = pytest.importorskip("verl.trainer.ppo.reward", reason=INSTALL)
    config = worker_config(tmp_path, char_tokenizer, "make_async_compute_score", workers=2)
    # a cluster of its own (address="local": never another session's running cluster), its files in a
    # short folder of its own (Unix socket paths are limited to ~107 characters)
    temp_dir = tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp_dir,
             runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[3])}})
    try:
        manager = reward_loop.RewardLoopManager(config)
        batch = rollout_batch(char_tokenizer, step=30)
        scores, extra = reward.extract_reward(manager.compute_rm_score(batch))
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert last_token_rewards(scores, batch) == expected_totals(30)
    assert extra["length"].tolist() == [0.0, 0.0, -6.0, 0.0] and extra["score"].tolist() == expected_totals(30)


def test_the_adapter_imports_without_verl_torch_or_ray() -> None:
    import subprocess
    import sys

    code = ("import sys\nfor name in ('verl', 'torch', 'ray', 'tensordict', 'omegaconf'):\n    sys.modules[name] = None\n"
            "from rewardkit.integrations.verl import make_compute_score\n"
            "print(make_compute_score({'version': 1, 'components': {'c': {'type': 'answer_match'}}})('d', '4', 4))\n")
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})
    assert done.returncode == 0 and done.stdout.strip() == "1.0", done.stderr
