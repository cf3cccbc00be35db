"""The Python client and the client commands against a real API process (uvicorn, real Redis).

Experiments run under the local launcher. The fast tests submit specs whose dataset file does not
exist, so ``lecritique run`` stops at its dataset check within seconds (a real run, a real log);
their metrics series are written into Redis the way an orchestrator writes them. The slow test
submits a tiny real experiment with ``lecritique submit --wait`` and reads everything back.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from lecritique.client import InvalidSpec, LecritiqueClient, NotFound, Unauthorized
from tests.helm_support import ROOT, tiny_spec_data
from tests.integration.api.api_process import ApiProcess, local_api_settings
from tests.tiny_policies import quick_policy

ALICE, BOB = "alice-token", "bob-token"


def api_settings(folder: Path, redis_url: str, recorder: Any) -> dict[str, str]:
    """The settings of this module's API process (the ``api`` fixture): the local launcher."""
    # The specs here name models under /nonexistent, the temporary directory and the suite's cached
    # test policy.
    roots = ["/nonexistent", tempfile.gettempdir(), str(quick_policy().resolve().parent)]
    return local_api_settings(
        redis_url,
        folder / "runs",
        {"alice": ALICE, "bob": BOB},
        {"*": {"modelRoots": roots, "datasetRoots": roots}},
        reconcile_seconds="1",
    )


def failing_spec(name: str) -> dict[str, Any]:
    """Valid for the API; ``lecritique run`` stops at once: the dataset file does not exist."""
    return {
        "name": name,
        "environment": {"kind": "dataset", "path": "/nonexistent/problems.jsonl"},
        "policy": {"path": "/nonexistent/model"},
        "estimator": {"name": "mean"},
        "orchestrator": {"steps": 2},
    }


def write_metrics(embedded_redis: Any, experiment_id: str, rows: int) -> None:
    """What an orchestrator writes for each step (cli/orchestrate.py's sink)."""
    client = embedded_redis.client()
    client.delete(f"lecritique:{experiment_id}:metrics")
    client.rpush(
        f"lecritique:{experiment_id}:metrics",
        *[
            json.dumps(
                {
                    "step": step,
                    "reward_mean": step / rows,
                    "value_explained_variance": 0.5,
                    "tether_rho": 0.25,
                }
            )
            for step in range(1, rows + 1)
        ],
    )
    client.close()


