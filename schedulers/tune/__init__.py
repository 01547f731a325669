"""Tuning reward configs against the trained router's serving metrics (the Vidur objective of ``rewardkit optimize``)."""
