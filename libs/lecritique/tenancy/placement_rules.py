"""Where a tenant's pods may go: tolerations, node selectors and affinities beyond the chart's own.

The chart gives each component a default placement (its node pool's selector, the GPU taint's
toleration, an affinity); a spec's placement replaces it. Through the API a spec may restate the
chart's own placement of that component, or use what the tenant's policy lists (``tolerations``,
``nodeSelectors``, ``affinities``), nothing else: no ``operator: Exists`` toleration of every
taint, no control-plane node selector, no ``podAffinity`` onto another tenant's pods. A spec's node
selector keeps every label of the chart's (so it cannot widen a pool by dropping one), with the
chart's value or one the policy allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lecritique.tenancy.policy import TenantPolicy, Violation

_TOLERATION_KEYS = {"key": "key", "operator": "operator", "value": "value", "effect": "effect"}
_WIDEN = "the operator allows more with {key} in the tenant's policy (the chart's api.tenantPolicies)"


def kubernetes_toleration(toleration: Mapping[str, Any]) -> dict[str, Any]:
    """A toleration in its API form without unset fields (``operator`` defaults to ``Equal``), from
    a spec's dumped toleration (snake_case) or a Kubernetes one (camelCase)."""
    found: dict[str, Any] = {"operator": "Equal"}
    for name, value in toleration.items():
        key = (
            "tolerationSeconds"
            if name in ("toleration_seconds", "tolerationSeconds")
            else _TOLERATION_KEYS.get(name)
        )
        if key is not None and value is not None:
            found[key] = value
    return found


def _tolerations(
    field: str, given: list[dict[str, Any]], chart: list[dict[str, Any]], policy: TenantPolicy
) -> list[Violation]:
    allowed = [kubernetes_toleration(t) for t in (*chart, *policy.tolerations)]
    return [
        Violation(
            f"{field}.{index}",
            f"{kubernetes_toleration(toleration)} is not allowed; tolerations allowed for this component: the "
            f"chart's {[kubernetes_toleration(t) for t in chart]} and the policy's "
            f"{[kubernetes_toleration(t) for t in policy.tolerations]}; {_WIDEN.format(key='tolerations')}",
            "forbidden",
        )
        for index, toleration in enumerate(given)
        if kubernetes_toleration(toleration) not in allowed
    ]


def _node_selector(
    field: str, given: dict[str, str], chart: Mapping[str, str], policy: TenantPolicy
) -> list[Violation]:
    allowed = {key: {value} for key, value in chart.items()}
    for key, values in policy.node_selectors.items():
        allowed.setdefault(key, set()).update(values)
    problems = [f"drops the chart's {key}={value!r}" for key, value in chart.items() if key not in given]
    problems += [
        f"{key}={value!r} is not allowed" for key, value in given.items() if value not in allowed.get(key, ())
    ]
    if not problems:
        return []
    listed = {key: sorted(values) for key, values in allowed.items()}
    return [
        Violation(
            field,
            f"{'; '.join(problems)}; node labels allowed for this component (the chart's labels stay): {listed}; "
            f"{_WIDEN.format(key='nodeSelectors')}",
            "forbidden",
        )
    ]


def placement_violations(
    placement: Mapping[str, Any], chart: Mapping[str, Mapping[str, Any]], policy: TenantPolicy
) -> list[Violation]:
    """A dumped spec's ``placement`` against each component's chart placement (``chart``: placement
    section -> its ``node_selector``, ``tolerations`` and ``affinity``) and the tenant's allow-lists."""
    found: list[Violation] = []
    for section, placed in placement.items():
        if not isinstance(placed, Mapping):
            continue
        own = chart.get(section, {})
        field = f"placement.{section}"
        if placed.get("tolerations") is not None:
            found += _tolerations(
                f"{field}.tolerations", placed["tolerations"], list(own.get("tolerations") or []), policy
            )
        if placed.get("node_selector") is not None:
            found += _node_selector(
                f"{field}.node_selector", placed["node_selector"], own.get("node_selector") or {}, policy
            )
        affinity = placed.get("affinity")
        if (
            affinity is not None
            and affinity != (own.get("affinity") or {})
            and affinity not in policy.affinities
        ):
            found.append(
                Violation(
                    f"{field}.affinity",
                    f"affinities allowed for this component: the chart's ({own.get('affinity') or {}}) and the "
                    f"policy's {list(policy.affinities)}, compared whole; {_WIDEN.format(key='affinities')}",
                    "forbidden",
                )
            )
    return found
