"""The kubernetes launcher's REST calls, made by the real ``kubernetes`` client over HTTP.

No kube-apiserver can run here, so a small recording HTTP endpoint answers in the Kubernetes
wire format. What this proves: the launcher creates every rendered object at the right URL,
tolerates AlreadyExists on a retried launch, reads the orchestrator Job's conditions, lists the
experiment's objects by its label and deletes each by name (never ``deletecollection``, which
would delete whatever matches), and never makes a call that the chart's Role (REQUIRED_RULES)
does not allow. It does not prove cluster behaviour.
"""

from __future__ import annotations

import pytest
from kubernetes import client as kubernetes_client
from kubernetes.client.exceptions import ApiException

from lecritique.config.experiment import parse_spec
from lecritique.launch.base import LogNotFound, Submission
from lecritique.launch.components import ChartDefaults
from lecritique.launch.kubernetes.launcher import REQUIRED_RULES, KubernetesLauncher
from lecritique.launch.kubernetes.render import EXPERIMENT_LABEL, render_experiment_objects
from lecritique.tenancy.policy import TenantPolicy
from tests.helm_support import NAMESPACE, RELEASE, launcher_defaults, spec_data
from tests.integration.api.kubernetes_recorder import RecordingApiServer

EXPERIMENT = "exp-00aa11bb22"


@pytest.fixture
def api_server(recorder: RecordingApiServer) -> RecordingApiServer:
    return recorder


def _launcher(server: RecordingApiServer) -> KubernetesLauncher:
    configuration = kubernetes_client.Configuration(host=server.url)
    return KubernetesLauncher(
        ChartDefaults.model_validate(launcher_defaults()), kubernetes_client.ApiClient(configuration)
    )


