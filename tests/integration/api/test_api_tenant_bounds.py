"""What a tenant's spec may make the platform run with, over real HTTP against a real API process
(``lecritique api serve``, kubernetes launcher on a recording Kubernetes endpoint): the CodeIO
sandbox's settings, where pods are placed, how much CPU and memory they take, and how large the
work is (issue 37, security round 3).

Each attack was accepted with 201 before the fix; each must now be refused by default, 403 where a
setting is the operator's (the sandbox's isolation, placement), 422 where a quota is exceeded (the
message names the field, the limit and the policy key that raises it), and be accepted once the
operator allows it for that tenant.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helm_support import spec_data
from tests.integration.api.api_process import ApiProcess
from tests.integration.api.conftest import kubernetes_api_settings
from tests.integration.api.kubernetes_recorder import RecordingApiServer

ALICE, CAROL = "alice-bounds-token", "carol-bounds-token"
MODEL = "/weights/models/shared/policy"
POOL_TOLERATION = {"key": "pool", "operator": "Equal", "value": "big", "effect": "NoSchedule"}
ZONE_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
        }
    }
}
POLICIES = {
    "*": {"modelRoots": ["/weights/models/shared"]},
    "carol": {
        "sandbox": {"namespaces": "off", "auditHook": False, "memoryMb": 4096, "parallelDiskMb": 1024},
        "tolerations": [POOL_TOLERATION],
        "nodeSelectors": {"pool": ["big"]},
        "affinities": [ZONE_AFFINITY],
        "maxCpus": 1024,
        "maxMemoryGib": 8192,
        "maxCriticParameters": 10**11,
        "maxTokensPerStep": 10**9,
        "maxProbeEpisodes": 10**6,
        "maxEvalTasksPerStep": 10**5,
        "maxGeneratorScale": 10**7,
    },
}
CHART_VALUES = {"environmentVerifier": {"nodeSelector": {"pool": "cpu"}}}
"""The operator's chart pins the environment verifiers to a pool (the default values pin nothing)."""


def api_settings(folder: Path, redis_url: str, recorder: RecordingApiServer) -> dict[str, str]:
    """The settings of this module's API process (the ``api`` fixture)."""
    tokens = {"alice": ALICE, "carol": CAROL}
    return kubernetes_api_settings(folder, redis_url, recorder, tokens, POLICIES, CHART_VALUES)


@pytest.fixture
def alice(api: ApiProcess, redis_db: Any) -> Iterator[httpx.Client]:
    with api.client(ALICE) as client:
        yield client


@pytest.fixture
def carol(api: ApiProcess, redis_db: Any) -> Iterator[httpx.Client]:
    with api.client(CAROL) as client:
        yield client


def _spec(**sections: Any) -> dict[str, Any]:
    return spec_data(**{"policy": {"path": MODEL}, **sections})


def _codeio(**sandbox: Any) -> dict[str, Any]:
    return _spec(environment={"kind": "codeio", "sandbox": sandbox})


def _refused(response: httpx.Response, field: str, *said: str, status: int) -> None:
    assert response.status_code == status, response.text
    fields = {item["field"]: item["message"] for item in response.json()["detail"]}
    assert field in fields, fields
    for text in said:
        assert text in fields[field], fields[field]


def _created(response: httpx.Response) -> str:
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _pod_specs(module_recorder: RecordingApiServer, experiment: str) -> dict[str, dict[str, Any]]:
    """Component -> the pod spec its workload was created with."""
    found = {}
    for method, _, _, body in module_recorder.calls:
        workload = method == "POST" and body.get("kind") in ("Deployment", "StatefulSet", "Job")
        if workload and experiment in json.dumps(body["metadata"]):
            component = body["metadata"]["labels"]["app.kubernetes.io/component"]
            found[component] = body["spec"]["template"]["spec"]
    return found


