"""The actor of a trained :class:`~.scorer_network.ReplicaScorerPolicy` in NumPy, for arg-max routing.

A deterministic router needs only the replicas' scores: no critic, no distribution, no autograd
bookkeeping. One routing decision is a handful of small matrix products, for which torch's
per-call overhead is most of the cost (a few hundred microseconds per decision against tens
here). The weights are copied once, as float32, so the scores are torch's to rounding; the pick is
the arg-max, lowest index on ties, as :meth:`ReplicaScorerPolicy.act` takes it.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

#: activations NumPy computes as torch does (GELU's exact erf form has no NumPy counterpart)
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, np.float32(0.0)),
}


class NumpyScorer:
    """Per-replica scores of an observation ``(replicas, features)`` with a policy's actor weights."""

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray]], activation: str,
                 head: tuple[np.ndarray, np.ndarray], linear: tuple[np.ndarray, np.ndarray] | None) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation: expected one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.layers = [(np.ascontiguousarray(w.T, dtype=np.float32), b.astype(np.float32)) for w, b in layers]
        self.activation = ACTIVATIONS[activation]
        self.head = (np.ascontiguousarray(head[0].T, dtype=np.float32), head[1].astype(np.float32))
        self.linear = None if linear is None else (np.ascontiguousarray(linear[0].T, dtype=np.float32),
                                                   linear[1].astype(np.float32))
        self.n_features = self.layers[0][0].shape[0]

    @classmethod
    def supports(cls, activation: str) -> bool:
        """Whether a policy with this activation can be scored here."""
        return activation in ACTIVATIONS

    @classmethod
    def from_policy(cls, policy: Any) -> "NumpyScorer":
        """The actor of a ``ReplicaScorerPolicy`` (its ``actor_encoder``, ``score_head`` and ``linear_score``)."""
        def arrays(layer: Any) -> tuple[np.ndarray, np.ndarray]:
            return layer.weight.detach().cpu().numpy(), layer.bias.detach().cpu().numpy()

        linears = [m for m in policy.actor_encoder if hasattr(m, "weight")]
        linear = arrays(policy.linear_score) if policy.linear_score is not None else None
        return cls([arrays(m) for m in linears], policy.kwargs["activation"], arrays(policy.score_head), linear)

    def scores(self, rows: Any) -> np.ndarray:
        """Untempered scores, one per row; NaN or infinite rows raise as the torch policy's do."""
        x = np.asarray(rows, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"observation must be (replicas, {self.n_features}), got shape {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError("observation contains NaN or infinite values")
        h = x
        for weight, bias in self.layers:
            h = self.activation(h @ weight + bias)
        out = h @ self.head[0] + self.head[1]
        if self.linear is not None:
            out = out + (x @ self.linear[0] + self.linear[1])
        return out[:, 0]

    def pick(self, rows: Any) -> int:
        """The arg-max replica (lowest index on ties)."""
        return int(np.argmax(self.scores(rows)))
