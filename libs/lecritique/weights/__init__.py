"""Versioned weight store shared by trainers (publishers) and servers (readers)."""

from lecritique.weights.store import WeightStore, WriteFn, version_dirname

__all__ = ["WeightStore", "WriteFn", "version_dirname"]
