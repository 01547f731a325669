"""The ground floor both halves stand on: what the simulator and the live cluster share. Imports
nothing above it (``schedulers.paths`` and ``schedulers.bounds`` only), nor Vidur, pandas or torch.

- :mod:`~schedulers.shared.workload`: ``Workload``, the simulator-free part of any env YAML
  (trace, rate, requests, lengths, observation settings, reward config), and its checks;
  :mod:`~schedulers.shared.observation_config`: ``ObservationConfig``, the observation section.
- :mod:`~schedulers.shared.trace`: the one trace reader; :mod:`~schedulers.shared.arrivals`: the
  one capped Poisson loop, the one length fitting and Vidur's shuffle (``sample_arrivals``);
  :mod:`~schedulers.shared.requests`: lengths and prompts of a workload's requests.
- :mod:`~schedulers.shared.request_reward`: the per-request reward context (one builder),
  crediting each request to its decision, loading the reward config.
- :mod:`~schedulers.shared.episode_metrics`: ``EpisodeMetrics`` of a simulated or live episode.
- The engine protocol: :mod:`~schedulers.shared.engine_client` (``EngineClient``, the one HTTP client
  to engines), :mod:`~schedulers.shared.engine_requests` (OpenAI-compatible request bodies, one
  request sent and measured, ``RequestRecord``, the replica header), :mod:`~schedulers.shared.sse` (the one server-sent-event
  splitter and token rule), :mod:`~schedulers.shared.prometheus` (the ``/metrics`` parser).
"""
