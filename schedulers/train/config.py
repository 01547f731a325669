"""The PPO training config: schema with defaults, ``load_config`` (errors name the file and key path),
cross-key checks, and the factory building the Vidur envs the config names.

``configs/ppo_vidur.yaml`` shows every key; :func:`schedulers.train.train` reads its config through here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any


from rewardkit.errors import ConfigError
from rewardkit.config import check_structure, load_yaml
from rewardkit.params import Param, validate_schema
from rewardkit.schedules import make_schedule

from ..bounds import (MAX_DEMO_STEPS, MAX_ENVS, MAX_EVAL_SEEDS, MAX_HIDDEN_SIZE, MAX_LAYERS, MAX_ROLLOUT_SAMPLES, MAX_SEED,
                      MAX_TORCH_THREADS)

EnvFactory = Callable[[], Any]  # builds one training environment per call

# =================================================================================================
# Config schema
# =================================================================================================


def _int(default: Any, doc: str, minimum: int = 1, maximum: int | None = None) -> Param:
    return Param.integer(default, doc, minimum=minimum, maximum=maximum)


def _int_list(default: list[int], doc: str, minimum: int = 1, allow_empty: bool = False,
              maximum: int | None = None, max_length: int | None = None) -> Param:
    values = f"integers >= {minimum}" if maximum is None else f"integers from {minimum} to {maximum} (the limit)"
    expected = f"a list of {values}" + ("" if allow_empty else " (non-empty)")
    if max_length is not None:
        expected += f", at most {max_length} of them"
    check_int = Param.integer(minimum=minimum, maximum=maximum).check

    def check(v: Any) -> list[int]:
        def ok(x: Any) -> bool:
            try:
                check_int(x)
                return True
            except ValueError:
                return False

        if (not isinstance(v, (list, tuple)) or (not v and not allow_empty) or (max_length is not None and len(v) > max_length)
                or not all(ok(x) for x in v)):
            raise ValueError(expected)
        return [int(x) for x in v]

    return Param(default, doc, expected, check)


def _str_list(default: list[str], doc: str) -> Param:
    def check(v: Any) -> list[str]:
        if not isinstance(v, (list, tuple)) or not v or any(not isinstance(x, str) or not x for x in v):
            raise ValueError("a non-empty list of names")
        return list(v)

    return Param(default, doc, "a non-empty list of names", check)


def _mapping(default: dict, doc: str) -> Param:
    def check(v: Any) -> dict:
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            raise ValueError("a mapping")
        return dict(v)

    return Param(default, doc, "a mapping", check)


def _schedule_spec(default: Any, doc: str) -> Param:
    """Checked structurally here; :func:`make_schedule` validates it fully (with its key path)."""

    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, float, Mapping)):
            raise ValueError("a number or a schedule mapping {schedule: ..., ...}")
        return dict(v) if isinstance(v, Mapping) else float(v)

    return Param(default, doc, "a number or a schedule mapping", check)


def _bounds(default: list[float], doc: str) -> Param:
    def check(v: Any) -> list[float]:
        ok = isinstance(v, (list, tuple)) and len(v) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v
        )
        if not ok or not 0 < v[0] <= 1.0 <= v[1]:
            raise ValueError("a list [low, high] with 0 < low <= 1 <= high")
        return [float(v[0]), float(v[1])]

    return Param(default, doc, "a list [low, high] with 0 < low <= 1 <= high", check)


def _check_version(v: Any) -> int:
    if isinstance(v, bool) or v != 1 or not isinstance(v, int):
        raise ValueError("1 (the only config version)")
    return 1


SCHEMA: dict[str, Any] = {
    "version": Param(1, "config format version", "1", lambda v: _check_version(v)),
    "env": Param.string(doc="").or_null(),
    "env_overrides": _mapping({}, "dotted env-config keys that override the env YAML, e.g. {qps: 13.0}"),
    "reward": Param.string(doc="").or_null(),
    "torch_threads": _int(1, "torch.set_num_threads for training", maximum=MAX_TORCH_THREADS),
    "seeds": {
        "torch": _int(0, "seed of policy init, action sampling and minibatch shuffles", minimum=0, maximum=MAX_SEED),
        "train_start": _int(1000, "first training episode seed", minimum=0, maximum=MAX_SEED),
        "eval": _int_list([101, 102, 103, 104, 105], "seeds reserved for evaluation (never trained on)", minimum=0,
                          maximum=MAX_SEED, max_length=MAX_EVAL_SEEDS),
    },
    "policy": {
        "hidden_sizes": _int_list([64, 64], "row encoder layer sizes", maximum=MAX_HIDDEN_SIZE, max_length=MAX_LAYERS),
        "critic_hidden_sizes": _int_list([64], "critic layers after pooling", allow_empty=True, maximum=MAX_HIDDEN_SIZE,
                                         max_length=MAX_LAYERS),
        "activation": Param.choice(["tanh", "relu", "gelu"], "tanh", "hidden activation"),
        "shared_encoder": Param.boolean(False, "actor and critic share the row encoder"),
        "temperature": Param.positive(1.0, "initial softmax temperature"),
        "linear_scores": Param.boolean(False, "add a linear term on the raw row to each replica's score"),
    },
    "ppo": {
        "total_timesteps": _int(200_000, "environment steps of PPO (0: behaviour cloning only)", minimum=0),
        "n_envs": _int(2, "environments stepped in lockstep", maximum=MAX_ENVS),
        "n_steps": _int(256, "steps per environment per rollout"),
        "n_epochs": _int(4, "passes over each rollout"),
        "minibatch_size": _int(128, "samples per gradient step"),
        "learning_rate": Param.positive(3e-4, "Adam learning rate"),
        "anneal_lr": Param.boolean(True, "anneal the learning rate linearly to 0"),
        "adam_eps": Param.positive(1e-5, "Adam epsilon"),
        "gamma": Param.fraction(0.99, "discount"),
        "gae_lambda": Param.fraction(0.95, "GAE lambda"),
        "clip_coef": Param.positive(0.2, "PPO ratio clip"),
        "clip_value": Param.positive(doc="").or_null(),
        "vf_coef": Param.non_negative(0.5, "value loss coefficient"),
        "max_grad_norm": Param.positive(doc="").or_null(0.5),
        "normalize_advantages": Param.boolean(True, "normalize advantages per minibatch"),
        "reward_scaling": Param.boolean(True, "divide rewards by the running std of the discounted return"),
        "target_kl": Param.positive(doc="").or_null(),
        "envs_per_seed": _int(1, "envs replaying each episode seed (same arrivals and slowdowns)"),
        "advantage_baseline": Param.choice(
            ["critic", "paired", "paired_critic"], "critic",
            "critic: GAE on the value function; paired: return minus the mean return of the envs sharing "
            "the seed at the same step; paired_critic: the same with returns minus V(s) (both need "
            "envs_per_seed >= 2 and whole-episode rollouts)"),
    },
    "entropy": {
        "coef": _schedule_spec(0.01, "entropy bonus coefficient (schedule over PPO env steps)"),
        "target": Param.fraction(doc="", open_low=True).or_null(),
        "controller": Param.choice(["coef", "temperature"], "coef", "what the target controller adjusts"),
        "rate": Param.positive(0.1, "controller step size"),
        "bounds": _bounds([0.01, 100.0], "limits of the controller multiplier"),
    },
    "kl_ref": {
        "coef": _schedule_spec(0.0, "coefficient of KL(pi || behaviour-cloned policy); 0 disables"),
    },
    "bc": {
        "enabled": Param.boolean(True, "warm start by behaviour cloning"),
        "heuristics": _str_list(["least_tokens"], "heuristics whose choices are imitated"),
        "demo_steps": _int(4000, "demonstration steps in total (all heuristics, all envs)", maximum=MAX_DEMO_STEPS),
        "epochs": _int(10, "passes over the demonstrations"),
        "minibatch_size": _int(256, "samples per gradient step"),
        "learning_rate": Param.positive(3e-3, "Adam learning rate for cloning"),
        "value_pretrain": Param.boolean(True, "also fit the critic to the demonstrations' returns"),
        "from_policy": Param.string(doc="start from this behaviour-cloned policy (a bc_policy.pt) instead of cloning "
                                        "again: runs that differ only in their reward share one warm start").or_null(),
    },
    "logging": {
        "checkpoint_every": _int(10, "updates between checkpoints"),
        "keep_checkpoints": _int(3, "checkpoints kept on disk"),
        "tensorboard": Param.boolean(True, "write TensorBoard events when tensorboard is installed"),
        "progress": Param.boolean(True, "print one line per update to stderr"),
        "plots": Param.boolean(True, "save learning_curves.png at the end"),
    },
}

# Keys that may change between a checkpoint and a resumed run.
RESUMABLE_CHANGES = ("ppo.total_timesteps", "logging.")


def load_config(config: str | os.PathLike | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Read and check a training config; return ``(config with defaults, source name)``.

    Relative ``env`` and ``reward`` paths are kept as written and resolved when the env is built.
    """
    if isinstance(config, Mapping):
        raw, source = dict(config), "<config dict>"
        check_structure(raw, source=source)
    else:
        source = str(config)
        raw = load_yaml(config)
    cfg = validate_schema(SCHEMA, raw, source=source)
    _check_consistency(cfg, source)
    return cfg, source


