"""What the REST endpoints do, without HTTP: submit, read, list, cancel and reconcile experiments."""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis
from pydantic import ValidationError

from lecritique.config.errors import describe_errors
from lecritique.config.experiment import ExperimentSpec, SpecError, SpecValueError, check_values
from lecritique.config.findings import Finding, SpecRefused, warning_texts
from lecritique.launch.base import ExperimentLauncher, Observation, OutsideRoots, Submission
from lecritique.launch.redis_acl import ExperimentUsers
from lecritique.launch.tenant_findings import TenantFindings, TenantUsageFindings, tenant_finding
from lecritique.replay.memory import trajectory_row_bytes
from lecritique.tenancy.policy import Violation, resolve_policy
from lecritique.tenancy.quotas import written_quota_violations
from lecritique.tenancy.spec_rules import ROOTS_WIDENED_BY, tenant_dataset_roots
from lecritique.tenancy.work import Sizes
from services.api.records import ExperimentRecord, RecordStore, fingerprint

logger = logging.getLogger(__name__)


class NotFound(Exception):
    """No experiment with this id that the caller may see (another tenant's is not found either)."""


@dataclass(frozen=True)
class FieldError:
    field: str
    """Dotted path of the offending field in the spec (``critic.replay.capacity``)."""
    message: str
    """What is wrong with it."""
    type: str = "value_error"
    """Machine-readable kind (pydantic's error type)."""


class InvalidSpec(Exception):
    """The submitted spec is invalid or over a quota (422); ``errors`` names every offending field."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors


class PolicyDenied(InvalidSpec):
    """The spec names something the tenant's policy does not allow (403)."""


def field_path(location: tuple[int | str, ...], data: Any) -> str:
    """The dotted path of a pydantic error location in the submitted data.

    Discriminated unions add their tag (``critic.discriminative.replay``); the tag is a value of the
    submitted object, not a key, so it is dropped: ``critic.replay``.
    """
    parts: list[str] = []
    current = data
    for part in location:
        if (
            isinstance(current, dict)
            and isinstance(part, str)
            and part not in current
            and part in {value for value in current.values() if isinstance(value, str)}
        ):
            continue
        parts.append(str(part))
        if isinstance(current, dict):
            current = current.get(part)
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        else:
            current = None
    return ".".join(parts) or "spec"


def validation_errors(error: ValidationError, data: Any) -> list[FieldError]:
    """One FieldError per problem; an unknown field's message has the nearest known name and the known ones."""
    described = describe_errors(error, ExperimentSpec)
    return [
        FieldError(field_path(tuple(item["loc"]), data), message, item["type"])
        for item, (_, message) in zip(error.errors(), described, strict=True)
    ]


def _refused_fields(refused: SpecRefused) -> list[FieldError]:
    """Every error a context found (the cluster's, :mod:`lecritique.config.findings`), one per field."""
    return [
        FieldError(finding.field, finding.text.removeprefix(f"{finding.field}: "), "placement_error")
        for finding in refused.findings
    ]


def _spec_error_field(error: SpecError) -> FieldError:
    """A launcher's SpecError reads '<field>: <message>'."""
    text = str(error)
    field, sep, message = text.partition(": ")
    return (
        FieldError(field, message, "placement_error")
        if sep and " " not in field
        else FieldError("spec", text, "spec_error")
    )


def _refuse(violations: list[Violation]) -> None:
    """Raise for what the tenant's policy refuses of a body not yet validated (its quotas)."""
    _refuse_findings([tenant_finding(violation) for violation in violations])


def _refuse_findings(findings: list[Finding]) -> None:
    """Raise for the errors of the ``tenant`` context (:mod:`lecritique.launch.tenant_findings`),
    every one (``policy_denied`` or ``quota_exceeded``): 403 if an allow-list refuses any, else 422."""
    refused = [finding for finding in findings if finding.level == "error"]
    errors = [
        FieldError(f.field, f.text, "policy_denied" if f.kind == "forbidden" else "quota_exceeded")
        for f in refused
    ]
    if any(f.kind == "forbidden" for f in refused):
        raise PolicyDenied(errors)
    if errors:
        raise InvalidSpec(errors)


