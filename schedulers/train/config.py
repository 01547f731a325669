"""The PPO training config: schema with defaults, ``load_config`` (errors name the file and key path),
cross-key checks, and the factory building the Vidur envs the config names.

``configs/ppo_vidur.yaml`` shows every key; :func:`schedulers.train.train` reads its config through here.
"""

from __future__ import annotations

import copy
import difflib
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from rewardkit.errors import ConfigError
from rewardkit.params import Param, describe
from rewardkit.schedules import make_schedule

EnvFactory = Callable[[], Any]  # builds one training environment per call

# =================================================================================================
# Config schema
# =================================================================================================


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(default: Any, doc: str, minimum: int = 1) -> Param:
    expected = f"an integer >= {minimum}"

    def check(v: Any) -> int:
        if not _is_int(v) or v < minimum:
            raise ValueError(expected)
        return int(v)

    return Param(default, doc, expected, check)


def _bool(default: bool, doc: str) -> Param:
    def check(v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError("true or false")
        return v

    return Param(default, doc, "true or false", check)


def _optional(param: Param, default: Any = None) -> Param:
    """``param`` or null."""
    return Param(default, param.doc, f"{param.expected} or null", lambda v: None if v is None else param.check(v))


def _int_list(default: list[int], doc: str, minimum: int = 1, allow_empty: bool = False) -> Param:
    expected = f"a list of integers >= {minimum}" + ("" if allow_empty else " (non-empty)")

    def check(v: Any) -> list[int]:
        if not isinstance(v, (list, tuple)) or (not v and not allow_empty) or any(not _is_int(x) or x < minimum for x in v):
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
    if not _is_int(v) or v != 1:
        raise ValueError("1 (the only config version)")
    return 1


SCHEMA: dict[str, Any] = {
    "version": Param(1, "config format version", "1", lambda v: _check_version(v)),
    "env": _optional(Param.string(doc=""), None),
    "env_overrides": _mapping({}, "dotted env-config keys that override the env YAML, e.g. {qps: 13.0}"),
    "reward": _optional(Param.string(doc=""), None),
    "torch_threads": _int(1, "torch.set_num_threads for training"),
    "seeds": {
        "torch": _int(0, "seed of policy init, action sampling and minibatch shuffles", minimum=0),
        "train_start": _int(1000, "first training episode seed", minimum=0),
        "eval": _int_list([101, 102, 103, 104, 105], "seeds reserved for evaluation (never trained on)", minimum=0),
    },
    "policy": {
        "hidden_sizes": _int_list([64, 64], "row encoder layer sizes"),
        "critic_hidden_sizes": _int_list([64], "critic layers after pooling", allow_empty=True),
        "activation": Param.choice(["tanh", "relu", "gelu"], "tanh", "hidden activation"),
        "shared_encoder": _bool(False, "actor and critic share the row encoder"),
        "temperature": Param.positive(1.0, "initial softmax temperature"),
    },
    "ppo": {
        "total_timesteps": _int(200_000, "environment steps of PPO (0: behaviour cloning only)", minimum=0),
        "n_envs": _int(2, "environments stepped in lockstep"),
        "n_steps": _int(256, "steps per environment per rollout"),
        "n_epochs": _int(4, "passes over each rollout"),
        "minibatch_size": _int(128, "samples per gradient step"),
        "learning_rate": Param.positive(3e-4, "Adam learning rate"),
        "anneal_lr": _bool(True, "anneal the learning rate linearly to 0"),
        "adam_eps": Param.positive(1e-5, "Adam epsilon"),
        "gamma": Param.fraction(0.99, "discount"),
        "gae_lambda": Param.fraction(0.95, "GAE lambda"),
        "clip_coef": Param.positive(0.2, "PPO ratio clip"),
        "clip_value": _optional(Param.positive(doc=""), None),
        "vf_coef": Param.non_negative(0.5, "value loss coefficient"),
        "max_grad_norm": _optional(Param.positive(doc=""), 0.5),
        "normalize_advantages": _bool(True, "normalize advantages per minibatch"),
        "reward_scaling": _bool(True, "divide rewards by the running std of the discounted return"),
        "target_kl": _optional(Param.positive(doc=""), None),
    },
    "entropy": {
        "coef": _schedule_spec(0.01, "entropy bonus coefficient (schedule over PPO env steps)"),
        "target": _optional(Param.fraction(doc="", open_low=True), None),
        "controller": Param.choice(["coef", "temperature"], "coef", "what the target controller adjusts"),
        "rate": Param.positive(0.1, "controller step size"),
        "bounds": _bounds([0.01, 100.0], "limits of the controller multiplier"),
    },
    "kl_ref": {
        "coef": _schedule_spec(0.0, "coefficient of KL(pi || behaviour-cloned policy); 0 disables"),
    },
    "bc": {
        "enabled": _bool(True, "warm start by behaviour cloning"),
        "heuristics": _str_list(["least_tokens"], "heuristics whose choices are imitated"),
        "demo_steps": _int(4000, "demonstration steps in total (all heuristics, all envs)"),
        "epochs": _int(10, "passes over the demonstrations"),
        "minibatch_size": _int(256, "samples per gradient step"),
        "learning_rate": Param.positive(3e-3, "Adam learning rate for cloning"),
        "value_pretrain": _bool(True, "also fit the critic to the demonstrations' returns"),
    },
    "logging": {
        "checkpoint_every": _int(10, "updates between checkpoints"),
        "keep_checkpoints": _int(3, "checkpoints kept on disk"),
        "tensorboard": _bool(True, "write TensorBoard events when tensorboard is installed"),
        "progress": _bool(True, "print one line per update to stderr"),
        "plots": _bool(True, "save learning_curves.png at the end"),
    },
}

# Keys that may change between a checkpoint and a resumed run.
RESUMABLE_CHANGES = ("ppo.total_timesteps", "logging.")


def _validate(spec: Mapping[str, Any], given: Any, path: str, source: str) -> dict[str, Any]:
    """Check ``given`` against a (nested) schema; fill defaults; raise located ConfigErrors."""
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping, got {describe(given)}", source=source, path=path or None)
    for key in given:
        if key not in spec:
            where = f"{path}.{key}" if path else str(key)
            close = difflib.get_close_matches(str(key), list(spec), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key{hint}; expected one of: {', '.join(spec)}", source=source, path=where)
    out: dict[str, Any] = {}
    for key, item in spec.items():
        where = f"{path}.{key}" if path else key
        if isinstance(item, dict):
            out[key] = _validate(item, given.get(key), where, source)
            continue
        if key not in given:
            out[key] = copy.deepcopy(item.default)
            continue
        try:
            out[key] = item.check(given[key])
        except ValueError as exc:
            raise ConfigError(f"expected {exc}, got {describe(given[key])}", source=source, path=where) from None
    return out


def load_config(config: str | os.PathLike | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Read and check a training config; return ``(config with defaults, source name)``.

    Relative ``env`` and ``reward`` paths are kept as written and resolved when the env is built.
    """
    if isinstance(config, Mapping):
        raw, source = dict(config), "<config dict>"
    else:
        source = str(config)
        try:
            with open(config, encoding="utf-8") as fh:
                raw = yaml.safe_load(fh)
        except FileNotFoundError:
            raise ConfigError("file not found", source=source) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"invalid YAML: {exc}", source=source) from None
    cfg = _validate(SCHEMA, raw, "", source)
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
    batch = ppo["n_envs"] * ppo["n_steps"]
    if ppo["minibatch_size"] > batch:
        raise ConfigError(f"expected at most n_envs * n_steps = {batch}, got {ppo['minibatch_size']}", source=source, path="ppo.minibatch_size")
    if 0 < ppo["total_timesteps"] < batch:
        raise ConfigError(f"expected 0 or at least n_envs * n_steps = {batch}, got {ppo['total_timesteps']}", source=source, path="ppo.total_timesteps")
    if ppo["total_timesteps"] == 0 and not bc["enabled"]:
        raise ConfigError("expected > 0 when behaviour cloning is disabled (nothing would be trained), got 0", source=source, path="ppo.total_timesteps")
    if bc["enabled"] and bc["demo_steps"] < ppo["n_envs"] * len(bc["heuristics"]):
        raise ConfigError(
            f"expected at least n_envs * len(heuristics) = {ppo['n_envs'] * len(bc['heuristics'])}, got {bc['demo_steps']}",
            source=source, path="bc.demo_steps",
        )
    ent = make_schedule(cfg["entropy"]["coef"], path="entropy.coef", source=source)
    kl = make_schedule(cfg["kl_ref"]["coef"], path="kl_ref.coef", source=source)
    steps = _probe_steps(ppo["total_timesteps"])
    for name, sched in (("entropy.coef", ent), ("kl_ref.coef", kl)):
        low = min((sched(t), t) for t in steps)
        if low[0] < 0:
            raise ConfigError(f"expected a non-negative coefficient, got {low[0]:g} at step {low[1]}", source=source, path=name)
    if any(kl(t) > 0 for t in steps) and not bc["enabled"]:
        raise ConfigError("expected 0 when bc.enabled is false (the KL reference is the behaviour-cloned policy)", source=source, path="kl_ref.coef")


def _probe_steps(total: int) -> list[int]:
    """Steps at which schedules are checked: the start, 100 points across the run, and the end."""
    return sorted({0, total, *(total * k // 100 for k in range(101))})


def diff_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """Key paths at which two plain-data configs differ (a resumed run must match its checkpoint)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            out += diff_paths(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if a == b else [path]