# ---- item 2: the sandbox's settings are the operator's -----------------------------------------
@pytest.mark.parametrize(
    ("sandbox", "field", "said"),
    [
        ({"namespaces": "off"}, "environment.sandbox.namespaces", "'auto'"),
        ({"audit_hook": False}, "environment.sandbox.audit_hook", "auditHook"),
    ],
)
def test_a_tenant_cannot_weaken_the_sandboxs_isolation(
    alice: httpx.Client, module_recorder: RecordingApiServer, sandbox: dict[str, Any], field: str, said: str
) -> None:
    posts = module_recorder.count("POST")
    _refused(alice.post("/v1/experiments", json=_codeio(**sandbox)), field, said, status=403)
    assert module_recorder.count("POST") == posts, "nothing was created"


@pytest.mark.parametrize(
    ("setting", "value", "limit"),
    [
        ("memory_mb", 10**12, "1024"),
        ("processes", 10**12, "64"),
        ("open_files", 10**12, "64"),
        ("file_size_mb", 10**12, "8"),
        ("disk_mb", 4096, "32"),
        ("wall_seconds", 600, "10"),
        ("cpu_seconds", 600, "5"),
    ],
)
def test_sandbox_limits_are_at_most_the_operators(
    alice: httpx.Client, setting: str, value: int, limit: str
) -> None:
    key = "".join(part.title() if i else part for i, part in enumerate(setting.split("_")))
    _refused(
        alice.post("/v1/experiments", json=_codeio(**{setting: value})),
        f"environment.sandbox.{setting}",
        limit,
        f"sandbox.{key}",
        status=422,
    )


def test_the_sandboxs_tmpfs_over_its_parallel_executions_is_bounded(alice: httpx.Client) -> None:
    spec = _codeio()
    spec["environment"]["parallel_executions"] = 64  # 64 x 32 MiB of tmpfs
    _refused(
        alice.post("/v1/experiments", json=spec),
        "environment.parallel_executions",
        "2048",
        "128",
        "sandbox.parallelDiskMb",
        status=422,
    )


def test_a_tenant_may_tighten_the_sandbox(alice: httpx.Client) -> None:
    tighter = {"namespaces": "require", "memory_mb": 512, "wall_seconds": 5, "disk_mb": 16, "processes": 8}
    _created(alice.post("/v1/experiments", json=_codeio(**tighter)))


def test_the_operator_may_loosen_the_sandbox_for_one_tenant(carol: httpx.Client, alice: httpx.Client) -> None:
    looser = _codeio(namespaces="off", audit_hook=False, memory_mb=4096)
    looser["environment"]["parallel_executions"] = 32
    _created(carol.post("/v1/experiments", json=looser))
    _refused(
        carol.post("/v1/experiments", json=_codeio(memory_mb=8192)),
        "environment.sandbox.memory_mb",
        "4096",
        status=422,
    )
    _refused(alice.post("/v1/experiments", json=looser), "environment.sandbox.namespaces", status=403)


# ---- item 4: placement is the operator's -------------------------------------------------------
@pytest.mark.parametrize(
    ("placement", "field"),
    [
        (
            {"environment_verifier": {"tolerations": [{"operator": "Exists"}]}},
            "placement.environment_verifier.tolerations.0",
        ),
        (
            {"orchestrator": {"node_selector": {"node-role.kubernetes.io/control-plane": ""}}},
            "placement.orchestrator.node_selector",
        ),
        (
            {
                "rollout": {
                    "affinity": {
                        "podAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {
                                        "matchLabels": {"lecritique.dev/experiment": "exp-0123456789"}
                                    },
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        }
                    }
                }
            },
            "placement.rollout.affinity",
        ),
        ({"environment_verifier": {"node_selector": {}}}, "placement.environment_verifier.node_selector"),
        (
            {"environment_verifier": {"node_selector": {"pool": "gpu"}}},
            "placement.environment_verifier.node_selector",
        ),
    ],
)
def test_placement_outside_the_chart_and_the_policy_is_refused(
    alice: httpx.Client, module_recorder: RecordingApiServer, placement: dict[str, Any], field: str
) -> None:
    posts = module_recorder.count("POST")
    _refused(alice.post("/v1/experiments", json=_spec(placement=placement)), field, "allowed", status=403)
    assert module_recorder.count("POST") == posts, "nothing was created"


