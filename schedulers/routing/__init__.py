"""Routing without a simulator: the replica snapshot, observations, the ``Policy`` seam and its registry,
and the built-in policies (NumPy only)."""
