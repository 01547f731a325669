"""``LiveRoutingEnv``: the Gymnasium interface of ``VidurRoutingEnv`` over real engines.

Each step routes one request of the episode to a live OpenAI-compatible engine (vLLM, SGLang, the
stub), in real time. ``reset(seed=s)`` draws the episode's arrivals and lengths exactly as the
simulator does for ``s`` (the env YAML's trace, ``qps`` and ``requests_per_episode``; lengths
times ``live.length_scale``, fitted to ``live.max_model_len``), waits for the first arrival and
returns its observation. ``step(action)`` sends that request to backend ``action`` (streamed,
``ignore_eos``, so it produces the drawn output length), waits until the next request arrives and
returns its observation. Requests are sent at their arrival times whatever the earlier ones are
doing (open loop, like the simulator and ``rewardkit loadgen``); a caller slower than the arrivals
sends late (``info["send_lag_s"]``).

Observation
    The rows of :func:`schedulers.routing.observation.build_observation` over the
    :class:`~schedulers.live.view.LiveClusterView` of the env's own in-flight requests: the same
    features, in the same order and units, as the simulator's (docs/serving.md says which are
    live and which estimated), so a policy trained in Vidur acts here unchanged.

Reward (per-request credit)
    The env YAML's ``reward_config`` must read only per-request keys (``ttft``, ``e2e``,
    ``prompt_tokens``, ``decode_tokens``; ``delay_caused`` is 0 live): it is evaluated when each
    request completes and credited to the decision that routed it, as
    ``VidurRoutingEnv.reward_credit == "request"`` does: ``info["credits"]`` lists ``(decision,
    reward)`` pairs and the step's reward is their sum. After the last decision the env waits for
    every request (at most ``live.timeout_s``) and the step ends the episode with ``truncated``, so
    every decision has its credit. A request that fails or times out is credited with the reward of
    a request whose TTFT and e2e are the timeout.

The engines are shared, real and noisy: two episodes with one seed send the same requests but
do not measure the same latencies.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from typing import Any, Coroutine, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rewardkit.errors import ConfigError

from ..routing.observation import build_observation, feature_names, observation_bounds
from ..shared.engine_client import EngineClient
from ..shared.engine_requests import RequestRecord, engine_http_client, request_body, send_request
from ..shared.episode_metrics import EpisodeMetrics
from ..shared.request_reward import credit_requests, load_reward_composer, reads_request_keys_only, request_context
from ..shared.requests import RequestSpec, build_requests, lengths_from_workload
from .config import LiveEnvConfig, load_live_env_config
from .view import LiveClusterView


class _LoopThread:
    """An asyncio event loop on a daemon thread: the env's HTTP client lives there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="live-env-loop", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class LiveRoutingEnv(gym.Env):
    """Route one live request per step over the env YAML's backends (see the module doc)."""

    metadata = {"render_modes": []}

    def __init__(self, env_config: LiveEnvConfig | str, reward_composer: Any = None, *, evaluate: bool = False,
                 compute_reward: bool = True, render_mode: str | None = None) -> None:
        super().__init__()
        if render_mode is not None:
            raise ValueError(f"LiveRoutingEnv has no render modes, got render_mode={render_mode!r}")
        cfg = env_config if isinstance(env_config, LiveEnvConfig) else load_live_env_config(env_config)
        self.env_config = cfg
        self.evaluate = evaluate  # episodes always end drained: every request answered or timed out
        self.num_replicas = cfg.num_replicas
        self.feature_names = feature_names(cfg.observation)
        self.action_space = spaces.Discrete(self.num_replicas)
        speeds = cfg.live.declared_speeds or (1.0,) * self.num_replicas
        low, high = observation_bounds(cfg.observation, cfg.workload.requests_per_episode, cfg.live.max_model_len,
                                       min(speeds))
        self.observation_space = spaces.Box(low=np.tile(low, (self.num_replicas, 1)),
                                            high=np.tile(high, (self.num_replicas, 1)), dtype=np.float32)
        self.composer, self.reward_source, self.reward_credit = None, None, "request"
        if compute_reward:
            self.composer, self.reward_source = load_reward_composer(reward_composer, cfg.workload)
            needed = getattr(self.composer, "context_keys", None)
            if callable(needed) and not reads_request_keys_only(needed()):
                raise ConfigError("expected a reward of per-request keys only (ttft, e2e, prompt_tokens, decode_tokens): "
                                  "a live cluster has no simulated step to describe", source=cfg.source,
                                  path="reward_config")
        self._loop = _LoopThread()
        self._client: EngineClient = self._loop.submit(self._make_client(cfg.live.timeout_s)).result()
        self._lock = threading.Lock()
        self._episode: dict[str, Any] | None = None

    @staticmethod
    async def _make_client(timeout_s: float) -> EngineClient:
        return engine_http_client(timeout_s)

    # ---- gymnasium API -------------------------------------------------------------------------
    @property
    def requests_per_episode(self) -> int:
        return self.env_config.workload.requests_per_episode

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._wait_all(self._episode)  # an abandoned episode's requests finish before new ones start
        episode_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        live, workload = self.env_config.live, self.env_config.workload
        shared = workload.shared_prefix  # the system prompt and history come in front of the fitted request
        budget = live.max_model_len - shared.prefix_tokens if shared is not None else live.max_model_len
        lengths = lengths_from_workload(workload, episode_seed).fitted(live.length_scale, budget)
        specs = build_requests(lengths, episode_seed, live.vocab_size, shared, live.max_model_len)
        view = LiveClusterView(self.num_replicas, live.declared_speeds, kv_capacity=live.kv_capacity_blocks)
        self._episode = {"seed": episode_seed, "specs": specs, "view": view, "next": 0, "futures": [],
                         "records": [], "credited": set(), "routed": np.zeros(self.num_replicas, dtype=np.int64),
                         "start": time.perf_counter(), "lag": 0.0}
        if self.composer is not None and hasattr(self.composer, "reset"):
            self.composer.reset()
        self._sleep_until(specs[0].arrival_s)
        return self._observation(), {"episode_seed": episode_seed, "decisions": 0}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        ep = self._episode
        if ep is None or ep["next"] >= len(ep["specs"]):
            raise RuntimeError("step() called before reset() or after the episode ended; call reset()")
        replica = self._check_action(action)
        spec: RequestSpec = ep["specs"][ep["next"]]
        lag = max(0.0, time.perf_counter() - ep["start"] - spec.arrival_s)
        ep["lag"] = max(ep["lag"], lag)
        self._send(ep, spec, replica)
        ep["next"] += 1
        last = ep["next"] >= len(ep["specs"])
        if last:
            # the state at the last decision, with no request pending (its features zero), as in Vidur
            obs = build_observation(self.snapshot(), 0, self.env_config.observation)
            self._wait_all(ep)
        else:
            self._sleep_until(ep["specs"][ep["next"]].arrival_s)
            obs = self._observation()
        info: dict[str, Any] = {"decisions": ep["next"], "send_lag_s": lag}
        reward = self._harvest(ep, info)
        return obs, reward, False, last, info

    def close(self) -> None:
        if getattr(self, "_loop", None) is None:
            return
        self._wait_all(self._episode)
        self._loop.submit(self._client.aclose()).result(timeout=10)
        self._loop.close()
        self._loop = None

    # ---- what policies read, and metrics ----------------------------------------------------------------
    @property
    def pending_prompt_tokens(self) -> int:
        """Prompt length of the request awaiting routing (0 when none)."""
        ep = self._episode
        return ep["specs"][ep["next"]].prompt_tokens if ep is not None and ep["next"] < len(ep["specs"]) else 0

    def snapshot(self) -> Any:
        """The live view of the replicas now, with the pending request's prefix match."""
        ep = self._require_episode()
        view: LiveClusterView = ep["view"]
        with self._lock:
            spec = ep["specs"][min(ep["next"], len(ep["specs"]) - 1)]
            return view.snapshot(spec.prompt_ids)

    def episode_metrics(self) -> EpisodeMetrics:
        """Latencies of the episode's answered requests, as ``VidurRoutingEnv.episode_metrics`` gives them."""
        ep = self._require_episode()
        records: list[RequestRecord] = list(ep["records"])
        done = [r for r in records if r.ok]
        ttft = np.array([(r.ttft_s if r.ttft_s is not None else r.e2e_s) + r.late_s for r in done])
        e2e = np.array([r.e2e_s + r.late_s for r in done])
        if done:
            ends = [r.arrival_s + r.late_s + r.e2e_s for r in done]
            makespan = max(ends) - ep["specs"][0].arrival_s
            throughput = len(done) / makespan if makespan > 0 else float("nan")
        else:
            makespan, throughput = 0.0, 0.0
        return EpisodeMetrics(seed=ep["seed"], num_requests=len(ep["specs"]), num_routed=ep["next"],
                              num_completed=len(done), e2e=e2e, ttft=ttft,
                              scheduling_delay=np.array([r.late_s for r in done]), throughput=float(throughput),
                              makespan=float(makespan), routed_per_replica=ep["routed"].copy())

    # ---- internals -----------------------------------------------------------------------------
    def _require_episode(self) -> dict[str, Any]:
        if self._episode is None:
            raise RuntimeError("call reset() first")
        return self._episode

    def _check_action(self, action: Any) -> int:
        try:
            replica = int(action)
        except (TypeError, ValueError):
            raise ValueError(f"action must be a replica index in [0, {self.num_replicas}), got {action!r}") from None
        if not 0 <= replica < self.num_replicas or replica != action:
            raise ValueError(f"action must be a replica index in [0, {self.num_replicas}), got {action!r}")
        return replica

    def _observation(self) -> np.ndarray:
        ep = self._require_episode()
        spec = ep["specs"][ep["next"]]
        return build_observation(self.snapshot(), spec.prompt_tokens, self.env_config.observation)

    def _sleep_until(self, arrival_s: float) -> None:
        delay = arrival_s - (time.perf_counter() - self._require_episode()["start"])
        if delay > 0:
            time.sleep(delay)

    def _send(self, ep: dict[str, Any], spec: RequestSpec, replica: int) -> None:
        live = self.env_config.live
        view: LiveClusterView = ep["view"]
        with self._lock:
            key = view.sent(replica, spec.prompt_tokens, spec.prompt_ids)
        ep["routed"][replica] += 1
        record = RequestRecord(spec.index, spec.arrival_s, spec.prompt_tokens, spec.output_tokens, replica=str(replica))
        body = request_body(spec, live.model, "completions", "ids", stream=True, ignore_eos=True)
        url = live.backends[replica] + "/v1/completions"

        def event(kind: str) -> None:  # runs on the loop thread
            with self._lock:
                if kind == "token":
                    view.token(key)
                else:
                    view.finished(key, completed=record.ok)

        async def run() -> RequestRecord:
            try:
                await asyncio.wait_for(send_request(self._client, url, body, record, ep["start"], event), live.timeout_s)
            except asyncio.TimeoutError:
                record.error = f"timeout after {live.timeout_s:g} s"
                with self._lock:
                    view.finished(key, completed=False)
            return record

        ep["futures"].append(self._loop.submit(run()))
        ep["records"].append(record)

    def _wait_all(self, ep: dict[str, Any] | None) -> None:
        if ep is None:
            return
        for future in ep["futures"]:
            try:
                future.result(timeout=self.env_config.live.timeout_s + 30)
            except Exception:  # noqa: BLE001 - a request that failed is recorded as failed
                future.cancel()

    def _harvest(self, ep: dict[str, Any], info: dict[str, Any]) -> float:
        """Credit every request that finished since the last harvest (``info["credits"]``); their sum."""
        finished: list[tuple[int, RequestRecord]] = []
        for decision, (future, record) in enumerate(zip(ep["futures"], ep["records"], strict=True)):
            if decision in ep["credited"] or not future.done():
                continue
            ep["credited"].add(decision)
            finished.append((decision, record))
        return self.credit_records(finished, info)

    def credit_records(self, finished: list[tuple[int, RequestRecord]], info: dict[str, Any]) -> float:
        """Reward each finished request and credit its decision (``info["credits"]``); the rewards' sum.

        A request's TTFT and e2e count from its arrival (a caller that sent it late pays for it); a
        failed or timed-out one is rewarded as if both were the timeout.
        """
        if self.composer is None:
            info["credits"] = []
            return 0.0
        timeout = self.env_config.live.timeout_s
        contexts = []
        for decision, r in finished:
            if r.ok:
                ttft = (r.ttft_s if r.ttft_s is not None else r.e2e_s) + r.late_s
                ctx = request_context(ttft, r.e2e_s + r.late_s, r.prompt_tokens, r.output_tokens)
            else:
                ctx = request_context(timeout, timeout, r.prompt_tokens, 0)
            contexts.append((decision, ctx))
        return credit_requests(self.composer, contexts, info)