def test_the_charts_own_placement_may_be_restated(alice: httpx.Client) -> None:
    restated = {
        "rollout": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "environment_verifier": {"node_selector": {"pool": "cpu"}, "affinity": {}},
        "orchestrator": {"tolerations": []},
    }
    _created(alice.post("/v1/experiments", json=_spec(placement=restated)))


def test_placement_the_policy_allows_is_accepted_and_rendered(
    carol: httpx.Client, alice: httpx.Client, module_recorder: RecordingApiServer
) -> None:
    allowed = {
        "value_trainer": {
            "tolerations": [POOL_TOLERATION],
            "node_selector": {"pool": "big"},
            "affinity": ZONE_AFFINITY,
        }
    }
    experiment = _created(carol.post("/v1/experiments", json=_spec(placement=allowed)))
    pod = _pod_specs(module_recorder, experiment)["value-trainer"]
    assert pod["tolerations"] == [POOL_TOLERATION] and pod["nodeSelector"] == {"pool": "big"}
    assert pod["affinity"] == ZONE_AFFINITY
    _refused(
        alice.post("/v1/experiments", json=_spec(placement=allowed)),
        "placement.value_trainer.tolerations.0",
        status=403,
    )
    other_value = {"value_trainer": {"node_selector": {"pool": "huge"}}}
    _refused(
        carol.post("/v1/experiments", json=_spec(placement=other_value)),
        "placement.value_trainer.node_selector",
        "big",
        status=403,
    )


HUGE_VERIFIERS = {
    "environment_verifier": {
        "replicas": 8,
        "resources": {
            "requests": {"cpu": "64", "memory": "512Gi"},
            "limits": {"cpu": "100000", "memory": "1Ei"},
        },
    }
}


@pytest.mark.parametrize(
    ("resource", "limit", "key"),
    [("CPU limits", "256", "maxCpus"), ("memory limits", "2048 GiB", "maxMemoryGib")],
)
def test_cpu_and_memory_over_all_pods_are_bounded(
    alice: httpx.Client, resource: str, limit: str, key: str
) -> None:
    _refused(
        alice.post("/v1/experiments", json=_spec(placement=HUGE_VERIFIERS)),
        "placement",
        resource,
        limit,
        key,
        status=422,
    )


def test_cpu_requests_alone_count_too(alice: httpx.Client, carol: httpx.Client) -> None:
    many = {
        "environment_verifier": {
            "replicas": 8,
            "resources": {"requests": {"cpu": "64"}, "limits": {"cpu": "64"}},
        }
    }
    _refused(
        alice.post("/v1/experiments", json=_spec(placement=many)),
        "placement",
        "CPU requests",
        "256",
        status=422,
    )
    _created(carol.post("/v1/experiments", json=_spec(placement=many)))


# ---- item 5: sizes have quotas -----------------------------------------------------------------
def _no_critic(**sections: Any) -> dict[str, Any]:
    return _spec(critic=None, estimator={"name": "rloo"}, **sections)


