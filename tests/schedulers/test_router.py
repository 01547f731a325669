"""``make_router`` and ``register_router``: heuristic routers by name and registered factories."""

from __future__ import annotations

import pytest


def test_make_router_hook():
    from schedulers.routing.router import HeuristicRouter, Router, make_router, register_router, router_names

    router = make_router("least_tokens")
    assert isinstance(router, HeuristicRouter) and isinstance(router, Router)
    assert "ppo" in router_names()

    class Fixed:
        name = "fixed"

        def __init__(self, replica):
            self.replica = replica

        def reset(self, seed=None):
            pass

        def act(self, obs, env):
            return self.replica

    register_router("fixed_test", Fixed, replace=True)
    assert make_router("fixed_test", replica=1).act(None, None) == 1
    with pytest.raises(ValueError, match="unknown router 'nope'"):
        make_router("nope")
    with pytest.raises(TypeError, match="takes no options"):
        make_router("jsq", checkpoint="x")
