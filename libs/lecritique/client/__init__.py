"""The REST client: :class:`LecritiqueClient` (submit, list, get, metrics, logs, cancel, wait, reports)."""

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
