"""Rewards with a known loophole, and honest ones, trained with GRPO to measure rewardkit's monitor."""
