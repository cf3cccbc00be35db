"""API settings, read from ``LECRITIQUE_API_*`` environment variables (the Helm chart sets them)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PREFIX = "LECRITIQUE_API_"


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
    runs_dir: Path = Path("runs")
    """Local launcher: one run directory per experiment under here."""
    launcher_defaults: Path | None = None
    """Kubernetes launcher: the chart's launcher-defaults.json."""
    namespace: str | None = None
    """Kubernetes launcher: namespace of experiment objects (overrides launcher-defaults.json)."""
    reconcile_seconds: float = Field(default=15.0, gt=0)
    """How often running experiments' status is refreshed in the background."""
    cancel_grace_seconds: float = Field(default=90.0, gt=0)
    """Local launcher: after this long, a cancelled run that has not stopped is killed."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        """Settings from ``LECRITIQUE_API_<FIELD>`` variables (``REDIS_URL`` as a fallback for the Redis URL)."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for name in cls.model_fields:
            key = PREFIX + name.upper()
            if key in env and env[key] != "":
                values[name] = env[key]
        if "redis_url" not in values and env.get("REDIS_URL"):
            values["redis_url"] = env["REDIS_URL"]
        if isinstance(values.get("tokens"), str):
            import json

            values["tokens"] = json.loads(str(values["tokens"]))
        return cls.model_validate(values)
