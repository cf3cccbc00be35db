"""Tracker settings of the experiment spec (``tracking:``), one model per backend.

Only pydantic models live here: ``import lecritique.config`` must not import any tracker library
(each is an optional extra and some take seconds to import).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _TrackerConfigBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class TensorBoardTrackerConfig(_TrackerConfigBase):
    """TensorBoard event files (extra ``tensorboard``)."""

    kind: Literal["tensorboard"] = "tensorboard"
    """Selects TensorBoard."""
    log_dir: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "tracker_dir"})
    """Folder of the event files, relative to the run directory (None: ``tensorboard/`` there)."""


class WandbTrackerConfig(_TrackerConfigBase):
    """Weights & Biases (extra ``wandb``); ``mode: offline`` needs no network or account."""

    kind: Literal["wandb"] = "wandb"
    """Selects Weights & Biases."""
    project: str = "lecritique"
    """W&B project."""
    entity: str | None = None
    """W&B team or user (None: the account's default)."""
    mode: Literal["online", "offline", "disabled"] | None = Field(
        default=None, json_schema_extra={"x-tenant-rule": "wandb_mode"}
    )
    """online, offline (``wandb sync`` later) or disabled; None: ``WANDB_MODE`` or online."""
    dir: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "tracker_dir"})
    """Folder W&B writes its run files to, relative to the run directory (None: the run directory)."""
    group: str | None = None
    """Group runs together (e.g. the seeds of one study)."""
    tags: tuple[str, ...] = ()
    """Tags of the run."""


class MlflowTrackerConfig(_TrackerConfigBase):
    """MLflow (extra ``mlflow``): a tracking server, or a local file store."""

    kind: Literal["mlflow"] = "mlflow"
    """Selects MLflow."""
    tracking_uri: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "tracker_uri"})
    """http(s)://server, databricks, or file:///path (None: ``MLFLOW_TRACKING_URI``, else ``mlruns/`` in the run directory)."""
    experiment_name: str | None = None
    """MLflow experiment the run goes into (None: the spec's name)."""


class TrackioTrackerConfig(_TrackerConfigBase):
    """Hugging Face trackio (extra ``trackio``), a local SQLite store with its own dashboard."""

    kind: Literal["trackio"] = "trackio"
    """Selects trackio."""
    project: str = "lecritique"
    """trackio project."""
    dir: str | None = Field(
        default=None, json_schema_extra={"x-tenant-rule": "tracker_dir", "x-unset-is-outside-run-dir": True}
    )
    """Folder of trackio's store, relative to the run directory (None: ``TRACKIO_DIR`` or trackio's
    default); read when trackio is first imported."""


TrackerConfig = Annotated[
    TensorBoardTrackerConfig | WandbTrackerConfig | MlflowTrackerConfig | TrackioTrackerConfig,
    Field(discriminator="kind"),
]
"""One experiment tracker; ``kind`` selects the backend."""
