"""Tenant refusals are findings with a context (issue 47, item 4): the ``tenant`` context lists
every refusal of a tenant's policy at once, with its kind, and ``lecritique chart render
--experiment --tenant`` prints the same list from the chart's ``api.tenantPolicies``, as the API's
answer to a submission (``tests/integration/api/test_api_requests.py``) lists it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from lecritique.cli.main import app
from lecritique.config.experiment import parse_spec
from lecritique.config.findings import spec_findings
from lecritique.launch.components import ChartDefaults
from lecritique.launch.kubernetes.launcher import usage_of
from lecritique.launch.kubernetes.render import render_experiment_objects
from lecritique.launch.tenant_findings import TenantFindings, TenantUsageFindings
from lecritique.tenancy.policy import resolve_policy
from tests.helm_support import CHART, launcher_defaults, spec_data

POLICIES: dict[str, dict[str, Any]] = {"*": {"modelRoots": ["/weights/models"], "maxReplayMemoryGib": 1e-6}}
"""One policy for every tenant: models under /weights/models, a replay buffer of at most 1 KiB."""
REFUSED = spec_data(
    policy={"path": "/elsewhere/policy"},
    critic={"kind": "discriminative", "context": "reference", "replay": {"max_reuse": 2}},
    tracking=[{"kind": "mlflow", "tracking_uri": "http://mlflow.example:5000"}],
)
"""A model outside the tenant's roots, a tracker server it may not use and a run name outside its own
on that server (allow-lists: 403), and a
replay buffer over its memory quota (422); the buffer's default capacity is not written, so only the
validated spec's sizes find it, not the quotas over the written numbers."""
REFUSED_FIELDS = {
    ("policy.path", "forbidden"),
    ("tracking.0.tracking_uri", "forbidden"),
    ("tracking.0.experiment_name", "forbidden"),
    ("critic.replay.capacity", "limit"),
}
ROOMY: dict[str, dict[str, Any]] = {"*": {"modelRoots": ["/weights/models"]}}
"""The same roots, the default quotas."""
NO_GPU: dict[str, dict[str, Any]] = {"*": {"modelRoots": ["/weights/models"], "maxGpus": 0}}
OVER_GPUS = spec_data(placement={"policy_trainer": {"resources": {"limits": {"nvidia.com/gpu": "1"}}}})
"""Placeable, but over a quota of no GPU: found only over what the launcher would create."""


def tenant_rules(tenant: str = "alice", policies: dict[str, Any] = POLICIES) -> TenantFindings:
    """The context the API builds for ``tenant`` with the chart's default roots."""
    return TenantFindings(
        tenant,
        resolve_policy(policies, tenant),
        models_root="/weights/models",
        datasets_root="/weights/datasets",
        secrets_are="kubernetes",
    )


def test_the_tenant_context_lists_every_refusal_with_its_kind() -> None:
    spec = parse_spec(REFUSED)
    found = tenant_rules().findings(spec)
    assert {(f.field, f.kind) for f in found} == REFUSED_FIELDS
    assert {(f.level, f.context) for f in found} == {("error", "tenant")}
    # The spec alone is fine (``lecritique run`` starts it: there the user is the operator).
    assert [f for f in spec_findings(spec) if f.level == "error"] == []
    errors = [f for f in spec_findings(spec, [tenant_rules()]) if f.level == "error"]
    assert errors == found


def test_a_spec_inside_the_policy_has_no_tenant_finding() -> None:
    assert tenant_rules(policies=ROOMY).findings(parse_spec(spec_data())) == []


def test_placement_quotas_are_found_over_what_the_launcher_renders() -> None:
    defaults = ChartDefaults.model_validate(launcher_defaults())
    spec = parse_spec(OVER_GPUS)
    assert tenant_rules(policies=NO_GPU).findings(spec) == []
    usage = usage_of(render_experiment_objects(spec, "exp-gpus", defaults), defaults)
    [found] = TenantUsageFindings(resolve_policy(NO_GPU, "alice"), usage).findings(spec)
    assert (found.field, found.kind, found.context) == ("placement", "limit", "tenant")
    assert "maxGpus" in found.text


def _render(tmp_path: Path, spec: dict[str, Any], *extra: str, policies: dict[str, Any] = POLICIES) -> Any:
    spec_path, values = tmp_path / "spec.yaml", tmp_path / "values.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    values.write_text(yaml.safe_dump({"api": {"tenantPolicies": policies}}))
    command = ["chart", "render", "--chart", str(CHART), "-f", str(values), "--experiment", str(spec_path)]
    return CliRunner().invoke(app, [*command, *extra])


def _printed(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error (tenant): ")]


def test_chart_render_with_a_tenant_prints_the_same_list_and_renders_nothing(tmp_path: Path) -> None:
    out = tmp_path / "objects.yaml"
    done = _render(tmp_path, REFUSED, "--tenant", "alice", "--out", str(out))
    assert done.exit_code == 2, done.output
    expected = tenant_rules().findings(parse_spec(REFUSED))
    assert _printed(done.output) == [f"error (tenant): {f.text}" for f in expected]
    assert not out.exists()


def test_chart_render_without_a_tenant_checks_no_policy(tmp_path: Path) -> None:
    done = _render(tmp_path, REFUSED)
    assert done.exit_code == 0, done.output
    assert _printed(done.output) == [] and "no --tenant" in done.output


def test_chart_render_finds_the_placement_quotas_after_rendering(tmp_path: Path) -> None:
    done = _render(tmp_path, OVER_GPUS, "--tenant", "alice", policies=NO_GPU)
    assert done.exit_code == 2, done.output
    [line] = _printed(done.output)
    assert line.startswith("error (tenant): ") and "maxGpus" in line


@pytest.mark.parametrize("tenant", ["alice", "bob"])
def test_chart_render_reads_the_tenants_own_entry(tmp_path: Path, tenant: str) -> None:
    """``alice`` may use /elsewhere; ``bob`` falls back to the ``*`` entry and may not."""
    policies = {
        **POLICIES,
        "alice": {"modelRoots": ["/elsewhere"], "trackerEndpoints": ["http://mlflow.example:5000"]},
    }
    done = _render(tmp_path, REFUSED, "--tenant", tenant, policies=policies)
    printed = _printed(done.output)
    fields = {f.field for f in tenant_rules(tenant, policies).findings(parse_spec(REFUSED))}
    assert len(printed) == len(fields) and done.exit_code == 2, done.output
    assert ("policy.path" in fields) == (tenant == "bob")