def _check_consistency(cfg: dict[str, Any], source: str) -> None:
    """Cross-key checks: seed ranges, batch sizes, schedules, BC needed by the KL reference."""
    seeds, ppo, bc = cfg["seeds"], cfg["ppo"], cfg["bc"]
    if seeds["eval"] and seeds["train_start"] <= max(seeds["eval"]):
        raise ConfigError(
            f"expected a seed above every evaluation seed (max {max(seeds['eval'])}) so training never uses them, "
            f"got {seeds['train_start']}",
            source=source, path="seeds.train_start",
        )
    # every training episode's seed is below train_start + its step count (each episode takes >= 1 step)
    last_seed = seeds["train_start"] + ppo["total_timesteps"] + (bc["demo_steps"] if bc["enabled"] else 0) + ppo["n_envs"]
    if last_seed > MAX_SEED:
        raise ConfigError(f"expected train_start + ppo.total_timesteps + bc.demo_steps + ppo.n_envs (a bound on the training "
                          f"episodes' seeds) of at most {MAX_SEED} (the limit: 32-bit seeds), got {last_seed}",
                          source=source, path="seeds.train_start")
    batch = ppo["n_envs"] * ppo["n_steps"]
    if batch > MAX_ROLLOUT_SAMPLES:
        raise ConfigError(f"expected n_envs * n_steps of at most {MAX_ROLLOUT_SAMPLES} (the limit), got {batch}",
                          source=source, path="ppo.n_steps")
    if ppo["minibatch_size"] > batch:
        raise ConfigError(f"expected at most n_envs * n_steps = {batch}, got {ppo['minibatch_size']}",
                          source=source, path="ppo.minibatch_size")
    if 0 < ppo["total_timesteps"] < batch:
        raise ConfigError(f"expected 0 or at least n_envs * n_steps = {batch}, got {ppo['total_timesteps']}",
                          source=source, path="ppo.total_timesteps")
    if ppo["total_timesteps"] == 0 and not bc["enabled"]:
        raise ConfigError("expected > 0 when behaviour cloning is disabled (nothing would be trained), got 0",
                          source=source, path="ppo.total_timesteps")
    if bc["enabled"] and bc["demo_steps"] < ppo["n_envs"] * len(bc["heuristics"]):
        raise ConfigError(
            f"expected at least n_envs * len(heuristics) = {ppo['n_envs'] * len(bc['heuristics'])}, got {bc['demo_steps']}",
            source=source, path="bc.demo_steps",
        )
    if ppo["n_envs"] % ppo["envs_per_seed"]:
        raise ConfigError(f"expected a divisor of ppo.n_envs = {ppo['n_envs']}, got {ppo['envs_per_seed']}",
                          source=source, path="ppo.envs_per_seed")
    if ppo["advantage_baseline"] != "critic" and ppo["envs_per_seed"] < 2:
        raise ConfigError(f"expected envs_per_seed >= 2 with advantage_baseline: {ppo['advantage_baseline']} "
                          f"(the baseline is the other envs replaying the same seed), got {ppo['envs_per_seed']}",
                          source=source, path="ppo.envs_per_seed")
    ent = make_schedule(cfg["entropy"]["coef"], path="entropy.coef", source=source)
    kl = make_schedule(cfg["kl_ref"]["coef"], path="kl_ref.coef", source=source)
    steps = _probe_steps(ppo["total_timesteps"])
    for name, sched in (("entropy.coef", ent), ("kl_ref.coef", kl)):
        low = min((sched(t), t) for t in steps)
        if low[0] < 0:
            raise ConfigError(f"expected a non-negative coefficient, got {low[0]:g} at step {low[1]}", source=source, path=name)
    if any(kl(t) > 0 for t in steps) and not bc["enabled"]:
        raise ConfigError("expected 0 when bc.enabled is false (the KL reference is the behaviour-cloned policy)",
                          source=source, path="kl_ref.coef")


def _probe_steps(total: int) -> list[int]:
    """Steps at which schedules are checked: the start, 100 points across the run, and the end."""
    return sorted({0, total, *(total * k // 100 for k in range(101))})


def added_at_default(checkpoint_cfg: Mapping[str, Any], cfg: Mapping[str, Any], path: str) -> bool:
    """Whether ``path`` is a key newer than the checkpoint's config, set to its schema default.

    Such a key changes nothing about the run (the checkpoint trained with that default's
    behaviour), so a checkpoint written before the key existed can still be resumed. ``cfg`` is a
    checked config (:func:`load_config`), so it holds every schema key.
    """
    schema: Any = SCHEMA
    old: Any = checkpoint_cfg
    new: Any = cfg
    for key in path.split("."):
        if not isinstance(schema, Mapping) or key not in schema or not isinstance(old, Mapping):
            return False
        if key not in old:
            return isinstance(schema[key], Param) and new[key] == schema[key].default
        schema, old, new = schema[key], old[key], new[key]
    return False


def diff_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """Key paths at which two plain-data configs differ (a resumed run must match its checkpoint)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            out += diff_paths(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if a == b else [path]
