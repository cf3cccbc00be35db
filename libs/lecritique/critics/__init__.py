"""Critic inputs: privileged context builders and (later) critic kinds behind ``Evaluate``."""
