"""Learning (torch): the permutation-equivariant policy, the rollout buffer with GAE, PPO, behaviour cloning, the PPO router."""
