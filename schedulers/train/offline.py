"""Learning from a gateway's decision log: the last step of train in Vidur -> route live -> learn from the log.

Two modes over the logged decisions (observation rows as the policy sees them, the replica chosen,
the request's own reward from the reward config):

- ``clone``: behaviour cloning of the logged router (cross-entropy on its actions), e.g. to start a
  policy from what a heuristic did on real engines;
- ``reward``: advantage-weighted regression (Peng et al., 2019, "AWR") on the logged actions,
  fine-tuning a checkpoint: each decision's log-probability is weighted by ``exp(A / beta)``, where
  ``A`` is its request's reward standardized over the log (per-request credit, as the shipped
  ``request_ttft`` router is trained with ``gamma`` 0), weights clipped at ``max_weight``. Decisions
  whose requests fared better than average are made likelier, worse ones less likely, without
  on-policy rollouts (the log's router chose the actions, so the update stays close to its data).

The log's feature names must equal the policy's (the same observation settings); decisions that
were retried, failed or cancelled, or (in ``reward`` mode) have no reward, are left out. Logs are
streamed and every value checked first (:mod:`.offline_log`); a policy whose weights are not
finite is never written (nor loaded: :func:`schedulers.rl.scorer_network.check_finite_weights`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

import torch

from rewardkit.errors import ConfigError

from ..rl.scorer_network import NonFiniteWeightsError, ReplicaScorerPolicy
from ..rl.ppo import minibatch_indices
from ..rl.ppo_router import PPORouter, observation_config_from_checkpoint
from .checkpoints import atomic_save
from .offline_log import LoggedBatch, read_logged

MODES = ("clone", "reward")


def load_logged(paths: str | Path | list[str | Path], mode: str) -> LoggedBatch:
    """The decisions of one log or several (same observation settings) that ``mode`` can learn from,
    streamed and checked (:mod:`.offline_log`).

    Logs of several gateways (routers, rounds) together give the reward mode what it needs most:
    different actions in similar states, each with its request's outcome.
    """
    if mode not in MODES:
        raise ConfigError(f"expected one of {', '.join(MODES)}, got {mode!r}", path="--mode")
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise ConfigError("expected at least one decision log", path="--from-log")
    return read_logged(paths, mode)


def fit_offline(policy: ReplicaScorerPolicy, batch: LoggedBatch, mode: str, *, epochs: int = 20, lr: float = 1e-3,
                minibatch_size: int = 256, beta: float = 1.0, max_weight: float = 20.0, seed: int = 0,
                log: Any = None) -> list[dict[str, float]]:
    """Train ``policy`` on ``batch`` in ``mode`` (see the module doc); one metrics row per epoch."""
    if epochs < 1 or lr <= 0 or minibatch_size < 1 or beta <= 0 or max_weight < 1:
        raise ConfigError(f"expected epochs >= 1, lr > 0, minibatch >= 1, beta > 0 and max_weight >= 1, got "
                          f"{epochs}, {lr}, {minibatch_size}, {beta}, {max_weight}")
    weights = torch.ones(len(batch.actions))
    if mode == "reward":
        r = batch.rewards.double()  # float64: rewards up to offline_log.MAX_ABS_REWARD standardize without overflow
        advantage = (r - r.mean()) / (r.std(unbiased=False) + 1e-8)
        weights = torch.exp(advantage / beta).clamp(max=max_weight).float()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    rows = []
    for epoch in range(1, epochs + 1):
        total, agree, n = 0.0, 0.0, 0
        for idx in minibatch_indices(len(batch.actions), minibatch_size, generator):
            logits = policy.logits(batch.obs[idx])
            logp = torch.log_softmax(logits, dim=-1).gather(1, batch.actions[idx, None]).squeeze(1)
            w = weights[idx]
            loss = -(w * logp).sum() / w.sum()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimizer.step()
            total += float(loss.detach()) * len(idx)
            agree += float((logits.argmax(-1) == batch.actions[idx]).float().sum())
            n += len(idx)
        rows.append({"epoch": epoch, "loss": total / n, "agreement": agree / n})
        if log is not None:
            log(f"[offline {mode}] epoch {epoch}/{epochs}: loss {total / n:.4f}, agrees with the log on {agree / n:.1%}")
    return rows


def train_from_log(log_path: str | Path | list[str | Path], out_dir: str | Path, *, mode: str = "reward",
                   init: str | None = None,
                   hidden_sizes: tuple[int, ...] = (64, 64), **fit: Any) -> Path:
    """Learn from one decision log or several into ``out_dir/policy.pt`` (a checkpoint :class:`PPORouter` loads).

    ``init``: a checkpoint to fine-tune (its observation settings must match the log's); without it
    a new policy of ``hidden_sizes`` is trained (``clone`` is the usual mode then).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"expected a folder for policy.pt, got the file {out}", path="--out")
    batch = load_logged(log_path, mode)
    if init is not None:
        router = PPORouter.from_checkpoint(init)
        policy = router.policy.train()
        from .checkpoints import load_checkpoint

        if observation_config_from_checkpoint(load_checkpoint(init)) != batch.observation:
            raise ConfigError(f"{init}: expected a policy trained on the log's observation settings "
                              f"{dataclasses.asdict(batch.observation)}", path="--init")
    else:
        policy = ReplicaScorerPolicy(batch.obs.shape[-1], hidden_sizes=hidden_sizes)
    if policy.kwargs["n_features"] != batch.obs.shape[-1]:
        raise ConfigError(f"{log_path}: expected rows of {policy.kwargs['n_features']} features (the policy's), "
                          f"got {batch.obs.shape[-1]}")
    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    logs = [str(p) for p in ([log_path] if isinstance(log_path, (str, Path)) else log_path)]
    progress(f"[offline] {len(batch.actions)} decisions from {', '.join(logs)} ({batch.skipped} left out), mode {mode}")
    rows = fit_offline(policy, batch, mode, log=progress, **fit)
    try:
        checkpoint = policy.eval().to_checkpoint()
    except NonFiniteWeightsError as exc:
        raise ConfigError(f"{', '.join(logs)}: learning gave non-finite weights; nothing written ({exc})") from None
    out.mkdir(parents=True, exist_ok=True)
    path = out / "policy.pt"
    atomic_save({**checkpoint, "observation": dataclasses.asdict(batch.observation),
                 "kind": f"offline_{mode}", "decision_logs": logs,
                 "final_agreement": rows[-1]["agreement"] if rows else math.nan}, path)
    return path
