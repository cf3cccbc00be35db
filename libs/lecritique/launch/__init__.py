"""Launchers: run an experiment's services as local processes or as Kubernetes workloads."""
