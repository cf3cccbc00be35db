"""Where each component of an experiment runs in Kubernetes: node pools, tolerations, resources.

Every field is optional: ``None`` means "use the Helm chart's default for this component"
(``values.yaml`` → the launcher-defaults ConfigMap). Local runs ignore this section.
Requests and limits use Kubernetes quantity strings (``"8"``, ``"500m"``, ``"64Gi"``) and may
name extended resources such as ``nvidia.com/gpu``.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from lecritique.config.base import SpecModel

# apimachinery's resource.Quantity grammar (a decimal number with an optional SI, binary or exponent suffix).
# Bounded lengths keep the value a sane size (no 10**(10**9) exponents); matched with fullmatch.
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]{1,18}(?:\.[0-9]{0,9})?|\.[0-9]{1,9}))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# A resource name: ``cpu``, ``memory``, ``ephemeral-storage`` or a qualified ``domain/name``.
_RESOURCE_NAME = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_AFFINITY_KINDS = frozenset({"nodeAffinity", "podAffinity", "podAntiAffinity"})

GPU_RESOURCE = "nvidia.com/gpu"


def parse_quantity(value: str) -> Decimal:
    """The numeric value of a Kubernetes quantity (``"500m"`` → 0.5, ``"1Gi"`` → 1073741824)."""
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '2', '500m', '16Gi')")
    number = Decimal(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix and suffix[0] in "eE":
        return number * Decimal(10) ** int(suffix[1:])
    return number * _DECIMAL[suffix]


def is_extended_resource(name: str) -> bool:
    """Extended resources (``vendor/name``) cannot be overcommitted: request must equal limit."""
    return "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("hugepages-")


def _check_quantities(values: dict[str, Any]) -> dict[str, str]:
    checked: dict[str, str] = {}
    for name, value in values.items():
        if not _RESOURCE_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a resource name (e.g. 'cpu', 'memory', 'nvidia.com/gpu')")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"{name}: a quantity must be a string or number, got {type(value).__name__}")
        text = str(value)
        if parse_quantity(text) < 0:
            raise ValueError(f"{name}: quantity {text!r} must not be negative")
        checked[name] = text
    return checked


class ResourceRequirements(SpecModel):
    requests: dict[str, str] = Field(default_factory=dict)
    """Requested quantity per resource name (merged over the chart's requests, key by key)."""
    limits: dict[str, str] = Field(default_factory=dict)
    """Limit per resource name, e.g. ``{"nvidia.com/gpu": "1", "memory": "64Gi"}`` (merged like requests)."""

    @field_validator("requests", "limits", mode="before")
    @classmethod
    def _quantities(cls, value: Any) -> Any:
        return _check_quantities(value) if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _extended_resources_match(self) -> ResourceRequirements:
        for name, request in self.requests.items():
            if (
                is_extended_resource(name)
                and name in self.limits
                and parse_quantity(request) != parse_quantity(self.limits[name])
            ):
                raise ValueError(
                    f"requests[{name!r}] must equal limits[{name!r}]: extended resources cannot be overcommitted"
                )
        return self


class Toleration(SpecModel):
    key: str | None = None
    """Taint key the toleration matches (None with operator Exists: every taint)."""
    operator: Literal["Exists", "Equal"] = "Equal"
    """``Equal`` matches key and value; ``Exists`` matches any value of the key."""
    value: str | None = None
    """Taint value (operator Equal)."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """Taint effect matched (None: all effects)."""
    toleration_seconds: int | None = Field(default=None, ge=0, le=10**9)
    """For NoExecute: how long the pod stays bound after the taint appears."""

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("value must be empty when operator is 'Exists'")
        if self.key is None and self.operator != "Exists":
            raise ValueError("an empty key requires operator 'Exists'")
        return self

    def to_kubernetes(self) -> dict[str, Any]:
        """The ``core/v1 Toleration`` object."""
        out: dict[str, Any] = {"operator": self.operator}
        for field, key in (
            ("key", "key"),
            ("value", "value"),
            ("effect", "effect"),
            ("toleration_seconds", "tolerationSeconds"),
        ):
            value = getattr(self, field)
            if value is not None:
                out[key] = value
        return out


class ComponentPlacement(SpecModel):
    node_selector: dict[str, str] | None = None
    """Node labels the pods must match, e.g. ``{"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}`` (None: chart default)."""
    tolerations: list[Toleration] | None = None
    """Taints the pods tolerate, e.g. the GPU pool's ``nvidia.com/gpu`` taint (None: chart default)."""
    affinity: dict[str, Any] | None = None
    """A Kubernetes ``Affinity`` object in its API form (camelCase keys; None: chart default)."""
    resources: ResourceRequirements | None = None
    """Requests/limits merged key by key over the chart's (None: the chart's as they are)."""

    @field_validator("affinity")
    @classmethod
    def _affinity_kinds(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            unknown = sorted(set(value) - _AFFINITY_KINDS)
            if unknown:
                raise ValueError(
                    f"unknown affinity kind(s) {unknown}; expected some of {sorted(_AFFINITY_KINDS)}"
                )
        return value


class ScalablePlacement(ComponentPlacement):
    replicas: int | None = Field(default=None, ge=1, le=1024)
    """Pod replicas (None: the chart's default)."""


class PlacementSpec(SpecModel):
    """Per-component scheduling of one experiment on a Kubernetes cluster."""

    orchestrator: ComponentPlacement = Field(default_factory=ComponentPlacement)
    """The experiment loop (a Job; CPU only)."""
    rollout: ComponentPlacement = Field(default_factory=ComponentPlacement)
    """Policy inference pods (replicas: ``rollout.replicas``)."""
    environment_verifier: ScalablePlacement = Field(default_factory=ScalablePlacement)
    """Environment and verifier pods (stateless, CPU)."""
    value_evaluator: ComponentPlacement = Field(default_factory=ComponentPlacement)
    """Critic inference pods (replicas: ``critic.evaluator_replicas``)."""
    value_trainer: ComponentPlacement = Field(default_factory=ComponentPlacement)
    """Critic trainer pod."""
    policy_trainer: ComponentPlacement = Field(default_factory=ComponentPlacement)
    """Policy trainer pod; runs ``policy_trainer.processes`` torchrun processes, one GPU each when it has GPUs."""
