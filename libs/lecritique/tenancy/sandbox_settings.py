"""The code sandbox's settings in a tenant's spec: it may tighten them, never loosen them.

A spec's sandbox (``SandboxConfig``, e.g. CodeIO's ``environment.sandbox``; the class carries the
rule marker ``sandbox_settings``, so every field holding one is checked) may choose stronger
namespaces (off < auto < require) than the operator's floor, never weaker; keeps the audit hook
unless the operator lets it go; and each limit is at most the operator's maximum, by default the
sandbox's own default (:class:`~lecritique.tenancy.policy.SandboxPolicy`). The total tmpfs of the
calls one verifier runs at once is a quota (:mod:`lecritique.tenancy.quotas`).
"""

from __future__ import annotations

from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from lecritique.tenancy.policy import NAMESPACES_ORDER, TenantPolicy, Violation, raised_with

LIMITS = ("wall_seconds", "cpu_seconds", "memory_mb", "file_size_mb", "disk_mb", "processes", "open_files")
"""The sandbox's limits a tenant may lower but not raise past the operator's maximum."""


def sandbox_violations(field: str, settings: BaseModel, policy: TenantPolicy) -> list[Violation]:
    """What a spec's sandbox ``settings`` loosen beyond the tenant's policy (``field``: their path)."""
    values, defaults = settings.model_dump(), type(settings)().model_dump()
    bounds = policy.sandbox
    found = []
    floor = bounds.namespaces or defaults["namespaces"]
    if NAMESPACES_ORDER.index(values["namespaces"]) < NAMESPACES_ORDER.index(floor):
        found.append(
            Violation(
                f"{field}.namespaces",
                f"the weakest namespaces mode this tenant's sandbox may use is {floor!r} (off < auto < require); "
                "the operator lowers it with sandbox.namespaces in the tenant's policy (the chart's api.tenantPolicies)",
                "forbidden",
            )
        )
    if bounds.audit_hook and defaults["audit_hook"] and not values["audit_hook"]:
        found.append(
            Violation(
                f"{field}.audit_hook",
                "the sandbox's audit hook stays installed for this tenant; the operator lets it go with "
                "sandbox.auditHook: false in the tenant's policy (the chart's api.tenantPolicies)",
                "forbidden",
            )
        )
    for name in LIMITS:
        limit = getattr(bounds, name)
        limit = defaults[name] if limit is None else limit
        value = values[name]
        if value > limit:
            found.append(
                Violation(
                    f"{field}.{name}",
                    f"{value:g} exceeds this tenant's sandbox limit of {limit:g}; {raised_with('sandbox.' + to_camel(name))}",
                    "limit",
                )
            )
    return found
