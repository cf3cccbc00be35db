"""What a tenant's policy refuses of a spec, as findings: the ``tenant`` context of :mod:`lecritique.config.findings`.

The rules are the tenancy room's (:mod:`lecritique.tenancy.spec_rules`: the allow-lists of every
marked field, tracker names and the quotas over the spec's numbers; :mod:`lecritique.tenancy.placement_rules`
and :mod:`lecritique.tenancy.quotas`: placement allow-lists and the GPU, CPU and memory quotas over
what a launcher would create). Here they become findings of context ``tenant``, each carrying its
kind (``forbidden``: an allow-list, the API's 403; ``limit``: a quota, 422), so the API and
``lecritique chart render --experiment --tenant`` list the same refusals. Two contexts, because the
second needs the launcher's rendering, which the cluster's own refusals can stop: the API checks
:class:`TenantFindings`, then the launcher (``cluster``), then :class:`TenantUsageFindings`.
``lecritique run`` applies none of them: there the user is the operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lecritique.config.experiment import ExperimentSpec
from lecritique.config.findings import Finding
from lecritique.config.work import spec_work
from lecritique.launch.base import Usage
from lecritique.tenancy.placement_rules import placement_violations
from lecritique.tenancy.policy import TenantPolicy, Violation
from lecritique.tenancy.quotas import resource_violations
from lecritique.tenancy.spec_rules import ROOTS_WIDENED_BY, spec_violations
from lecritique.tenancy.work import Sizes

TENANT = "tenant"
"""The context's name, as each finding carries it."""


def work_sizes(spec: ExperimentSpec) -> Sizes:
    """What the tenant's quotas count of a validated spec besides its numbers (:mod:`lecritique.config.work`)."""
    work = spec_work(spec)
    return Sizes(work.prompt, work.response, work.row_bytes, work.critic)


def tenant_finding(violation: Violation) -> Finding:
    """One refusal of the tenant's policy as an error finding of context ``tenant``."""
    return Finding(violation.field, "error", violation.message, context=TENANT, kind=violation.kind)


@dataclass(frozen=True)
class TenantFindings:
    """A tenant's allow-lists and quotas over a validated spec, as a :class:`~lecritique.config.findings.FindingContext`."""

    tenant: str
    """Whose policy."""
    policy: TenantPolicy
    """The tenant's resolved policy (its own entry over ``*``)."""
    models_root: str
    """``<models_root>/<tenant>`` is the tenant's own model folder."""
    datasets_root: str
    """``<datasets_root>/<tenant>`` is the tenant's own dataset folder."""
    secrets_are: Literal["kubernetes", "environment"]
    """What an API-key reference names where it runs: a Kubernetes Secret or an API-process variable."""
    roots_widened_by: Mapping[str, str] = field(default_factory=lambda: ROOTS_WIDENED_BY)
    """How a refused model or dataset path says its roots are widened."""
    name: str = TENANT

    def findings(self, spec: Any) -> list[Finding]:
        violations = spec_violations(
            spec,
            self.tenant,
            self.policy,
            models_root=self.models_root,
            datasets_root=self.datasets_root,
            secrets_are=self.secrets_are,
            roots_widened_by=self.roots_widened_by,
            sizes=work_sizes(spec),
        )
        return [tenant_finding(violation) for violation in violations]


@dataclass(frozen=True)
class TenantUsageFindings:
    """The tenant's placement allow-lists and GPU, CPU and memory quotas over what a launcher would
    create (:class:`~lecritique.launch.base.Usage`), as a finding context."""

    policy: TenantPolicy
    """The tenant's resolved policy."""
    usage: Usage
    """What the launcher computed from its rendering (and the chart's own placement per component)."""
    name: str = TENANT

    def findings(self, spec: Any) -> list[Finding]:
        placement = spec.model_dump(mode="json")["placement"]
        usage = self.usage
        violations = placement_violations(placement, usage.chart_placement, self.policy)
        violations += resource_violations(usage.gpus, usage.cpus, usage.memory, self.policy)
        return [tenant_finding(violation) for violation in violations]
