"""API settings, read from ``LECRITIQUE_API_*`` environment variables (the Helm chart sets them)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lecritique.launch.api_local.launcher import DEFAULT_ENV_PASSTHROUGH
from lecritique.tenancy.policy import validate_policies

PREFIX = "LECRITIQUE_API_"
_JSON_FIELDS = ("tokens", "tenant_policies", "env_passthrough")


class ApiSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    redis_url: str
    """Redis holding experiment records (and the metrics series the orchestrators write)."""
    launcher: Literal["local", "kubernetes"] = "local"
    """Where experiments run: local processes (``lecritique run``) or Kubernetes objects."""
    tokens: dict[str, str] = Field(default_factory=dict)
    """Tenant -> ``sha256:<hex>`` of its bearer token (``LECRITIQUE_API_TOKENS``, JSON)."""
    tokens_file: Path | None = None
    """JSON file of the same mapping (a mounted Secret); re-read when it changes."""
    tenant_policies: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Tenant (or ``*`` for every tenant) -> its :class:`~lecritique.tenancy.policy.TenantPolicy` fields (JSON)."""
    models_root: str = "/weights/models"
    """Each tenant may use models under ``<models_root>/<tenant>`` (plus its policy's ``model_roots``)."""
    datasets_root: str = "/weights/datasets"
    """Each tenant may read datasets under ``<datasets_root>/<tenant>`` (plus its policy's ``dataset_roots``)."""
    dev: bool = False
    """Set by ``lecritique api serve --dev``: a model or dataset path outside the tenant's roots is
    refused naming that command's ``--model-root`` / ``--dataset-root`` flags, not the tenant policy."""
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576)
    """Largest request body accepted; larger ones get 413."""
    submission_threads: int = Field(default=4, ge=1, le=256)
    """Threads that parse and validate submissions; more submissions at once wait for one (reads
    and health probes have their own)."""
    runs_dir: Path = Path("runs")
    """Local launcher: one run directory per experiment under here."""
    experiment_redis_url: str | None = None
    """Local launcher: the Redis URL runs get (an ACL user limited to ``lecritique:exp-*`` keys); None: ``redis_url``."""
    env_passthrough: tuple[str, ...] = DEFAULT_ENV_PASSTHROUGH
    """Local launcher: the API-process variables every run inherits (JSON list); no others are passed."""
    launcher_defaults: Path | None = None
    """Kubernetes launcher: the chart's launcher-defaults.json."""
    namespace: str | None = None
    """Kubernetes launcher: namespace of experiment objects (overrides launcher-defaults.json)."""
    reconcile_seconds: float = Field(default=15.0, gt=0, allow_inf_nan=False)
    """How often running experiments' status is refreshed in the background."""
    pending_grace_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    """A record still ``pending`` this long after submission was left by a crashed API process: launch it."""
    cancel_grace_seconds: float = Field(default=90.0, gt=0, allow_inf_nan=False)
    """Local launcher: after this long, a cancelled run that has not stopped is killed."""

    @field_validator("tenant_policies")
    @classmethod
    def _valid_policies(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        validate_policies(value)
        return value

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        """Settings from ``LECRITIQUE_API_<FIELD>`` variables (``REDIS_URL`` as a fallback for the Redis URL)."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for name in cls.model_fields:
            key = PREFIX + name.upper()
            if key in env and env[key] != "":
                values[name] = json.loads(env[key]) if name in _JSON_FIELDS else env[key]
        if "redis_url" not in values and env.get("REDIS_URL"):
            values["redis_url"] = env["REDIS_URL"]
        return cls.model_validate(values)
