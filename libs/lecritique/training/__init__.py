"""Trainers: the policy (token-normalised DPPO / PPO-clip) and the discriminative critic.

- :mod:`~lecritique.training.policy_loss`: pure loss functions and their configs;
- :mod:`~lecritique.training.collate`: trajectories -> aligned, right-padded tensors;
- :mod:`~lecritique.training.policy_trainer` / :mod:`~lecritique.training.critic_trainer`;
- :mod:`~lecritique.training.distributed`: torchrun / DDP helpers;
- :mod:`~lecritique.training.policy_worker`: the policy trainer's torchrun entry point.

Submodules import torch and transformers; import them directly.
"""
