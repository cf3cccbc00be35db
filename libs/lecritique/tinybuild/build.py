"""Tiny builds on disk: the cache keyed by config and code, copies out of it, the report."""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lecritique.envs import get_environment
from lecritique.envs.base import Environment
from lecritique.episodes import local, player, record
from lecritique.models import char_tokenizer, templates, tiny_arch
from lecritique.tinybuild import config as config_module
from lecritique.tinybuild import warmstart
from lecritique.tinybuild.config import TinyBuild, TinyBuildConfig

logger = logging.getLogger(__name__)

BUILDER_VERSION = 1
"""Bump to invalidate every cached build (the code hash already covers source changes)."""
REPORT_FILE = "build_report.json"
CONFIG_FILE = "build_config.json"


def default_cache_dir() -> Path:
    """``$LECRITIQUE_CACHE/tiny``, by default ``~/.cache/lecritique/tiny``."""
    base = os.environ.get("LECRITIQUE_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "lecritique"
    return root / "tiny"


def load_build_report(model_dir: str | Path) -> dict[str, Any]:
    """The ``build_report.json`` of a tiny-model directory."""
    report: dict[str, Any] = json.loads((Path(model_dir) / REPORT_FILE).read_text())
    return report


def code_version(environment: Environment) -> str:
    """Hash of the source of everything that shapes a build, the environment's module included."""
    digest = hashlib.sha256(str(BUILDER_VERSION).encode())
    modules = [
        sys.modules[__name__],
        config_module,
        warmstart,
        char_tokenizer,
        templates,
        tiny_arch,
        player,
        record,
        local,
        inspect.getmodule(type(environment)),
    ]
    for module in modules:
        if module is not None:
            digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()[:16]


def build_hash(config: TinyBuildConfig, environment: Environment) -> str:
    resolved = config.resolved()
    keyed = resolved.model_dump(exclude={"max_minutes"})
    keyed["tiny_task"] = resolved.tiny_task().model_dump()
    keyed["code_version"] = code_version(environment)
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:20]


def build_tiny(
    task: str | TinyBuildConfig,
    *,
    seed: int | None = None,
    cache_dir: str | Path | None = None,
    out: str | Path | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> Path:
    """The directory of the tiny model for ``task`` (a ``TINY_TASKS`` name or a full config).

    Built on first use and cached; ``seed`` overrides the config's seed; ``out`` receives a copy
    (an existing directory holding anything else is replaced only with ``force``). The build's
    measurements are in ``build_report.json`` of the returned directory.
    """
    return build_tiny_model(
        task, seed=seed, cache_dir=cache_dir, out=out, force=force, show_progress=show_progress
    ).path


def build_tiny_model(
    task: str | TinyBuildConfig,
    *,
    seed: int | None = None,
    cache_dir: str | Path | None = None,
    out: str | Path | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> TinyBuild:
    """Like :func:`build_tiny`, also saying whether the cache served it."""
    config = TinyBuildConfig(task=task) if isinstance(task, str) else task
    if seed is not None:
        config = config.model_copy(update={"seed": seed})
    config = config.resolved()
    tiny_task = config.tiny_task()
    environment = get_environment(tiny_task.environment, **tiny_task.environment_config)
    key = build_hash(config, environment)
    cached_dir = Path(cache_dir) / key if cache_dir is not None else default_cache_dir() / key
    if (cached_dir / REPORT_FILE).is_file():
        logger.info("tiny model %s found in cache %s", config.task, cached_dir)
        build = TinyBuild(cached_dir, load_build_report(cached_dir), cached=True)
    else:
        build = _train_and_store(config, environment, key, cached_dir, show_progress)
    if out is None:
        return build
    return TinyBuild(_copy_out(build.path, Path(out), key, force), build.report, build.cached)


def describe_build(build: TinyBuild) -> str:
    """One line on what a build call did: taken from the cache or built now, and what the model is."""
    report = build.report
    evaluation = report.get("eval", {})
    how = (
        "taken from the cache" if build.cached else f"built in {report.get('train_seconds', 0):.0f} s, cached"
    )
    return (
        f"tiny policy {report.get('task')!r} (seed {report.get('seed')}): {how}; "
        f"{report.get('steps')} steps ({report.get('stopped_because')}), held-out success greedy "
        f"{evaluation.get('greedy_success', float('nan')):.1%} / sampled "
        f"{evaluation.get('sampled_success', float('nan')):.1%} on {evaluation.get('tasks')} tasks; {build.path}"
    )


def _copy_out(source: Path, out: Path, key: str, force: bool) -> Path:
    if out.exists() and any(out.iterdir()):
        existing = out / REPORT_FILE
        if existing.is_file() and json.loads(existing.read_text()).get("hash") == key:
            return out
        if not force:
            raise FileExistsError(
                f"output directory {out} exists and holds something else; pass --force to replace it"
            )
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, out, dirs_exist_ok=True)
    return out


def _train_and_store(
    config: TinyBuildConfig, environment: Environment, key: str, cached_dir: Path, show_progress: bool
) -> TinyBuild:
    cached_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=cached_dir.parent))
    try:
        report = warmstart.train(config, environment, staging, show_progress)
        report["code_version"] = code_version(environment)
        report["hash"] = key
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
        (staging / CONFIG_FILE).write_text(config.model_dump_json(indent=2) + "\n")
        if report["stopped_because"] == "time":
            _remove_stale_uncached(cached_dir.parent)
            raise TinyBuildCut(cut_message(config, report))
        try:
            staging.rename(cached_dir)
        except OSError:
            # Another process finished the same build first; both are equivalent, keep theirs.
            shutil.rmtree(staging, ignore_errors=True)
        return TinyBuild(cached_dir, report, cached=False)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


class TinyBuildCut(RuntimeError):
    """A build stopped by its ``max_minutes`` limit: a model that depends on the machine's speed,
    so it is neither cached nor handed out (a run started from it would be another experiment)."""


def cut_message(config: TinyBuildConfig, report: dict[str, Any]) -> str:
    """What a cut build says: where it stopped and the setting that gives it time."""
    history = report.get("history") or [{}]
    validation = history[-1].get("validation_success")
    measured = f", validation success {validation:.1%}" if validation is not None else ""
    return (
        f"tiny build {config.task!r} (seed {config.seed}) was cut by its {config.max_minutes:g}-minute limit "
        f"at step {report['steps']} of {config.max_steps}{measured}: not cached and not used. "
        "Build it without a limit (the default; `lecritique models build-tiny` without --minutes) "
        "or with a larger --minutes."
    )


def _remove_stale_uncached(root: Path, max_age_seconds: float = 86400.0) -> None:
    """Delete day-old cut builds that earlier versions left (handed out, never cached)."""
    now = time.time()
    for entry in root.glob(".uncached-*"):
        if now - entry.stat().st_mtime > max_age_seconds:
            shutil.rmtree(entry, ignore_errors=True)
