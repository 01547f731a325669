"""Routing without a simulator: the replica snapshot, observations, heuristics and the ``Router`` protocol (NumPy only)."""
