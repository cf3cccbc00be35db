"""The tiny policy a spec names, built before a command that runs the spec starts.

A spec may name its policy by a path or by a tiny build (``policy.tiny``); the services load a
path. The commands that run a spec on this machine (``lecritique run``, ``lecritique critic
pretrain``, the pipeline benchmark) build the tiny model first (cached) and pass the path on.
"""

from __future__ import annotations

from pathlib import Path

from lecritique.config.experiment import ExperimentSpec


def with_tiny_policy_built(spec: ExperimentSpec, cache_dir: Path | None = None) -> ExperimentSpec:
    """Build (or take from the cache) the tiny model a spec names; return the spec with its path."""
    if spec.policy.path is not None:
        return spec
    from lecritique.tinybuild import build_tiny

    assert spec.policy.tiny is not None
    path = build_tiny(spec.policy.tiny, seed=spec.seed, cache_dir=cache_dir)
    return spec.model_copy(
        update={"policy": spec.policy.model_copy(update={"path": str(path), "tiny": None})}
    )
