"""The REST client: :class:`LecritiqueClient` (submit, list, get, metrics, logs, cancel, wait, reports).

Names are imported on first use: the API server shares :mod:`lecritique.client.models` (one view
of an experiment for both sides) and its image has no HTTP client library (httpx).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lecritique.client.client import LecritiqueClient, spec_document
    from lecritique.client.errors import (
        ApiError,
        FieldProblem,
        Forbidden,
        InvalidSpec,
        NotFound,
        Unauthorized,
        Unavailable,
    )
    from lecritique.client.models import Experiment
    from lecritique.client.settings import ClientSettings, read_config, resolve_settings, write_config
    from lecritique.client.transport import RetryPolicy

_MODULE_OF = {
    "LecritiqueClient": "client",
    "spec_document": "client",
    "ApiError": "errors",
    "FieldProblem": "errors",
    "Forbidden": "errors",
    "InvalidSpec": "errors",
    "NotFound": "errors",
    "Unauthorized": "errors",
    "Unavailable": "errors",
    "Experiment": "models",
    "ClientSettings": "settings",
    "read_config": "settings",
    "resolve_settings": "settings",
    "write_config": "settings",
    "RetryPolicy": "transport",
}

__all__ = [
    "ApiError",
    "ClientSettings",
    "Experiment",
    "FieldProblem",
    "Forbidden",
    "InvalidSpec",
    "LecritiqueClient",
    "NotFound",
    "RetryPolicy",
    "Unauthorized",
    "Unavailable",
    "read_config",
    "resolve_settings",
    "spec_document",
    "write_config",
]
assert sorted(__all__) == sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'lecritique.client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"lecritique.client.{_MODULE_OF[name]}"), name)
