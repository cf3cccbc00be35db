"""Trainers: the policy (token-normalised DPPO / PPO-clip) and the discriminative critic.

- :mod:`~lecritique.training.policy_loss`: pure loss functions and their configs;
- :mod:`~lecritique.training.collate`: trajectories -> aligned tensors, right-padded or packed;
- :mod:`~lecritique.training.packing`: rows end to end in the lines of a micro-batch, attention kept inside each row;
- :mod:`~lecritique.training.validation`: trajectories checked before anything is computed;
- :mod:`~lecritique.training.policy_trainer` / :mod:`~lecritique.training.critic_trainer`;
- :mod:`~lecritique.training.distributed`: torchrun / DDP helpers;
- :mod:`~lecritique.training.policy_worker`: the policy trainer's torchrun entry point.

Submodules import torch and transformers; import them directly.
"""