def _whole(value: Any) -> int | None:
    """A row's version or step as an integer; None for anything else (rows come from a run's process)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return int(value)
    except (ValueError, OverflowError):
        return None


WRITTEN = Sizes(row_bytes=trajectory_row_bytes(0, 0))
"""What the quotas know of a body before it is validated: a replay row takes at least its overhead."""


def new_experiment_id() -> str:
    """``exp-`` and 10 random hex digits: a short DNS label, unique in practice."""
    return f"exp-{secrets.token_hex(5)}"


class ExperimentService:
    def __init__(
        self,
        store: RecordStore,
        launcher: ExperimentLauncher,
        *,
        policies: dict[str, dict[str, Any]] | None = None,
        models_root: str = "/weights/models",
        datasets_root: str = "/weights/datasets",
        pending_grace_seconds: float = 60.0,
        roots_widened_by: Mapping[str, str] = ROOTS_WIDENED_BY,
        users: ExperimentUsers | None = None,
    ) -> None:
        self.users = users
        self.pending_grace_seconds = pending_grace_seconds
        self.roots_widened_by = roots_widened_by
        self.store = store
        self.launcher = launcher
        self.policies = policies or {}
        self.models_root = models_root
        self.datasets_root = datasets_root

    # ---- submit ----------------------------------------------------------------------------
    def submit(
        self, tenant: str, body: Any, idempotency_key: str | None = None
    ) -> tuple[ExperimentRecord, bool]:
        """Validate, check the tenant's policy, record atomically, launch; returns the record and
        whether it is a replay of an earlier POST with the same ``Idempotency-Key``."""
        if not isinstance(body, dict):
            raise InvalidSpec(
                [
                    FieldError(
                        "spec",
                        f"an experiment spec must be a JSON object, got {type(body).__name__}",
                        "type_error",
                    )
                ]
            )
        # The quotas over what the tenant wrote come first: validation costs more than reading numbers.
        _refuse(written_quota_violations(body, resolve_policy(self.policies, tenant), WRITTEN))
        try:
            check_values(body)
            spec = ExperimentSpec.model_validate(body)
        except SpecValueError as error:
            raise InvalidSpec([FieldError(error.field, error.message, "value_error")]) from None
        except ValidationError as error:
            raise InvalidSpec(validation_errors(error, body)) from None
        submission = self._check(tenant, spec, new_experiment_id())
        now = time.time()
        record = ExperimentRecord(
            id=submission.experiment_id,
            tenant=tenant,
            name=spec.name,
            status="pending",
            launcher=self.launcher.name,
            spec=spec.model_dump(mode="json"),
            warnings=warning_texts(spec),
            created_at=now,
            updated_at=now,
        )
        earlier = self.store.create(
            record,
            max_running=submission.policy.max_running_experiments,
            idempotency_key=idempotency_key,
            body_fingerprint=fingerprint(body),
        )
        if earlier is not None:
            return self._reload(earlier), True
        logger.info("tenant %s submitted experiment %s (%s)", tenant, record.id, spec.name)
        return self._launch(record, submission), False

    def _check(self, tenant: str, spec: ExperimentSpec, experiment_id: str) -> Submission:
        """The tenant's policy, then the launcher's own checks, the placement allow-lists and the
        GPU, CPU and memory quotas over what the launcher would create."""
        policy = resolve_policy(self.policies, tenant)
        tenant_rules = TenantFindings(
            tenant,
            policy,
            models_root=self.models_root,
            datasets_root=self.datasets_root,
            secrets_are=self.launcher.secrets_are,
            roots_widened_by=self.roots_widened_by,
        )
        _refuse_findings(tenant_rules.findings(spec))
        submission = Submission(
            experiment_id=experiment_id,
            spec=spec,
            tenant=tenant,
            policy=policy,
            dataset_roots=tuple(tenant_dataset_roots(tenant, policy, self.datasets_root)),
        )
        try:
            usage = self.launcher.check(submission)
        except OutsideRoots as error:
            found = _spec_error_field(error)
            widened = self.roots_widened_by.get(error.rule)
            message = f"{found.message}; {widened}" if widened else found.message
            raise PolicyDenied([FieldError(found.field, message, found.type)]) from None
        except SpecRefused as refused:
            raise InvalidSpec(_refused_fields(refused)) from None
        except SpecError as error:
            raise InvalidSpec([_spec_error_field(error)]) from None
        _refuse_findings(TenantUsageFindings(policy, usage).findings(spec))
        return submission

    def _drop_redis_user(self, experiment_id: str) -> None:
        if self.users is not None:
            self.users.revoke(experiment_id)

    def _launch(self, record: ExperimentRecord, submission: Submission) -> ExperimentRecord:
        try:
            if self.users is not None:
                submission = self.users.grant(submission)
            handle = self.launcher.launch(submission)
        except Exception as error:
            logger.exception("experiment %s failed to launch", record.id)
            updated = self.store.update(
                record.id, expect=["pending"], status="failed", error=f"launch failed: {error}"
            )
        else:
            updated = self.store.update(record.id, expect=["pending"], status="running", handle=handle)
            if updated is None:
                # Cancelled while it was launching: stop what was just started.
                self.store.update(record.id, handle=handle)
                self.launcher.cancel(record.id, handle)
        return updated or self._reload(record.id)

    # ---- read ------------------------------------------------------------------------------
    def get(self, tenant: str, experiment_id: str, *, refresh: bool = True) -> ExperimentRecord:
        record = self.store.get(experiment_id)
        if record is None or record.tenant != tenant:
            raise NotFound(experiment_id)
        return self.refresh(record) if refresh else record

    def list_experiments(self, tenant: str, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        return [self.refresh(record) for record in self.store.list_for_tenant(tenant, limit, offset)]

    def metrics(
        self, tenant: str, experiment_id: str, since_step: int | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """The rows after ``since_step`` and how many malformed ones were skipped."""
        self.get(tenant, experiment_id, refresh=False)
        return self.store.metrics(experiment_id, since_step)

    def details(self, record: ExperimentRecord) -> dict[str, Any]:
        """Progress the orchestrator reported: current step, versions, latest metrics row."""
        progress = self.store.progress(record.id)
        latest = self.store.latest_metrics(record.id)
        return {
            "step": progress.get("step", _whole(latest.get("step")) if latest else None),
            "policy_version": progress.get(
                "policy_version", _whole(latest.get("policy_version")) if latest else None
            ),
            "value_version": _whole(latest.get("value_version")) if latest else None,
            "latest_metrics": latest,
        }

    # ---- cancel ----------------------------------------------------------------------------
    def cancel(self, tenant: str, experiment_id: str) -> ExperimentRecord:
        """Stop a running experiment (idempotent: a finished one is returned as it is)."""
        record = self.get(tenant, experiment_id, refresh=False)
        if record.final:
            return record
        if record.status == "pending":
            # Not launched yet (or its launch crashed the API): nothing to stop but the record.
            updated = self.store.update(experiment_id, expect=["pending"], status="cancelled")
            return updated or self.get(tenant, experiment_id, refresh=False)
        self.store.update(experiment_id, expect=["running", "cancelling"], status="cancelling")
        return self._advance_cancel(experiment_id)

    def _advance_cancel(self, experiment_id: str) -> ExperimentRecord:
        record = self.store.get(experiment_id)
        assert record is not None
        handle = dict(record.handle)
        observation = self.launcher.cancel(experiment_id, handle)
        if observation.state == "running":
            updated = self.store.update(experiment_id, expect=["cancelling"], handle=handle)
        else:
            updated = self.store.update(
                experiment_id, expect=["cancelling"], status="cancelled", handle=handle
            )
            self._drop_redis_user(experiment_id)
            logger.info("experiment %s cancelled", experiment_id)
        return updated or self._reload(experiment_id)

    def _reload(self, experiment_id: str) -> ExperimentRecord:
        record = self.store.get(experiment_id)
        assert record is not None
        return record

    # ---- reconcile -------------------------------------------------------------------------
    def refresh(self, record: ExperimentRecord) -> ExperimentRecord:
        """Bring a non-final record up to date with its workloads."""
        if record.final or record.status == "pending":
            return record
        try:
            if record.status == "cancelling":
                return self._advance_cancel(record.id)
            observation = self.launcher.poll(record.id, record.handle)
        except Exception as error:
            logger.warning("cannot poll experiment %s: %s", record.id, error)
            return record
        return self._apply(record, observation)

    def _apply(self, record: ExperimentRecord, observation: Observation) -> ExperimentRecord:
        if observation.state == "running":
            return record
        updated = self.store.update(
            record.id, expect=["running"], status=observation.state, error=observation.message
        )
        if updated is None:
            return self._reload(record.id)
        logger.info("experiment %s %s", record.id, observation.state)
        try:
            self.launcher.release(record.id, record.handle)
        except Exception as error:
            logger.warning("cannot release the workloads of experiment %s: %s", record.id, error)
        self._drop_redis_user(record.id)
        return updated

    def _relaunch(self, record: ExperimentRecord) -> None:
        """Launch a record an API process left pending (it died between recording and launching)."""
        try:
            submission = self._check(record.tenant, ExperimentSpec.model_validate(record.spec), record.id)
        except (InvalidSpec, ValidationError) as error:
            self.store.update(
                record.id, expect=["pending"], status="failed", error=f"no longer allowed: {error}"[:2000]
            )
            return
        self._launch(record, submission)

    def reconcile(self) -> int:
        """Refresh every active experiment and launch ones left pending by a crash; returns how many."""
        count = 0
        for experiment_id in self.store.active_ids():
            record = self.store.get(experiment_id)
            if record is None:
                continue
            if record.status == "pending" and time.time() - record.created_at > self.pending_grace_seconds:
                logger.warning("experiment %s was left pending; launching it now", experiment_id)
                self._relaunch(record)
            else:
                if record.status == "running" and self.users is not None:
                    # A restarted Redis has lost the users created at launch: the same password again.
                    with contextlib.suppress(redis.ResponseError):
                        self.users.ensure(experiment_id)
                self.refresh(record)
            count += 1
        return count
