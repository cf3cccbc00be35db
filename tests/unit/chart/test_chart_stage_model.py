"""The chart's model-staging Job (issue #41, item 5), rendered with Helm's own engine: off by
default; when on, ``lecritique models stage`` from a read-only source volume into the weight
volume, non-root, read-only root, no network; refused with the value to set when incomplete."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.helm_support import (
    KUBERNETES_VERSION,
    NAMESPACE,
    RELEASE,
    find,
    one,
    render_objects,
    with_operator_token,
)

SOURCE = {"persistentVolumeClaim": {"claimName": "hf-models", "readOnly": True}}


def _values(**stage: Any) -> dict[str, Any]:
    settings = {
        "enabled": True,
        "tenant": "alice",
        "source": SOURCE,
        "sourcePath": "Qwen3-4B-Instruct-2507",
        **stage,
    }
    return with_operator_token({"weights": {"stageModel": settings}})


def test_no_job_by_default() -> None:
    objects = render_objects()
    assert find(objects, "Job") == [] and find(objects, "NetworkPolicy", "-stage-model") == []


def test_the_job_stages_the_source_folder_into_the_tenants_models() -> None:
    objects = render_objects(_values(name="qwen3-4b", force=True))
    job = one(objects, "Job", "-stage-model")
    kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
    assert job["metadata"]["namespace"] == NAMESPACE
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["args"] == [
        "models",
        "stage",
        "/source/Qwen3-4B-Instruct-2507",
        "--tenant",
        "alice",
        "--root",
        "/weights",
        "--name",
        "qwen3-4b",
        "--force",
    ]
    assert container["image"].startswith("ghcr.io/lecritique/services:")
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["source"] == {"name": "source", "mountPath": "/source", "readOnly": True}
    assert mounts["weights"]["mountPath"] == "/weights" and not mounts["weights"].get("readOnly")
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["source"]["persistentVolumeClaim"] == SOURCE["persistentVolumeClaim"]
    claim = one(objects, "PersistentVolumeClaim", "-weights")["metadata"]["name"]
    assert volumes["weights"]["persistentVolumeClaim"]["claimName"] == claim
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["restartPolicy"] == "Never"
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    policy = one(objects, "NetworkPolicy", "-stage-model")
    kubernetes_validate.validate(policy, KUBERNETES_VERSION, strict=True)
    assert policy["spec"]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": "stage-model",
    }
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and "egress" not in policy["spec"]
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "stage-model"


def test_the_job_follows_the_global_registry_and_an_existing_claim() -> None:
    values = _values()
    values["global"] = {"image": {"registry": "registry.example.com/ml", "tag": "0.1.0"}}
    values["weights"]["existingClaim"] = "shared-weights"
    pod = one(render_objects(values), "Job", "-stage-model")["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "registry.example.com/ml/services:0.1.0"
    assert "--name" not in pod["containers"][0]["args"] and "--force" not in pod["containers"][0]["args"]
    assert {v["name"]: v for v in pod["volumes"]}["weights"]["persistentVolumeClaim"][
        "claimName"
    ] == "shared-weights"


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ({"tenant": ""}, "weights.stageModel.tenant"),
        ({"source": {}}, "weights.stageModel.source"),
        ({"sourcePath": ""}, "weights.stageModel.sourcePath"),
        ({"sourcePath": "/etc"}, "must be relative"),
        ({"sourcePath": "models/../../etc"}, "must be relative"),
        ({"tenant": "Alice/x"}, "tenant"),
    ],
)
def test_an_incomplete_job_is_refused_naming_the_value(stage: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match=message):
        render_objects(_values(**stage))
