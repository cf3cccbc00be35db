"""The tiny policy a spec names, built before a command that runs the spec starts.

A spec may name its policy by a path or by a tiny build (``policy.tiny``); the services load a
path. The commands that run a spec on this machine (``lecritique run``, ``lecritique critic
pretrain``, the pipeline benchmark) build the tiny model first (cached) and pass the path on.
A build has no wall-clock limit here: a model cut short by a busy machine would be another
experiment (``tinybuild.TinyBuildCut``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lecritique.config.experiment import ExperimentSpec


def with_tiny_policy_built(
    spec: ExperimentSpec, cache_dir: Path | None = None, say: Callable[[str], None] | None = None
) -> ExperimentSpec:
    """Build (or take from the cache) the tiny model a spec names; return the spec with its path.

    ``say`` hears one line on what happened (from the cache or built now, steps, held-out success)."""
    if spec.policy.path is not None:
        return spec
    from lecritique.tinybuild import build_tiny_model, describe_build

    assert spec.policy.tiny is not None
    build = build_tiny_model(spec.policy.tiny, seed=spec.seed, cache_dir=cache_dir)
    if say is not None:
        say(describe_build(build))
    return spec.model_copy(
        update={"policy": spec.policy.model_copy(update={"path": str(build.path), "tiny": None})}
    )
