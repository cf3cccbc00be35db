"""Staging a Hugging Face model folder into the weight volume: ``<root>/models/<tenant>/<name>``.

The API lets a tenant's ``policy.path`` (and other model paths) lie under ``<models_root>/<tenant>``
(``/weights/models/<tenant>`` in the chart), so a model must be copied there before a spec can
name it. The copy is checked first (a ``config.json`` that is a JSON object with a ``model_type``,
weight files, and every shard a ``*.index.json`` names) and lands atomically: it is written to a
hidden folder beside the target and renamed into place, so a pod never loads a half-copied model
and an interrupted copy leaves only a ``.staging-*`` folder behind. Symbolic links are followed
(a Hugging Face cache's snapshot folder links to its blobs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
"""Files that hold weights, as ``save_pretrained`` writes them."""
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
"""Indexes of sharded weights: every file their ``weight_map`` names must be there."""
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A staged model's folder name, and the tenant's (one path component; the CLI also checks that the
tenant is a tenant name)."""


class StagingError(ValueError):
    """The source is not a model folder, or the target cannot be written; the message says which."""


@dataclass(frozen=True)
class StagedModel:
    path: Path
    """The model's folder on the weight volume (what a spec's ``policy.path`` names)."""
    files: int
    bytes: int


def check_model_folder(source: Path) -> list[Path]:
    """The weight files of a Hugging Face model folder; raises :class:`StagingError` naming what is missing."""
    if not source.is_dir():
        raise StagingError(f"{source} is not a folder")
    config = source / "config.json"
    if not config.is_file():
        raise StagingError(f"{source} has no config.json: not a Hugging Face model folder")
    try:
        settings = json.loads(config.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise StagingError(f"{config} is not JSON: {error}") from None
    if not isinstance(settings, dict) or not settings.get("model_type"):
        raise StagingError(f"{config} names no model_type: not a transformers model config")
    weights = sorted({path for pattern in WEIGHT_PATTERNS for path in source.glob(pattern) if path.is_file()})
    if not weights:
        raise StagingError(
            f"{source} has no weight files ({', '.join(WEIGHT_PATTERNS)}); save the model with save_pretrained"
        )
    for name in INDEX_FILES:
        index = source / name
        if index.is_file():
            shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
            missing = sorted(shard for shard in shards if not (source / shard).is_file())
            if missing:
                raise StagingError(f"{index} names shards that are not there: {', '.join(missing[:5])}")
    return weights


def stage_model(
    source: Path, root: Path, tenant: str, name: str | None = None, *, replace: bool = False
) -> StagedModel:
    """Copy the model folder ``source`` to ``<root>/models/<tenant>/<name>`` (``name``: the source
    folder's), checked first and renamed into place; ``replace`` swaps out a model already there."""
    source = source.resolve()
    name = name or source.name
    for kind, value in (("tenant", tenant), ("model name", name)):
        if not MODEL_NAME.fullmatch(value):
            raise StagingError(
                f"{kind} {value[:80]!r} must be one folder name of A-Z a-z 0-9 . _ - (up to 128)"
            )
    check_model_folder(source)
    folder = root / "models" / tenant
    target = folder / name
    if target.exists() and not replace:
        raise StagingError(f"{target} already exists; --force replaces it")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StagingError(
            f"cannot create {folder}: {error.strerror}; give --root a folder you can write"
        ) from None
    temporary = folder / f".staging-{name}-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        shutil.copytree(source, temporary, symlinks=False)
        check_model_folder(temporary)
        files = [path for path in temporary.rglob("*") if path.is_file()]
        for path in files:
            original = source / path.relative_to(temporary)
            if path.stat().st_size != original.stat().st_size:
                raise StagingError(f"{path.relative_to(temporary)}: the copy differs in size from the source")
        if target.exists():
            retired = folder / f".retired-{name}-{os.getpid()}"
            os.rename(target, retired)
            os.rename(temporary, target)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.rename(temporary, target)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return StagedModel(
        target, len(files), sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
    )
