"""Learning (torch): the permutation-equivariant policy, the rollout buffer with GAE, PPO losses and update, behaviour cloning, the PPO router."""
