"""Train the PPO request router: config checking, behaviour-cloning warm start, PPO loop, logs.

``train(config, out_dir)`` reads a config like ``configs/ppo_vidur.yaml``, optionally clones
heuristic routers from demonstrations, then runs PPO on ``n_envs`` environments stepped one
after another. It writes per-update metrics (``metrics.csv``, TensorBoard when installed),
atomic checkpoints that an interrupted run resumes from, ``policy.pt`` for
:class:`schedulers.ppo_router.PPORouter`, and ``learning_curves.png``.

Environment episodes are seeded ``seeds.train_start + env_index + n_envs * episode_index``, so
training never meets the evaluation seeds, and a resumed run restarts each environment's
interrupted episode with the next seed (or, if the checkpoint fell on an episode boundary, with
exactly the seed the uninterrupted run would have used).
"""

from __future__ import annotations

import copy
import csv
import difflib
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from rewardkit.errors import ConfigError
from rewardkit.params import Param, describe
from rewardkit.schedules import make_schedule

from .policy import ReplicaScorerPolicy
from .ppo import EntropyController, RewardScaler, UpdateSettings, compute_gae, explained_variance, minibatch_indices, ppo_update
from .rollout import RolloutBuffer

EnvFactory = Callable[[], Any]

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
    "env_overrides": _mapping({}, "overrides passed to VidurRoutingEnv.from_yaml"),
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


def _diff_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """Key paths at which two plain-data configs differ."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            out += _diff_paths(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if a == b else [path]


# =================================================================================================
# Environment construction
# =================================================================================================


def _resolve_path(value: str, source: str, key: str) -> Path:
    """A config path: absolute, relative to the cwd, or relative to the config's folder or its parent."""
    p = Path(value)
    candidates = [p] if p.is_absolute() else [Path.cwd() / p]
    if not p.is_absolute() and not source.startswith("<"):
        base = Path(source).resolve().parent
        candidates += [base / p, base.parent / p]
    for c in candidates:
        if c.exists():
            return c
    raise ConfigError(f"expected an existing file, got {value!r} (looked in {', '.join(str(c.parent) for c in candidates)})", source=source, path=key)


def vidur_env_factory(cfg: Mapping[str, Any], source: str = "<config dict>") -> EnvFactory:
    """Factory building ``schedulers.env.VidurRoutingEnv`` from the config's ``env`` and ``reward``.

    The env YAML is read with ``schedulers.env_config.load_env_config(env, env_overrides)``
    (dotted env-config keys); ``reward`` (when set) is the rewardkit YAML handed to the env,
    replacing the env config's own ``reward_config``.
    """
    if cfg.get("env") is None:
        raise ConfigError("expected the path of an env YAML (or pass env_factory to train())", source=source, path="env")
    env_path = _resolve_path(cfg["env"], source, "env")
    reward_path = _resolve_path(cfg["reward"], source, "reward") if cfg.get("reward") is not None else None
    overrides = dict(cfg.get("env_overrides") or {})
    from .env_config import load_env_config  # light (no Vidur import); validates now, not in a worker

    try:
        env_config = load_env_config(env_path, overrides)
    except ConfigError as exc:
        if exc.source != "override":
            raise  # an error inside the env YAML already names that file and key
        raise ConfigError(exc.detail, source=source, path=f"env_overrides.{exc.path}") from None

    def make() -> Any:
        from .env import VidurRoutingEnv  # imported lazily: the simulator is heavy

        return VidurRoutingEnv(env_config, reward_composer=str(reward_path) if reward_path else None)

    return make


# =================================================================================================
# Logging
# =================================================================================================