@pytest.mark.parametrize(
    ("spec", "field", "said"),
    [
        (
            _spec(
                critic={"kind": "discriminative", "tiny": {"layers": 256, "hidden": 65_536}, "init": "fresh"}
            ),
            "critic.tiny",
            ("1000000000", "maxCriticParameters"),
        ),
        (
            _spec(critic={"kind": "discriminative", "tiny": {"layers": 64}}),
            "critic.tiny.hidden",
            ("maxCriticParameters",),
        ),
        (
            _no_critic(
                rollout={"tasks_per_step": 65_536, "group_size": 1024, "sampling": {"max_tokens": 32_768}}
            ),
            "rollout",
            ("33554432", "maxTokensPerStep"),
        ),
        (
            _spec(critic_probe={"states": 100_000, "continuations": 4096, "every": 1}),
            "critic_probe",
            ("16384", "maxProbeEpisodes"),
        ),
        (
            _spec(orchestrator={"eval_tasks": 100_000, "eval_every": 1}),
            "orchestrator.eval_tasks",
            ("1024", "maxEvalTasksPerStep"),
        ),
        (
            _spec(
                environment={
                    "kind": "reasoning_gym",
                    "datasets": {"chain_sum": {"config": {"max_terms": 10**8}}},
                }
            ),
            "environment.datasets.chain_sum.config.max_terms",
            ("maxGeneratorScale",),
        ),
        (
            _spec(
                environment={
                    "kind": "reasoning_gym",
                    "datasets": {"chain_sum": {"config": {"max_terms": [[[[[6]]]]]}}},
                }
            ),
            "environment.datasets.chain_sum.config.max_terms",
            ("deep",),
        ),
        (
            _spec(
                environment={
                    "kind": "reasoning_gym",
                    "datasets": {"chain_sum": {"config": {"terms_bomb": 1}}},
                }
            ),
            "environment.datasets.chain_sum.config.terms_bomb",
            ("max_terms",),
        ),
    ],
)
def test_sizes_over_the_tenants_quotas_are_422_naming_field_limit_and_key(
    alice: httpx.Client, spec: dict[str, Any], field: str, said: tuple[str, ...]
) -> None:
    _refused(alice.post("/v1/experiments", json=spec), field, *said, status=422)


@pytest.mark.parametrize("data_file", ["/etc/passwd", "../../../../../../etc/passwd", "words3to10.txt/../x"])
def test_a_generator_setting_naming_a_file_names_one_of_reasoning_gyms_own(
    alice: httpx.Client, data_file: str
) -> None:
    """spell_backward joins ``data_file`` to reasoning-gym's data folder: an absolute path or ``..``
    would turn any file of the verifier's host into the tasks' words (found with the config bounds)."""
    environment = {
        "kind": "reasoning_gym",
        "datasets": {"spell_backward": {"config": {"data_file": data_file}}},
    }
    _refused(
        alice.post("/v1/experiments", json=_spec(environment=environment)),
        "environment.datasets.spell_backward.config.data_file",
        "words3to10.txt",
        status=403,
    )


def test_sizes_within_the_quotas_are_accepted(alice: httpx.Client, carol: httpx.Client) -> None:
    sized = [
        _spec(critic={"kind": "discriminative", "tiny": {"layers": 4, "hidden": 128}}),
        _no_critic(rollout={"tasks_per_step": 256, "group_size": 16, "sampling": {"max_tokens": 4096}}),
        _spec(critic_probe={"states": 256, "continuations": 64, "every": 1}),
        _spec(orchestrator={"eval_tasks": 1024, "eval_every": 1}),
        _spec(orchestrator={"eval_tasks": 100_000, "eval_every": 1000}),
        _spec(
            environment={
                "kind": "reasoning_gym",
                "datasets": {
                    "chain_sum": {"config": {"min_terms": 2, "max_terms": 12}},
                    "spell_backward": {"config": {"data_file": "words3to10.txt"}},
                },
            }
        ),
    ]
    for spec in sized:
        experiment = _created(alice.post("/v1/experiments", json=spec))
        assert alice.delete(f"/v1/experiments/{experiment}").json()["status"] == "cancelled"
    big = _spec(critic={"kind": "discriminative", "tiny": {"layers": 64, "hidden": 8192}, "init": "fresh"})
    _created(carol.post("/v1/experiments", json=big))
