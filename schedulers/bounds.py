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
#: factors on a trace's request lengths (simulated and live workloads).
MIN_LENGTH_SCALE = 1e-4
MAX_LENGTH_SCALE = 100.0
#: KV-cache blocks per simulated replica when an env YAML sets them (``kv_blocks``).
MAX_KV_BLOCKS = 100_000_000
#: a shared-prefix workload's system prompts and multi-turn conversations (``shared_prefix``).
MAX_PREFIX_GROUPS = 100_000
MAX_PREFIX_SESSIONS = 1_000_000
#: tokens of one shared system prompt.
MAX_PREFIX_TOKENS = 32_768
#: a shared-prefix workload's system prompts in all (groups x prefix_tokens), and the prompt tokens
#: one simulated episode's requests may hold (requests_per_episode x max_tokens): prompts are
#: token-id tuples in memory, built as requests use them.
MAX_PREFIX_TOTAL_TOKENS = 10_000_000
MAX_PREFIX_EPISODE_TOKENS = 50_000_000
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
#: seeds (Vidur's arrivals shuffle with pandas, which takes 32-bit seeds): evaluation seeds, and every
#: training episode's seed (``seeds.train_start`` onwards).
MAX_SEED = 2**32 - 1
#: evaluation seeds one command runs (``--seeds``), or a training config lists (``seeds.eval``).
MAX_EVAL_SEEDS = 10_000
#: observation scales and windows: a smaller one divides a count or a time into inf.
MIN_OBSERVATION_SCALE = 1e-3
#: GPUs per replica (tensor parallel x pipeline stages), each at most this.
MAX_PARALLEL = 64
#: Vidur's execution-time predictor: the largest request (tokens) and prefill chunk its tables cover, the
#: largest batch, and its random-forest grid (trees, depth, values per grid key, cross-validation folds).
MAX_PREDICTION_TOKENS = 32_768
MAX_PREDICTION_BATCH = 1_024
MAX_FOREST_TREES = 5_000
MAX_FOREST_DEPTH = 1_000
MAX_GRID_VALUES = 16
MAX_CV_SPLITS = 100
#: training: torch threads, behaviour-cloning demonstration steps.
MAX_TORCH_THREADS = 256
MAX_DEMO_STEPS = 1_000_000
#: a checkpoint file read by training resume or by the PPO router.
MAX_CHECKPOINT_BYTES = 512 * 1024 * 1024
