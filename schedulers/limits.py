"""Bounds on settings that could otherwise hang a run or allocate without end, checked before any work.

Each bound is far beyond what a real setup needs (the benchmark clusters have 4-8 replicas, 64-wide
layers, 25 evaluation seeds) and far below what makes a run hang or exhaust memory: a replica slowed
to 5e-324 of its speed never finishes a batch; 10^8 replicas or 200,000-wide layers allocate
gigabytes before anything fails. docs/configuration.md ("Limits") lists them with their messages.
"""

from __future__ import annotations

#: replicas in one simulated or live cluster.
MAX_REPLICAS = 256
#: the slowest speed multiplier a slowdown may set, and the range of a replica group's declared speed.
MIN_SPEED = 0.01
MAX_SPEED = 100.0
#: Poisson arrival rates (requests per simulated second).
MIN_QPS = 1e-3
MAX_QPS = 1e5
#: the random slowdown process: shortest mean time between slowdowns and shortest slowdown (s).
MIN_SLOWDOWN_INTERVAL_S = 1.0
MIN_SLOWDOWN_DURATION_S = 0.1
#: policy networks: width of a layer, layers per stack, observation features.
MAX_HIDDEN_SIZE = 4096
MAX_LAYERS = 8
MAX_FEATURES = 256
#: PPO rollouts: environments in lockstep, and one rollout's samples (n_envs x n_steps).
MAX_ENVS = 256
MAX_ROLLOUT_SAMPLES = 1_000_000
#: evaluation seeds one command runs (``--seeds``).
MAX_EVAL_SEEDS = 10_000
#: a checkpoint file read by training resume or by the PPO router.
MAX_CHECKPOINT_BYTES = 512 * 1024 * 1024
