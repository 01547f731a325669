"""Training runs: the training config schema, the trainer, checkpoints, metrics logs and learning-curve plots."""
