"""``rewardkit gateway``: an OpenAI-compatible proxy routing requests over N engines (extra ``serve``).

- :mod:`schedulers.serve.gateway`: the ASGI app, its routing, faults, metrics and decision log;
- :mod:`schedulers.serve.cli`: the command.
"""