def _permission(method: str, path: str) -> tuple[str, str, str]:
    """(apiGroup, resource, verb) RBAC checks for a namespaced request path."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    assert rest[0] == "namespaces" and rest[1] == NAMESPACE, path
    resource, named = rest[2], len(rest) > 3
    if len(rest) > 4:  # a subresource: pods/<name>/log
        resource = f"{resource}/{rest[4]}"
    verb = {
        "POST": "create",
        "GET": "get" if named else "list",
        "DELETE": "delete" if named else "deletecollection",
    }[method]
    return group, resource, verb


def _submit(spec: object, experiment_id: str = EXPERIMENT, redis_url: str | None = None) -> Submission:
    return Submission(
        experiment_id=experiment_id,
        spec=spec,  # type: ignore[arg-type]
        tenant="alice",
        policy=TenantPolicy(),
        redis_url=redis_url,
    )


def _allowed() -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in REQUIRED_RULES
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_launch_creates_every_rendered_object_and_a_retry_is_harmless(api_server: RecordingApiServer) -> None:
    launcher = _launcher(api_server)
    spec = parse_spec(spec_data())
    launcher.launch(_submit(spec))
    expected = render_experiment_objects(spec, EXPERIMENT, launcher.defaults)
    posts = [(path, body) for method, path, _, body in api_server.calls if method == "POST"]
    assert [
        {**body, "metadata": {k: v for k, v in body["metadata"].items() if k != "uid"}} for _, body in posts
    ] == expected
    for path, body in posts:
        resource = {
            "ConfigMap": "configmaps",
            "Service": "services",
            "Deployment": "deployments",
            "StatefulSet": "statefulsets",
            "Job": "jobs",
            "NetworkPolicy": "networkpolicies",
            "PodDisruptionBudget": "poddisruptionbudgets",
            "Secret": "secrets",
        }[body["kind"]]
        assert path.endswith(f"/namespaces/{NAMESPACE}/{resource}")
    launcher.launch(_submit(spec))  # every create now answers 409 AlreadyExists
    assert len([c for c in api_server.calls if c[0] == "POST"]) == 2 * len(expected)
    assert len(api_server.objects) == len(expected)


def test_job_conditions_become_experiment_states(api_server: RecordingApiServer) -> None:
    launcher = _launcher(api_server)
    assert launcher.job_status(EXPERIMENT).state == "missing"
    launcher.launch(_submit(parse_spec(spec_data())))
    assert launcher.job_status(EXPERIMENT).state == "running"
    api_server.job_active = 0
    assert launcher.job_status(EXPERIMENT).state == "pending"
    api_server.job_conditions = [
        {
            "type": "Failed",
            "status": "True",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
        }
    ]
    failed = launcher.job_status(EXPERIMENT)
    assert failed.state == "failed" and "BackoffLimitExceeded" in failed.message
    api_server.job_conditions = [{"type": "Complete", "status": "True"}]
    assert launcher.job_status(EXPERIMENT).state == "succeeded"
    assert launcher.poll(EXPERIMENT, {}).state == "succeeded"


def test_delete_removes_every_object_of_the_experiment_and_only_those(api_server: RecordingApiServer) -> None:
    launcher = _launcher(api_server)
    spec = parse_spec(spec_data())
    launcher.launch(_submit(spec))
    launcher.launch(_submit(spec, "exp-other00001"))
    count = len(render_experiment_objects(spec, EXPERIMENT, launcher.defaults))
    assert len(api_server.objects) == 2 * count
    launcher.delete(EXPERIMENT, keep_job=True)
    remaining = [
        o for o in api_server.objects.values() if o["metadata"]["labels"][EXPERIMENT_LABEL] == EXPERIMENT
    ]
    assert [o["kind"] for o in remaining] == ["Job"]
    launcher.cancel(EXPERIMENT, {})
    assert all(
        o["metadata"]["labels"][EXPERIMENT_LABEL] == "exp-other00001" for o in api_server.objects.values()
    )
    assert len(api_server.objects) == count
    lists = [
        query for method, path, query, _ in api_server.calls if method == "GET" and "labelSelector" in query
    ]
    assert lists and all(
        q["labelSelector"] == [f"{EXPERIMENT_LABEL}={EXPERIMENT},app.kubernetes.io/instance={RELEASE}"]
        for q in lists
    )
    deletes = [
        (path, body)
        for method, path, _, body in api_server.calls
        if method == "DELETE" and "/secrets/" not in path
    ]
    assert len(deletes) == count and all(
        path.rsplit("/", 1)[-1].startswith(EXPERIMENT) for path, _ in deletes
    )
    assert all(
        body["propagationPolicy"] == "Background" and body["preconditions"]["uid"] for _, body in deletes
    )


def test_an_experiments_own_redis_user_is_a_secret_its_pods_read(api_server: RecordingApiServer) -> None:
    """Issue #46, item 5: each experiment's pods connect as its own Redis user, whose password is in a
    Secret of the experiment (created before the workloads, deleted by name with them)."""
    launcher = _launcher(api_server)
    assert launcher.runs_redis_url == launcher.defaults.redis_url
    url = f"redis://{EXPERIMENT}:hmac-password@lecritique-redis:6379/0"
    launcher.launch(_submit(parse_spec(spec_data()), redis_url=url))
    posted = [body for method, _, _, body in api_server.calls if method == "POST"]
    kinds = [body["kind"] for body in posted]
    secret = posted[kinds.index("Secret")]
    assert secret["metadata"]["name"] == f"{EXPERIMENT}-redis"
    assert secret["metadata"]["labels"][EXPERIMENT_LABEL] == EXPERIMENT
    assert secret["stringData"] == {"password": "hmac-password"}
    first_workload = min(kinds.index(kind) for kind in ("Deployment", "StatefulSet", "Job"))
    assert kinds.index("Secret") < first_workload
    connecting = 0
    for body in posted:
        if body["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        for container in body["spec"]["template"]["spec"]["containers"]:
            env = {item["name"]: item for item in container["env"]}
            assert "hmac-password" not in str(env)
            if "REDIS_URL" not in env:
                continue
            connecting += 1
            assert env["REDIS_URL"]["value"].startswith(f"redis://{EXPERIMENT}:$(LECRITIQUE_REDIS_PASSWORD)@")
            assert env["LECRITIQUE_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
                "name": f"{EXPERIMENT}-redis",
                "key": "password",
            }
    assert connecting >= 4  # orchestrator, rollout, value evaluator, trainers; not the verifier
    assert f"/api/v1/namespaces/{NAMESPACE}/secrets/{EXPERIMENT}-redis" in api_server.objects
    launcher.delete(EXPERIMENT, keep_job=True)
    assert f"/api/v1/namespaces/{NAMESPACE}/secrets/{EXPERIMENT}-redis" not in api_server.objects
    secret_calls = [(method, path) for method, path, _, _ in api_server.calls if "/secrets" in path]
    assert {method for method, _ in secret_calls} == {"POST", "DELETE"}  # never listed or read


def test_every_call_is_allowed_by_the_chart_role(api_server: RecordingApiServer) -> None:
    launcher = _launcher(api_server)
    launcher.launch(_submit(parse_spec(spec_data()), redis_url=f"redis://{EXPERIMENT}:pw@redis:6379/0"))
    launcher.job_status(EXPERIMENT)
    _add_pod(api_server, "exp-00aa11bb22-orchestrator-x1", "orchestrator", "step 1\n")
    launcher.logs(EXPERIMENT, {}, "run", 10)
    launcher.delete(EXPERIMENT, keep_job=True)
    launcher.delete(EXPERIMENT)
    used = {_permission(method, path) for method, path, _, _ in api_server.calls}
    assert used <= _allowed()
    # ... and the Role grants nothing the launcher does not use.
    assert used == _allowed()


def test_server_errors_other_than_conflicts_propagate(api_server: RecordingApiServer) -> None:
    launcher = _launcher(api_server)
    # A quota or admission rejection: the launch fails loudly instead of half-succeeding silently.
    api_server.http.RequestHandlerClass.do_POST = lambda self: self._reply(
        403, {"kind": "Status", "apiVersion": "v1", "code": 403}
    )  # type: ignore[attr-defined]
    with pytest.raises(ApiException) as caught:
        launcher.launch(_submit(parse_spec(spec_data())))
    assert caught.value.status == 403


def _add_pod(
    server: RecordingApiServer, name: str, component: str, log: str, experiment: str = EXPERIMENT
) -> None:
    labels = {
        EXPERIMENT_LABEL: experiment,
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": component,
    }
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"
    server.objects[path] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "uid": name},
    }
    server.pod_logs[name] = log


def test_logs_come_from_the_component_pod_by_ordinal(api_server: RecordingApiServer) -> None:
    launcher = _launcher(api_server)
    with pytest.raises(LogNotFound, match="no pod for 'rollout-0' \\(components with pods: none yet\\)"):
        launcher.logs(EXPERIMENT, {}, "rollout-0", 5)
    _add_pod(api_server, f"{EXPERIMENT}-rollout-1", "rollout", "r1 a\nr1 b\nr1 c\n")
    _add_pod(api_server, f"{EXPERIMENT}-rollout-0", "rollout", "r0\n")
    _add_pod(
        api_server, "exp-other00001-rollout-0", "rollout", "someone else's\n", experiment="exp-other00001"
    )
    _add_pod(api_server, f"{EXPERIMENT}-orchestrator-abcde", "orchestrator", "loop\n")
    assert launcher.logs(EXPERIMENT, {}, "rollout-1", 2) == "r1 b\nr1 c\n"
    assert launcher.logs(EXPERIMENT, {}, "rollout", 5) == "r0\n"
    assert (
        launcher.logs(EXPERIMENT, {}, "run", 5)
        == launcher.logs(EXPERIMENT, {}, "orchestrator", 5)
        == "loop\n"
    )
    with pytest.raises(LogNotFound, match="components with pods: orchestrator, rollout"):
        launcher.logs(EXPERIMENT, {}, "rollout-2", 5)
    del api_server.pod_logs[f"{EXPERIMENT}-rollout-0"]  # a pod whose container has not started
    with pytest.raises(LogNotFound, match="no log for 'rollout-0' yet"):
        launcher.logs(EXPERIMENT, {}, "rollout-0", 5)