class MetricsLog:
    """Per-update metrics to a CSV (header grows when new keys appear) and, optionally, TensorBoard."""

    def __init__(self, path: Path, tensorboard_dir: Path | None, resume_after: int | None, purge_step: int | None) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.columns: list[str] = []
        if resume_after is not None and path.exists():
            with open(path, newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                self.columns = list(reader.fieldnames or [])
                self.rows = [
                    {k: _parse_number(v) for k, v in r.items()}
                    for r in reader
                    if r.get("update") and int(float(r["update"])) <= resume_after
                ]
        self._rewrite()
        self.writer = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except Exception:  # tensorboard is optional; torch raises ImportError without it
                SummaryWriter = None
            if SummaryWriter is not None:
                self.writer = SummaryWriter(str(tensorboard_dir), purge_step=purge_step)

    def _rewrite(self) -> None:
        tmp = self.path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.columns, restval="")
            writer.writeheader()
            writer.writerows(self.rows)
        os.replace(tmp, self.path)

    def log(self, row: dict[str, Any], step: int) -> None:
        """Append one row; rewrite the file only when it brings new columns."""
        self.rows.append(row)
        new = [k for k in row if k not in self.columns]
        if new:
            self.columns += new
            self._rewrite()
        else:
            with open(self.path, "a", newline="", encoding="utf-8") as fh:
                csv.DictWriter(fh, fieldnames=self.columns, restval="").writerow(row)
        if self.writer is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _parse_number(text: Any) -> Any:
    """A CSV cell back to int/float where it is one (rows reloaded on resume)."""
    if text in ("", None):
        return text
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def _progress(text: str, enabled: bool) -> None:
    if enabled:
        print(text, file=sys.stderr, flush=True)


def _fmt_return(value: float) -> str:
    """Mean episode return for the progress line; '-' when no episode ended during the update."""
    return "-" if value != value else f"{value:.4g}"


def _fmt_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def _series_label(key: str) -> str:
    """Legend label of a metrics column: the term name for reward terms (``absolute/latency``)."""
    if key.startswith("reward_terms/"):
        name = key[len("reward_terms/"):]
        return name.rsplit("/", 1)[0] if name.endswith("/contribution") else name
    return key.split("/")[-1] if "/" in key else key


def _reward_term_keys(columns: Any) -> list[str]:
    """Reward-term columns worth plotting: contributions and the total when rewardkit names them so."""
    terms = sorted(k for k in columns if k.startswith("reward_terms/"))
    main = [k for k in terms if k.endswith("/contribution") or k == "reward_terms/total"]
    return main or terms


def plot_learning_curves(csv_path: str | os.PathLike, png_path: str | os.PathLike) -> Path | None:
    """Save a grid of learning curves from a ``metrics.csv``; returns the PNG path (None if no rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return None

    def series(key: str) -> tuple[list[float], list[float]]:
        xs, ys = [], []
        for r in rows:
            v = r.get(key, "")
            if v not in ("", None) and math.isfinite(float(v)):
                xs.append(float(r["global_step"]))
                ys.append(float(v))
        return xs, ys

    cols = rows[0].keys() | {k for r in rows for k in r}
    panels: list[tuple[str, list[str]]] = [
        ("episode return", ["episode_return_mean"]),
        ("entropy / log N", ["entropy_norm"]),
        ("approx KL, clip fraction", ["approx_kl", "clip_fraction"]),
        ("explained variance", ["explained_variance"]),
        ("losses", ["policy_loss", "value_loss"]),
        ("action share", sorted(k for k in cols if k.startswith("action_share/"))),
        ("reward terms (per-step mean)", _reward_term_keys(cols)),
        ("coefficients (log scale)", ["learning_rate", "ent_coef", "kl_coef"]),
        ("temperature, entropy multiplier", ["temperature", "entropy_scale"]),
        ("env steps / s", ["env_steps_per_s"]),
        ("wall-time share", ["time_share_policy", "time_share_env", "time_share_update"]),
        ("KL to behaviour-cloned policy", ["kl_ref"]),
    ]
    fig, axes = plt.subplots(3, 4, figsize=(18, 11), constrained_layout=True)
    for ax, (title, keys) in zip(axes.flat, panels):
        for key in keys:
            xs, ys = series(key)
            if title.startswith("coefficients"):
                xs, ys = [x for x, y in zip(xs, ys) if y > 0], [y for y in ys if y > 0]
            if xs:
                ax.plot(xs, ys, label=_series_label(key))
        if title.startswith("coefficients") and ax.lines:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("env steps")
        if len(keys) > 1 and ax.lines:
            ax.legend(fontsize=7)
    out = Path(png_path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


# =================================================================================================
# Checkpoints
# =================================================================================================

_CKPT_RE = re.compile(r"^update_(\d{6,})\.pt$")


def _plain(obj: Any) -> Any:
    """Convert numpy scalars/arrays inside nested containers to Python data (safe torch.load)."""
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file in the same folder, then ``os.replace`` it into place."""
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def latest_checkpoint(out_dir: str | os.PathLike) -> Path | None:
    """The highest-numbered ``checkpoints/update_*.pt`` in ``out_dir``, if any."""
    folder = Path(out_dir) / "checkpoints"
    if not folder.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _CKPT_RE.match(p.name))]
    return max(found)[1] if found else None


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a checkpoint written by the trainer (tensors and plain data only)."""
    return torch.load(path, map_location="cpu", weights_only=True)


# =================================================================================================
# Trainer
# =================================================================================================


@dataclass
class TrainResult:
    """Where things were written and how far training got."""

    out_dir: Path
    policy_path: Path
    checkpoint_path: Path
    updates: int
    global_step: int
    metrics: list[dict[str, Any]] = field(default_factory=list)
    bc_metrics: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Demos:
    """One heuristic's demonstration block, shaped ``(T, n_envs, ...)``."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    last_obs: torch.Tensor


