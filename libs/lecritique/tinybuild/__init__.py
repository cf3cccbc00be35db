"""Tiny CPU policies built for tests and demos: a character tokenizer, a ~0.5M-parameter Llama, a supervised warm start.

``build_tiny(TinyBuildConfig(task="sudoku-mini"))`` trains on the environment's demonstrations
(SFT targets ``action + EOS``, loss on action tokens only, contexts rendered with the plain
template over the previous turns) until a validation success rate reaches the task's
``stop_at_success`` — RL needs a policy that sometimes succeeds and has room to improve — or the
step budget runs out. Success is measured with real episodes through ``env.reset``/``env.step``.

Builds are deterministic from the seed on a given machine and cached under
``$LECRITIQUE_CACHE/tiny/<hash>`` (default ``~/.cache/lecritique/tiny``), keyed by a hash of the
full build config and the source of the code that produces the model. A build has no wall-clock
limit unless one is asked for (``max_minutes``); one cut short by it depends on the machine's speed,
so it raises :class:`TinyBuildCut` and is neither cached nor handed out.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lecritique.tinybuild.build import (
        TinyBuildCut,
        build_tiny,
        build_tiny_model,
        default_cache_dir,
        describe_build,
        load_build_report,
    )
    from lecritique.tinybuild.config import TINY_TASKS, TinyBuild, TinyBuildConfig, TinyTask

_LAZY = {
    **dict.fromkeys(
        ("TINY_TASKS", "TinyBuild", "TinyBuildConfig", "TinyTask"), "lecritique.tinybuild.config"
    ),
    **dict.fromkeys(
        (
            "TinyBuildCut",
            "build_tiny",
            "build_tiny_model",
            "default_cache_dir",
            "describe_build",
            "load_build_report",
        ),
        "lecritique.tinybuild.build",
    ),
}
"""Each name of the package -> its module, imported when first used: both import torch and
transformers (3 s, through the tiny architecture), which ``lecritique run`` into a finished folder
and the study's planner, reading only :mod:`.identity`, never need."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TINY_TASKS",
    "TinyBuild",
    "TinyBuildConfig",
    "TinyBuildCut",
    "TinyTask",
    "build_tiny",
    "build_tiny_model",
    "default_cache_dir",
    "describe_build",
    "load_build_report",
]