def cli(
    api: ApiProcess,
    *args: str,
    token: str | None = ALICE,
    stdin: str | None = None,
    config: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LECRITIQUE_API")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "libs"), str(ROOT)])
    env["LECRITIQUE_API_URL"] = api.url
    if token is not None:
        env["LECRITIQUE_API_TOKEN"] = token
    env["LECRITIQUE_CLIENT_CONFIG"] = str(config or Path("/nonexistent/client.json"))
    return subprocess.run(
        [sys.executable, "-m", "lecritique", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_submit_list_get_wait_and_the_clear_errors(api: ApiProcess) -> None:
    with LecritiqueClient(api.url, ALICE, sleep=lambda _: time.sleep(0.2)) as alice:
        experiment = alice.submit(failing_spec("client-basics"))
        assert experiment.status == "running" and experiment.name == "client-basics"
        assert experiment.id in [e.id for e in alice.list()]
        assert alice.get(experiment.id).spec["environment"]["kind"] == "dataset"  # type: ignore[index]
        finished = alice.wait(experiment.id, poll_seconds=0.5, timeout=180)
        assert finished.status == "failed" and "exited with code 2" in (finished.error or "")
        with pytest.raises(NotFound, match="not found: experiment_id: no such experiment"):
            alice.get("exp-0000000000")
        with pytest.raises(InvalidSpec) as invalid:
            alice.submit(
                {
                    **failing_spec("bad"),
                    "critic": {"kind": "discriminative", "replay": {"capacity": 0}},
                    "rollout": {"group_sise": 4},
                }
            )
        assert {(p.field, p.message) for p in invalid.value.problems} == {
            ("critic.replay.capacity", "Input should be greater than or equal to 1"),
            (
                "rollout.group_sise",
                "unknown field 'group_sise'; did you mean 'group_size'? "
                "(known: engine, group_size, replicas, sampling, tasks_per_step)",
            ),
        }
        assert "critic.replay.capacity: Input should be greater than or equal to 1" in str(invalid.value)
    with LecritiqueClient(api.url, BOB) as bob, pytest.raises(NotFound, match="no such experiment"):
        bob.get(experiment.id)
    with (
        LecritiqueClient(api.url, "wrong") as stranger,
        pytest.raises(Unauthorized, match="the token given is wrong"),
    ):
        stranger.list()


def test_metrics_come_in_pages_and_the_report_is_drawn_from_them(
    api: ApiProcess, embedded_redis: Any
) -> None:
    with LecritiqueClient(api.url, ALICE) as alice:
        experiment = alice.submit(failing_spec("client-metrics"))
        with pytest.raises(NotFound, match="has no metrics yet"):
            alice.report(experiment.id)
        write_metrics(embedded_redis, experiment.id, 2500)
        rows = alice.metrics(experiment.id, page_size=1000)
        assert [row["step"] for row in rows] == list(range(1, 2501))
        assert [row["step"] for row in alice.metrics(experiment.id, offset=2498)] == [2499, 2500]
        png, markdown = alice.report(experiment.id)
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and "| policy steps | 2500 |" in markdown
        assert markdown.startswith("# client-metrics")
    with api.client(ALICE) as http:
        page = http.get(
            f"/v1/experiments/{experiment.id}/metrics.jsonl", params={"offset": 1000, "limit": 1000}
        )
        assert page.headers["content-type"] == "application/x-ndjson"
        assert page.headers["X-Total-Rows"] == "2500" and page.headers["X-Next-Offset"] == "2000"
        assert (
            page.headers["Link"]
            == f'</v1/experiments/{experiment.id}/metrics.jsonl?offset=2000&limit=1000>; rel="next"'
        )
        last = http.get(
            f"/v1/experiments/{experiment.id}/metrics.jsonl", params={"offset": 2000, "limit": 1000}
        )
        assert "X-Next-Offset" not in last.headers and len(last.text.splitlines()) == 500
        assert (
            http.get(f"/v1/experiments/{experiment.id}/metrics.jsonl", params={"limit": 0}).status_code == 422
        )
    with api.client(BOB) as http:
        assert http.get(f"/v1/experiments/{experiment.id}/report.png").status_code == 404
        assert http.get(f"/v1/experiments/{experiment.id}/metrics.jsonl").status_code == 404
    assert httpx.get(f"{api.url}/v1/experiments/{experiment.id}/report.md").status_code == 401


def test_logs_of_a_local_run(api: ApiProcess) -> None:
    with LecritiqueClient(api.url, ALICE) as alice:
        experiment = alice.submit(failing_spec("client-logs"))
        alice.wait(experiment.id, poll_seconds=0.5, timeout=180)
        assert "dataset /nonexistent/problems.jsonl does not exist" in " ".join(
            alice.logs(experiment.id).split()
        )
        assert len(alice.logs(experiment.id, tail=1).splitlines()) == 1
        with pytest.raises(NotFound, match=r"no log 'orchestrator' \(known: run"):
            alice.logs(experiment.id, component="orchestrator")
        with pytest.raises(InvalidSpec, match="is not a process name"):
            alice.logs(experiment.id, component="../../etc/passwd")


def test_the_commands(api: ApiProcess, tmp_path: Path, embedded_redis: Any) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(failing_spec("cli-run")))
    submitted = cli(api, "submit", str(spec))
    assert submitted.returncode == 0, submitted.stderr
    experiment = submitted.stdout.strip()
    assert experiment.startswith("exp-") and len(submitted.stdout.splitlines()) == 1
    waited = cli(api, "experiments", "wait", experiment, "--poll", "0.5")
    assert (
        waited.returncode == 1 and f"{experiment} failed: lecritique run exited with code 2" in waited.stderr
    )
    assert json.loads(cli(api, "experiments", "get", experiment).stdout)["status"] == "failed"
    assert experiment in cli(api, "experiments", "list").stdout
    write_metrics(embedded_redis, experiment, 3)
    assert [
        json.loads(line)["step"]
        for line in cli(api, "experiments", "metrics", experiment).stdout.splitlines()
    ] == [1, 2, 3]
    downloaded = cli(api, "experiments", "report", experiment, "--out", str(tmp_path / "report"))
    assert downloaded.returncode == 0 and (tmp_path / "report" / "report.png").read_bytes().startswith(
        b"\x89PNG"
    )
    assert "does not exist" in cli(api, "experiments", "logs", experiment).stdout
    assert cli(api, "experiments", "cancel", experiment).stdout.strip() == f"{experiment} failed"

    spec.write_text(yaml.safe_dump({**failing_spec("cli-bad"), "orchestrator": {"steps": 0}}))
    invalid = cli(api, "submit", str(spec))
    assert (
        invalid.returncode == 2
        and "orchestrator.steps: Input should be greater than or equal to 1" in invalid.stderr
    )
    missing = cli(api, "experiments", "get", "exp-0000000000")
    assert missing.returncode == 4 and "experiment_id: no such experiment" in missing.stderr
    other = cli(api, "experiments", "get", experiment, token=BOB)
    assert (
        other.returncode == 4 and "experiment_id: no such experiment" in other.stderr
    )  # another tenant's: not found either
    refused = cli(api, "experiments", "list", token="wrong")
    assert refused.returncode == 3 and "the token in LECRITIQUE_API_TOKEN is wrong" in refused.stderr
    relative = failing_spec("cli-relative")
    relative["environment"]["path"] = "problems.jsonl"
    spec.write_text(yaml.safe_dump(relative))
    refused_path = cli(
        api, "submit", str(spec)
    )  # through the API a relative dataset path is refused (issue 30)
    assert refused_path.returncode != 0 and "environment.path" in refused_path.stderr
    marginal = {
        **failing_spec("cli-marginal"),
        "estimator": {"name": "value"},
        "rollout": {"tasks_per_step": 16, "group_size": 4},
        "critic": {"context": "none", "updates_per_step": 4, "batch_size": 32},
    }
    spec.write_text(yaml.safe_dump(marginal))
    warned = cli(api, "submit", str(spec))  # accepted, and the person submitting hears why it may lag
    assert warned.returncode == 0 and warned.stdout.strip().startswith("exp-"), warned.stderr
    assert "warning: critic.updates_per_step = 4 is marginal" in warned.stderr


def test_a_failed_runs_error_keeps_each_message_on_one_line(api: ApiProcess) -> None:
    """The run's console is not wrapped at 80 columns, so the stored error has no newline inside a message (issue 30)."""
    spec = failing_spec("long-path")
    path = "/nonexistent/" + "a-long-directory-name/" * 4 + "problems.jsonl"
    spec["environment"]["path"] = path
    with LecritiqueClient(api.url, ALICE) as alice:
        experiment = alice.submit(spec)
        final = alice.wait(experiment.id, poll_seconds=0.5, timeout=120)
    assert final.status == "failed" and final.error is not None
    assert f"dataset {path} does not exist" in final.error.splitlines(), final.error


def test_login_checks_the_token_and_saves_it_for_the_owner_only(api: ApiProcess, tmp_path: Path) -> None:
    config = tmp_path / "config" / "client.json"
    wrong = cli(api, "login", "--token-stdin", stdin="wrong\n", token=None, config=config)
    assert wrong.returncode == 3 and not config.exists()
    logged_in = cli(
        api, "login", "--api", api.url, "--token-stdin", stdin=f"{ALICE}\n", token=None, config=config
    )
    assert logged_in.returncode == 0, logged_in.stderr
    assert json.loads(config.read_text()) == {"api_url": api.url, "token": ALICE}
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    listed = cli(
        api, "experiments", "list", token=None, config=config
    )  # no token in the environment: the file's
    assert listed.returncode == 0, listed.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_submit_and_wait_for_a_real_experiment(api: ApiProcess, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_spec_data("client-e2e", steps=3, policy_path=quick_policy())))
    result = cli(api, "submit", str(spec), "--wait", "--poll", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    experiment = result.stdout.strip()
    assert f"{experiment} succeeded at step 3" in result.stderr and "step 3/3" in result.stderr
    with LecritiqueClient(api.url, ALICE) as alice:
        rows = alice.metrics(experiment)
        assert [row["step"] for row in rows] == [0, 1, 2, 3] and all("reward_mean" in row for row in rows[1:])
        png, markdown = alice.download_report(experiment, tmp_path / "report")
        assert png.read_bytes().startswith(b"\x89PNG") and "| policy steps | 3 |" in markdown.read_text()
        assert "orchestrator finished at step 3" in alice.logs(experiment, component="orchestrator", tail=50)


def test_the_client_reads_the_api_response_with_the_servers_own_model() -> None:
    """One view model (issue 40): the server answers with the class the client parses into."""
    from lecritique.client import Experiment
    from lecritique.client.models import FINAL_STATES, ExperimentFields, Status
    from lecritique.client.models import ExperimentView as ClientView
    from services.api.records import ExperimentRecord
    from services.api.schemas import ExperimentView

    assert ExperimentView is ClientView and issubclass(Experiment, ExperimentView)
    assert Experiment.model_fields.keys() == ExperimentView.model_fields.keys()
    assert set(Status.__args__) >= FINAL_STATES
    # The record the API stores and the view its tenant reads declare their shared fields once.
    assert issubclass(ExperimentRecord, ExperimentFields) and issubclass(ExperimentView, ExperimentFields)


def test_submit_applies_set_overrides_before_sending(api: ApiProcess, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(failing_spec("cli-base")))
    submitted = cli(api, "submit", str(spec), "--set", "name=cli-overridden")
    assert submitted.returncode == 0, submitted.stderr
    shown = json.loads(cli(api, "experiments", "get", submitted.stdout.strip()).stdout)
    assert shown["name"] == "cli-overridden"
    refused = cli(api, "submit", str(spec), "--set", "orchestrator.stepz=3")
    assert refused.returncode == 2
    assert "orchestrator: unknown field 'stepz'; did you mean 'steps'?" in refused.stderr
    invalid = cli(api, "submit", str(spec), "--set", "orchestrator.steps=0")  # the API validates the result
    assert (
        invalid.returncode == 2
        and "orchestrator.steps: Input should be greater than or equal to 1" in invalid.stderr
    )