class Trainer:
    """Holds the envs, policy and training state; :meth:`run` does BC then PPO updates."""

    def __init__(self, cfg: dict[str, Any], source: str, out_dir: Path, env_factory: EnvFactory,
                 callback: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.cfg, self.source, self.out_dir = cfg, source, out_dir
        self.callback = callback
        ppo = cfg["ppo"]
        self.n_envs, self.n_steps = ppo["n_envs"], ppo["n_steps"]
        self.batch_size = self.n_envs * self.n_steps
        self.num_updates = ppo["total_timesteps"] // self.batch_size
        self.progress_on = cfg["logging"]["progress"]
        torch.set_num_threads(cfg["torch_threads"])
        torch.manual_seed(cfg["seeds"]["torch"])
        self.shuffle_gen = torch.Generator().manual_seed(cfg["seeds"]["torch"] + 1)

        self.envs = [env_factory() for _ in range(self.n_envs)]
        self.num_replicas, self.n_features = self._check_spaces()
        self.policy = ReplicaScorerPolicy(self.n_features, **cfg["policy"])
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=ppo["learning_rate"], eps=ppo["adam_eps"])
        self.reference: ReplicaScorerPolicy | None = None
        self.ent_schedule = make_schedule(cfg["entropy"]["coef"], path="entropy.coef", source=source)
        self.kl_schedule = make_schedule(cfg["kl_ref"]["coef"], path="kl_ref.coef", source=source)
        ent = cfg["entropy"]
        self.controller = (
            EntropyController(ent["target"], ent["controller"], ent["rate"], tuple(ent["bounds"])) if ent["target"] is not None else None
        )
        self.scaler = RewardScaler(self.n_envs, ppo["gamma"]) if ppo["reward_scaling"] else None
        self.buffer = RolloutBuffer(self.n_steps, self.n_envs, (self.num_replicas, self.n_features))

        self.update = 0
        self.global_step = 0
        self.bc_done = False
        self.wall_time = 0.0
        self.episode_index = [0] * self.n_envs
        self.episode_step = [0] * self.n_envs
        self.obs: list[np.ndarray] = [np.zeros((self.num_replicas, self.n_features), np.float32)] * self.n_envs
        self.ep_return = [0.0] * self.n_envs
        self.bc_metrics: list[dict[str, Any]] = []

    # ---- environments ---------------------------------------------------------------------
    def _check_spaces(self) -> tuple[int, int]:
        import gymnasium as gym

        env = self.envs[0]
        obs_space, act_space = env.observation_space, env.action_space
        if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 2:
            raise TypeError(f"env observation_space must be a 2-D Box (replicas, features), got {obs_space}")
        if not isinstance(act_space, gym.spaces.Discrete) or int(act_space.n) != obs_space.shape[0]:
            raise TypeError(f"env action_space must be Discrete(num_replicas={obs_space.shape[0]}), got {act_space}")
        for other in self.envs[1:]:
            if other.observation_space.shape != obs_space.shape:
                raise TypeError("all training envs must have the same observation shape")
        return int(obs_space.shape[0]), int(obs_space.shape[1])

    def _episode_seed(self, i: int) -> int:
        return self.cfg["seeds"]["train_start"] + i + self.n_envs * self.episode_index[i]

    def _start_episode(self, i: int) -> None:
        obs, _ = self.envs[i].reset(seed=self._episode_seed(i))
        self.obs[i] = np.asarray(obs, dtype=np.float32)
        self.episode_step[i] = 0
        self.ep_return[i] = 0.0

    def _restart_all(self) -> None:
        """Begin a fresh episode in every env, abandoning ones in progress (they take the next seed)."""
        for i in range(self.n_envs):
            if self.episode_step[i] > 0:
                self.episode_index[i] += 1
                if self.scaler is not None:
                    self.scaler.returns[i] = 0.0  # the abandoned episode's discounted return
            self._start_episode(i)

    def _step_env(self, i: int, action: int) -> tuple[float, bool, bool, np.ndarray | None, dict]:
        """Step env ``i``; on episode end start the next one. Returns (reward, term, trunc, final_obs, info)."""
        obs, reward, terminated, truncated, info = self.envs[i].step(action)
        reward = float(reward)
        if not math.isfinite(reward):
            raise FloatingPointError(f"env {i} returned a non-finite reward {reward} at PPO step {self.global_step}")
        self.episode_step[i] += 1
        self.ep_return[i] += reward
        final = None
        if terminated or truncated:
            final = np.asarray(obs, dtype=np.float32)
            self.episode_index[i] += 1
            self._start_episode(i)
        else:
            self.obs[i] = np.asarray(obs, dtype=np.float32)
        return reward, bool(terminated), bool(truncated), final, info

    def _obs_tensor(self) -> torch.Tensor:
        return self.policy.as_tensor(np.stack(self.obs))

    # ---- behaviour cloning ------------------------------------------------------------------
    def _collect_demos(self, heuristic: str, steps_per_env: int) -> _Demos:
        shape = (steps_per_env, self.n_envs)
        obs = torch.zeros(shape + (self.num_replicas, self.n_features))
        final_obs = torch.zeros_like(obs)
        actions = torch.zeros(shape, dtype=torch.long)
        rewards = torch.zeros(shape)
        term = torch.zeros(shape, dtype=torch.bool)
        trunc = torch.zeros(shape, dtype=torch.bool)
        self._restart_all()
        for t in range(steps_per_env):
            obs[t] = self._obs_tensor()
            for i, env in enumerate(self.envs):
                try:
                    a = int(env.unwrapped.heuristic_action(heuristic))
                except (ValueError, KeyError) as exc:
                    if t > 0:
                        raise
                    raise ConfigError(f"expected a heuristic the env knows, got {heuristic!r} ({exc})",
                                      source=self.source, path="bc.heuristics") from None
                actions[t, i] = a
                r, te, tr, final, _ = self._step_env(i, a)
                rewards[t, i], term[t, i], trunc[t, i] = r, te, tr
                if final is not None:
                    final_obs[t, i] = torch.from_numpy(final)
            if self.scaler is not None:
                rewards[t] = self.scaler(rewards[t], term[t] | trunc[t])
        return _Demos(obs, actions, rewards, term, trunc, final_obs, self._obs_tensor())

    @torch.no_grad()
    def _value_targets(self, demos: _Demos) -> torch.Tensor:
        """TD(lambda) targets for the demonstrations under the current critic (truncation bootstrapped)."""
        ppo = self.cfg["ppo"]
        T, E = demos.actions.shape
        flat = lambda x: x.reshape((T * E, self.num_replicas, self.n_features))  # noqa: E731
        values = self.policy.value(flat(demos.obs)).reshape(T, E)
        finals = self.policy.value(flat(demos.final_obs)).reshape(T, E)
        last = self.policy.value(demos.last_obs)
        _, returns = compute_gae(demos.rewards, values, demos.terminated, demos.truncated, last, finals, ppo["gamma"], ppo["gae_lambda"])
        return returns

    def behaviour_cloning(self) -> None:
        """Clone the configured heuristics (cross-entropy), optionally fitting the critic too."""
        bc, ppo = self.cfg["bc"], self.cfg["ppo"]
        t0 = time.perf_counter()
        per_heuristic = bc["demo_steps"] // len(bc["heuristics"])
        steps_per_env = max(1, per_heuristic // self.n_envs)
        blocks = []
        for h in bc["heuristics"]:
            _progress(f"[bc] collecting {steps_per_env * self.n_envs} demonstration steps from {h!r}", self.progress_on)
            blocks.append(self._collect_demos(h, steps_per_env))
        collect_time = time.perf_counter() - t0
        obs = torch.cat([b.obs.reshape((-1, self.num_replicas, self.n_features)) for b in blocks])
        actions = torch.cat([b.actions.reshape(-1) for b in blocks])
        optimizer = torch.optim.Adam(self.policy.parameters(), lr=bc["learning_rate"], eps=ppo["adam_eps"])
        for epoch in range(1, bc["epochs"] + 1):
            targets = torch.cat([self._value_targets(b).reshape(-1) for b in blocks]) if bc["value_pretrain"] else None
            sums = {"ce_loss": 0.0, "value_loss": 0.0, "accuracy": 0.0}
            n = 0
            for idx in minibatch_indices(len(actions), bc["minibatch_size"], self.shuffle_gen):
                logits = self.policy.logits(obs[idx])
                ce = torch.nn.functional.cross_entropy(logits, actions[idx])
                loss = ce
                vloss = torch.zeros(())
                if targets is not None:
                    vloss = 0.5 * ((self.policy.value(obs[idx]) - targets[idx]) ** 2).mean()
                    loss = loss + ppo["vf_coef"] * vloss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if ppo["max_grad_norm"] is not None:
                    torch.nn.utils.clip_grad_norm_(self.policy.parameters(), ppo["max_grad_norm"])
                optimizer.step()
                k = len(idx)
                sums["ce_loss"] += ce.item() * k
                sums["value_loss"] += vloss.item() * k
                sums["accuracy"] += (logits.argmax(-1) == actions[idx]).float().sum().item()
                n += k
            row = {"epoch": epoch, **{key: v / n for key, v in sums.items()}}
            if targets is not None:
                with torch.no_grad():
                    row["explained_variance"] = explained_variance(self.policy.value(obs), targets)
            self.bc_metrics.append(row)
            _progress(
                f"[bc] epoch {epoch}/{bc['epochs']} ce {row['ce_loss']:.4f} acc {row['accuracy']:.3f} value_loss {row['value_loss']:.4f}",
                self.progress_on,
            )
        self.reference = copy.deepcopy(self.policy).requires_grad_(False)
        self.bc_done = True
        self.wall_time += time.perf_counter() - t0
        _write_bc_csv(self.out_dir / "bc_metrics.csv", self.bc_metrics)
        atomic_save({**self.policy.to_checkpoint(), "kind": "bc_policy", "heuristics": bc["heuristics"]}, self.out_dir / "bc_policy.pt")
        _progress(f"[bc] done in {time.perf_counter() - t0:.1f}s (collection {collect_time:.1f}s)", self.progress_on)

    # ---- PPO ------------------------------------------------------------------------------
    def _collect_rollout(self) -> dict[str, Any]:
        """Fill the buffer with ``n_steps`` lockstep steps; return rollout statistics."""
        self.buffer.reset()
        t_policy = t_env = 0.0
        term_sums: dict[str, float] = {}
        term_counts: dict[str, int] = {}
        episode_returns: list[float] = []
        episode_lengths: list[int] = []
        raw_reward_sum = 0.0
        for _ in range(self.n_steps):
            t0 = time.perf_counter()
            obs = self._obs_tensor()
            step = self.policy.act(obs)
            t1 = time.perf_counter()
            t_policy += t1 - t0
            rewards = torch.zeros(self.n_envs)
            term = torch.zeros(self.n_envs, dtype=torch.bool)
            trunc = torch.zeros(self.n_envs, dtype=torch.bool)
            finals: dict[int, np.ndarray] = {}
            for i in range(self.n_envs):
                ep_ret, ep_len = self.ep_return[i], self.episode_step[i]
                r, te, tr, final, info = self._step_env(i, int(step.action[i]))
                rewards[i], term[i], trunc[i] = r, te, tr
                raw_reward_sum += r
                if final is not None:
                    episode_returns.append(ep_ret + r)
                    episode_lengths.append(ep_len + 1)
                    if tr and not te:
                        finals[i] = final
                for key, value in (info.get("reward_terms") or {}).items():
                    try:
                        v = float(np.mean(value))
                    except (TypeError, ValueError):
                        continue  # not a number: nothing to average
                    term_sums[key] = term_sums.get(key, 0.0) + v
                    term_counts[key] = term_counts.get(key, 0) + 1
            t2 = time.perf_counter()
            t_env += t2 - t1
            final_values = torch.zeros(self.n_envs)
            if finals:
                with torch.no_grad():
                    idx = sorted(finals)
                    final_values[idx] = self.policy.value(self.policy.as_tensor(np.stack([finals[i] for i in idx])))
            if self.scaler is not None:
                rewards = self.scaler(rewards, term | trunc)
            self.buffer.add(obs, step.action, step.log_prob, step.value, rewards, term, trunc, final_values)
            self.global_step += self.n_envs
            t_policy += time.perf_counter() - t2
        t0 = time.perf_counter()
        with torch.no_grad():
            last_values = self.policy.value(self._obs_tensor())
        self.buffer.compute_advantages(last_values, self.cfg["ppo"]["gamma"], self.cfg["ppo"]["gae_lambda"])
        t_policy += time.perf_counter() - t0
        return {
            "t_policy": t_policy,
            "t_env": t_env,
            "episode_returns": episode_returns,
            "episode_lengths": episode_lengths,
            "reward_terms": {k: term_sums[k] / term_counts[k] for k in term_sums},
            "reward_mean": raw_reward_sum / self.batch_size,
        }

    def _coefficients(self) -> dict[str, float]:
        ppo = self.cfg["ppo"]
        frac = 1.0 - self.update / max(self.num_updates, 1) if ppo["anneal_lr"] else 1.0
        ent = self.ent_schedule(self.global_step)
        if self.controller is not None and self.controller.mode == "coef":
            ent *= self.controller.scale
        return {"learning_rate": ppo["learning_rate"] * frac, "ent_coef": ent, "kl_coef": max(0.0, self.kl_schedule(self.global_step))}

    def ppo_iteration(self) -> dict[str, Any]:
        """One rollout plus one update; returns the metrics row."""
        ppo = self.cfg["ppo"]
        t_start = time.perf_counter()
        coefs = self._coefficients()
        for group in self.optimizer.param_groups:
            group["lr"] = coefs["learning_rate"]
        stats = self._collect_rollout()
        t0 = time.perf_counter()
        batch = self.buffer.batch()
        settings = UpdateSettings(
            n_epochs=ppo["n_epochs"], minibatch_size=ppo["minibatch_size"], clip_coef=ppo["clip_coef"],
            vf_coef=ppo["vf_coef"], ent_coef=coefs["ent_coef"], clip_value=ppo["clip_value"],
            max_grad_norm=ppo["max_grad_norm"], normalize_advantages=ppo["normalize_advantages"],
            target_kl=ppo["target_kl"], kl_coef=coefs["kl_coef"],
        )
        out = ppo_update(self.policy, self.optimizer, batch, settings, self.reference, self.shuffle_gen)
        ev = explained_variance(batch.values, batch.returns)
        if self.controller is not None:
            scale = self.controller.update(out["entropy"], self.num_replicas)
            if self.controller.mode == "temperature":
                self.policy.temperature = self.cfg["policy"]["temperature"] * scale
        t_update = time.perf_counter() - t0
        elapsed = time.perf_counter() - t_start
        self.wall_time += elapsed
        self.update += 1
        rets, lens = stats["episode_returns"], stats["episode_lengths"]
        row: dict[str, Any] = {
            "update": self.update,
            "global_step": self.global_step,
            "wall_time": round(self.wall_time, 3),
            "env_steps_per_s": self.batch_size / elapsed,
            "time_share_policy": stats["t_policy"] / elapsed,
            "time_share_env": stats["t_env"] / elapsed,
            "time_share_update": t_update / elapsed,
            **coefs,
            "temperature": self.policy.temperature,
            "entropy_scale": self.controller.scale if self.controller is not None else 1.0,
            **out,
            "entropy_norm": out["entropy"] / math.log(self.num_replicas) if self.num_replicas > 1 else float("nan"),
            "explained_variance": ev,
            "reward_mean": stats["reward_mean"],
            "reward_scale": self.scaler.std if self.scaler is not None else 1.0,
            "episodes": len(rets),
            "episode_return_mean": float(np.mean(rets)) if rets else float("nan"),
            "episode_length_mean": float(np.mean(lens)) if lens else float("nan"),
        }
        for i, share in enumerate(self.buffer.action_shares(self.num_replicas)):
            row[f"action_share/{i}"] = share
        for key, value in stats["reward_terms"].items():
            row[f"reward_terms/{key}"] = value
        return row

    # ---- checkpoints ------------------------------------------------------------------------
    def _composer_states(self) -> list[Any] | None:
        states = []
        for env in self.envs:
            composer = _env_composer(env)
            if composer is None or not hasattr(composer, "state_dict"):
                return None
            states.append(_plain(composer.state_dict()))
        return states

    def state(self) -> dict[str, Any]:
        """Everything needed to continue training exactly where it stopped."""
        return {
            "kind": "ppo_training",
            "config": self.cfg,
            **self.policy.to_checkpoint(),
            "optimizer": self.optimizer.state_dict(),
            "reference_state": self.reference.state_dict() if self.reference is not None else None,
            "update": self.update,
            "global_step": self.global_step,
            "bc_done": self.bc_done,
            "wall_time": self.wall_time,
            "episode_index": list(self.episode_index),
            "episode_step": list(self.episode_step),
            "torch_rng": torch.get_rng_state(),
            "shuffle_rng": self.shuffle_gen.get_state(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "controller": self.controller.state_dict() if self.controller is not None else None,
            "reward_composers": self._composer_states(),
            "bc_metrics": self.bc_metrics,
        }

    def save_checkpoint(self) -> Path:
        folder = self.out_dir / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"update_{self.update:06d}.pt"
        atomic_save(self.state(), path)
        keep = self.cfg["logging"]["keep_checkpoints"]
        found = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _CKPT_RE.match(p.name)))
        for _, old in found[:-keep]:
            old.unlink()
        return path

    def restore(self, ckpt: dict[str, Any]) -> None:
        """Load a checkpoint written by :meth:`state` (config compatibility checked by the caller)."""
        self.policy.load_state_dict(ckpt["policy_state"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        if ckpt["reference_state"] is not None:
            self.reference = copy.deepcopy(self.policy).requires_grad_(False)
            self.reference.load_state_dict(ckpt["reference_state"])
        self.update, self.global_step = int(ckpt["update"]), int(ckpt["global_step"])
        self.bc_done, self.wall_time = bool(ckpt["bc_done"]), float(ckpt["wall_time"])
        self.episode_index = [int(x) for x in ckpt["episode_index"]]
        self.episode_step = [int(x) for x in ckpt["episode_step"]]
        torch.set_rng_state(ckpt["torch_rng"])
        self.shuffle_gen.set_state(ckpt["shuffle_rng"])
        if self.scaler is not None and ckpt["scaler"] is not None:
            self.scaler.load_state_dict(ckpt["scaler"])
        if self.controller is not None and ckpt["controller"] is not None:
            self.controller.load_state_dict(ckpt["controller"])
        if ckpt.get("reward_composers") is not None:
            for env, state in zip(self.envs, ckpt["reward_composers"]):
                composer = _env_composer(env)
                if composer is not None and hasattr(composer, "load_state_dict"):
                    composer.load_state_dict(state)
        self.bc_metrics = list(ckpt.get("bc_metrics") or [])

    # ---- main loop --------------------------------------------------------------------------
    def run(self, log: MetricsLog) -> list[dict[str, Any]]:
        """BC (unless done), then PPO updates until ``total_timesteps``; checkpoints on the way."""
        if self.cfg["bc"]["enabled"] and not self.bc_done:
            self.behaviour_cloning()
            self.save_checkpoint()
        self._restart_all()
        every = self.cfg["logging"]["checkpoint_every"]
        rows: list[dict[str, Any]] = []
        start_update, t_run = self.update, time.perf_counter()
        while self.update < self.num_updates:
            row = self.ppo_iteration()
            rows.append(row)
            log.log(row, self.global_step)
            done_here = self.update - start_update
            eta = (time.perf_counter() - t_run) / done_here * (self.num_updates - self.update)
            _progress(
                f"[ppo] update {self.update}/{self.num_updates} step {self.global_step} "
                f"return {_fmt_return(row['episode_return_mean'])} entropy {row['entropy_norm']:.3f} kl {row['approx_kl']:.4f} "
                f"clip {row['clip_fraction']:.3f} ev {row['explained_variance']:.3f} sps {row['env_steps_per_s']:.0f} "
                f"eta {_fmt_duration(eta)}",
                self.progress_on,
            )
            if self.update % every == 0 or self.update == self.num_updates:
                self.save_checkpoint()
            if self.callback is not None:
                self.callback(row)
        return rows

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _env_composer(env: Any) -> Any:
    """The env's reward composer (``reward_composer`` or ``composer`` attribute), if it has one."""
    inner = env.unwrapped
    composer = getattr(inner, "reward_composer", None)
    return composer if composer is not None else getattr(inner, "composer", None)


def _write_bc_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    cols = list(dict.fromkeys(k for r in rows for k in r))
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=cols, restval="")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def train(
    config: str | os.PathLike | Mapping[str, Any],
    out_dir: str | os.PathLike,
    env_factory: EnvFactory | None = None,
    resume: bool = True,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Train a PPO router; resume from ``out_dir``'s latest checkpoint when ``resume`` is true.

    ``env_factory`` builds one environment per call (default: the Vidur env named by the
    config). ``callback(row)`` runs after each update and checkpoint; an exception it raises
    stops training (tests use it to simulate an interruption). With ``resume=False`` existing
    checkpoints in ``out_dir`` are deleted and training starts over.
    """
    cfg, source = load_config(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    factory = env_factory if env_factory is not None else vidur_env_factory(cfg, source)

    ckpt_path = latest_checkpoint(out)
    ckpt = None
    if ckpt_path is not None and resume:
        ckpt = load_checkpoint(ckpt_path)
        diffs = [d for d in _diff_paths(ckpt["config"], cfg) if not d.startswith(RESUMABLE_CHANGES)]
        if diffs:
            raise ConfigError(
                f"expected the same settings as the checkpoint {ckpt_path} to resume; differs at {', '.join(diffs)} "
                "(use another out_dir or resume=False)",
                source=source, path=diffs[0],
            )
    elif ckpt_path is not None:
        for p in (out / "checkpoints").iterdir():
            if _CKPT_RE.match(p.name):
                p.unlink()

    with open(out / "config.yaml", "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False)

    trainer = Trainer(cfg, source, out, factory, callback)
    log = None
    try:
        if ckpt is not None:
            trainer.restore(ckpt)
            _progress(f"[resume] {ckpt_path.name}: update {trainer.update}, step {trainer.global_step}", trainer.progress_on)
        tb_dir = out / "tensorboard" if cfg["logging"]["tensorboard"] else None
        log = MetricsLog(out / "metrics.csv", tb_dir, trainer.update if ckpt is not None else None,
                         trainer.global_step if ckpt is not None else None)
        trainer.run(log)
        final = trainer.save_checkpoint()
        policy_path = out / "policy.pt"
        atomic_save({**trainer.policy.to_checkpoint(), "kind": "policy", "update": trainer.update, "global_step": trainer.global_step}, policy_path)
        if cfg["logging"]["plots"] and log.rows:
            plot_learning_curves(out / "metrics.csv", out / "learning_curves.png")
        rows = [dict(r) for r in log.rows]
        return TrainResult(out, policy_path, final, trainer.update, trainer.global_step, rows, list(trainer.bc_metrics))
    finally:
        if log is not None:
            log.close()
        trainer.close()


# =================================================================================================
# Command line (wired into the ``rewardkit train`` subcommand by schedulers.cli)
# =================================================================================================


def add_train_arguments(parser: Any) -> None:
    """Add ``train``'s arguments to an argparse parser."""
    parser.add_argument("config", nargs="?", default="configs/ppo_vidur.yaml", help="training config YAML")
    parser.add_argument("--out", default=None, help="output folder (default: runs/<config name>)")
    parser.add_argument("--no-resume", action="store_true", help="start over even if out has checkpoints")


def train_command(args: Any) -> int:
    """Run :func:`train` from parsed arguments; print where the policy went; return an exit code."""
    from .vidur_profiles import VidurSetupError
    out = args.out or str(Path("runs") / Path(args.config).stem)
    try:
        result = train(args.config, out, resume=not args.no_resume)
    except (ConfigError, VidurSetupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"trained {result.updates} updates, {result.global_step} env steps; policy: {result.policy_path}")
    return 0
