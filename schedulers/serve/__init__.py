"""``rewardkit gateway``: an OpenAI-compatible proxy routing requests over N engines (extra ``serve``).

- :mod:`schedulers.serve.gateway`: ``Gateway``, the routing state (live view, policy, engine client,
  health and scrapes, metrics, decision log);
- :mod:`schedulers.serve.app`: the HTTP handlers, holding the gateway by composition, and the ASGI app;
- :mod:`schedulers.serve.attempt`: one request on one replica, against the
  :mod:`~schedulers.serve.ledger` (what an attempt reads and writes);
- :mod:`schedulers.serve.access`, :mod:`~schedulers.serve.deadlines`, :mod:`~schedulers.serve.request_body`,
  :mod:`~schedulers.serve.settings`, :mod:`~schedulers.serve.server` (uvicorn, the drain);
- :mod:`schedulers.serve.cli`: the command.
"""
