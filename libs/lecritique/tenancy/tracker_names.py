"""Names a tenant's runs take on a tracker server shared by every tenant.

A tracker server (an MLflow ``tracking_uri``, W&B online) is reached with the operator's
credentials, so the names a spec gives decide whose experiment or project a run lands in. On such
a server every name lies under the tenant's own: MLflow experiments are ``<tenant>/<name>`` (MLflow
takes ``/`` in names; ``/`` is not a character of tenant names, so no tenant's prefix is another's);
a W&B project is ``<tenant>`` exactly (W&B refuses ``/`` in project names, and ``<tenant>-<name>``
would be ambiguous: tenants ``a`` and ``a-b``), its entity unset (the key's own) or ``<tenant>``;
``group`` and ``tags`` then organise runs inside the tenant's own project. Without a server (a file
store or W&B offline, in the run directory) names reach no other tenant and are free.
"""

from __future__ import annotations

from typing import Any

from lecritique.tenancy.policy import Violation


def _mlflow(field: str, tracker: dict[str, Any], tenant: str, name: str) -> list[Violation]:
    if tracker.get("tracking_uri") is None:
        return []
    experiment = tracker.get("experiment_name")
    prefix = f"{tenant}/"
    if isinstance(experiment, str) and experiment.startswith(prefix) and experiment != prefix:
        return []
    said = "unset, it is the spec's name" if experiment is None else f"got {experiment!r}"
    return [
        Violation(
            f"{field}.experiment_name",
            f"on a shared MLflow server this tenant's experiments are named '{prefix}...' "
            f"(e.g. '{prefix}{name}'); {said}",
            "forbidden",
        )
    ]


def _wandb(field: str, tracker: dict[str, Any], tenant: str) -> list[Violation]:
    if tracker.get("mode") not in (None, "online"):
        return []
    found = []
    if tracker.get("project") != tenant:
        found.append(
            Violation(
                f"{field}.project",
                f"on W&B's server this tenant's project is '{tenant}' (got {tracker.get('project')!r}); "
                "organise its runs with group and tags",
                "forbidden",
            )
        )
    if tracker.get("entity") not in (None, tenant):
        found.append(
            Violation(
                f"{field}.entity",
                f"on W&B's server the entity is unset (the API key's own) or '{tenant}' (got {tracker.get('entity')!r})",
                "forbidden",
            )
        )
    return found


def tracker_name_violations(spec_data: dict[str, Any], tenant: str) -> list[Violation]:
    """Experiment and project names outside the tenant's own on a shared tracker server (dumped spec)."""
    found: list[Violation] = []
    for index, tracker in enumerate(spec_data.get("tracking") or []):
        field = f"tracking.{index}"
        if tracker.get("kind") == "mlflow":
            found.extend(_mlflow(field, tracker, tenant, str(spec_data.get("name"))))
        elif tracker.get("kind") == "wandb":
            found.extend(_wandb(field, tracker, tenant))
    return found
