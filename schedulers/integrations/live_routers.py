"""The request routers alive in this process, so an ingress can reach the one its handle uses.

It lives outside :mod:`schedulers.integrations.ray_serve` on purpose: Ray Serve pickles a custom
router's module (its package) *by value* when a deployment names it, so in the process that runs
the router, that package's module globals are copies; this module is imported by reference and
so is one object for the ingress and the router.
"""

from __future__ import annotations

import weakref
from typing import Any

#: every live router (they add themselves); each has ``first_token(key, tokens)`` and ``stats()``
ROUTERS: "weakref.WeakSet[Any]" = weakref.WeakSet()
