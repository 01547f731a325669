"""Reward configs and rows for ``rewardkit stress``: seeded loopholes and honest rewards.

Used by benchmarks/bench_stress.py and docs/stress.md.
"""
