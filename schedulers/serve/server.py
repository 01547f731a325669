"""Serving the gateway: connections bounded in number and in how long their headers may take, and a
drain at SIGTERM that ends every request with an answer.

uvicorn alone keeps a half-sent request open for good and accepts any number of them (1,500 stayed
open in a probe): :func:`guarded_protocol` closes a connection whose request headers have
not arrived within ``header_timeout_s`` and refuses connections past ``max_connections``. At SIGTERM
uvicorn waits its graceful timeout and then cancels what still runs (tracebacks, plain-text 500s,
lost decisions); :func:`draining_server` first starts the gateway's own drain, which ends every
request still running at ``drain_s`` with an error answer and logs its decision, and gives uvicorn
a little longer than that.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

#: seconds uvicorn waits past the drain before cancelling (the gateway's own ends come first)
DRAIN_MARGIN_S = 3.0


def guarded_protocol(base: type, header_timeout_s: float, max_connections: int) -> type:
    """A subclass of uvicorn's HTTP protocol ``base`` with a header deadline and a connection cap.

    A connection is idle from its opening and from the end of each answer until its next request's
    headers have arrived (uvicorn then starts a new request cycle). One sweep every
    ``header_timeout_s / 2`` closes connections idle for longer than ``header_timeout_s``: a
    per-request timer would cost every request a timer; the sweep costs each request one clock read.
    """
    warned: list[bool] = []
    sweeping: list[bool] = []

    class Guarded(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                if not warned:
                    warned.append(True)
                    print(f"rewardkit gateway: more than {max_connections} connections (--max-connections); "
                          "new ones are closed until some end", file=sys.stderr)
                transport.close()
                return
            self._idle_cycle, self._idle_since = self.cycle, self.loop.time()
            if not sweeping:
                sweeping.append(True)
                self.loop.call_later(header_timeout_s / 2, _sweep, self.loop, self.connections)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._idle_cycle, self._idle_since = self.cycle, self.loop.time()

        def waiting_too_long(self, now: float) -> bool:
            """No request's headers since the connection went idle more than ``header_timeout_s`` ago."""
            idle_since = getattr(self, "_idle_since", None)
            return (idle_since is not None and self.cycle is self._idle_cycle
                    and (self.cycle is None or self.cycle.response_complete) and now - idle_since > header_timeout_s)

    def _sweep(loop: Any, connections: set) -> None:
        now = loop.time()
        for conn in list(connections):
            if isinstance(conn, Guarded) and conn.waiting_too_long(now) and not conn.transport.is_closing():
                conn.transport.close()
        loop.call_later(header_timeout_s / 2, _sweep, loop, connections)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


def serve(app: Any, host: str, port: int, *, drain_s: float, header_timeout_s: float, max_connections: int,
          on_drain: Callable[[float], None]) -> None:
    """Serve ``app`` until SIGTERM/SIGINT; then ``on_drain(drain_s)`` and a graceful stop."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=drain_s + DRAIN_MARGIN_S)
    config.load()
    config.http_protocol_class = guarded_protocol(config.http_protocol_class, header_timeout_s, max_connections)
    draining_server(config, lambda: on_drain(drain_s)).run()


def draining_server(config: Any, on_exit: Callable[[], None]) -> Any:
    """A uvicorn server that calls ``on_exit`` at the first exit signal, before its graceful stop."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            first = not self.should_exit
            super().handle_exit(sig, frame)
            if first:
                on_exit()

    return DrainingServer(config)
