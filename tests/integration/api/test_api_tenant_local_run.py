"""What an operator allows one tenant works end to end: a real ``lecritique api serve`` (local
launcher) runs a tenant's experiment on a dataset in the tenant's own dataset root, scored by the
python verifier the operator allowed, with a TensorBoard folder inside the run directory. The same
spec from another tenant is refused, and so is a dataset path that resolves out of the root.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lecritique.client import LecritiqueClient
from lecritique.envs import get_environment
from tests.integration.api.api_process import ApiProcess, local_api_settings
from tests.tiny_policies import quick_policy

RESEARCH, GUEST = "research-local-token", "guest-local-token"
VERIFIER = "tests.integration.api.tenant_verifiers:half_credit"


def _dataset(path: Path) -> None:
    """Sudoku-mini puzzles as rows, so that the tiny test policy reads its own kind of prompt."""
    sudoku = get_environment("sudoku", size=4, empty_cells=[1, 2])
    tasks = sudoku.sample_tasks(16, "train", seed=0)
    path.write_text(
        "".join(
            json.dumps({"id": i, "prompt": t.prompt, "answer": t.reference}) + "\n"
            for i, t in enumerate(tasks)
        )
    )


def _spec(path: Path, policy: Path) -> dict[str, Any]:
    return {
        "name": "tenant-dataset",
        "environment": {
            "kind": "dataset",
            "path": str(path),
            "id_column": "id",
            "verifier": {"kind": "python", "entry_point": VERIFIER},
        },
        "policy": {"path": str(policy)},
        "rollout": {"group_size": 2, "tasks_per_step": 4, "sampling": {"max_tokens": 8}},
        "estimator": {"name": "rloo"},
        "orchestrator": {"steps": 2, "max_off_policy_steps": 0},
        "tracking": [{"kind": "tensorboard", "log_dir": "tb"}],
    }


@pytest.mark.slow(seconds=300)
@pytest.mark.timeout(900)
def test_an_allowed_verifier_and_dataset_root_work_end_to_end(
    tmp_path: Path, embedded_redis: Any, redis_db: Any
) -> None:
    policy = quick_policy()
    datasets = tmp_path / "datasets"
    (datasets / "research").mkdir(parents=True)
    data = datasets / "research" / "puzzles.jsonl"
    _dataset(data)
    (datasets / "research" / "escape.jsonl").symlink_to(Path("/etc/hostname"))
    settings = local_api_settings(
        embedded_redis.url,
        tmp_path / "runs",
        {"research": RESEARCH, "guest": GUEST},
        {
            "*": {"modelRoots": [str(Path(policy).resolve().parent)]},
            "research": {"verifierEntryPoints": [VERIFIER]},
        },
        datasets_root=str(datasets),
    )
    api = ApiProcess(settings, tmp_path / "api.log").start()
    try:
        with api.client(GUEST) as guest:
            refused = guest.post("/v1/experiments", json=_spec(data, policy))
            assert refused.status_code == 403, refused.text
            assert {item["field"] for item in refused.json()["detail"]} == {
                "environment.path",
                "environment.verifier.entry_point",
            }
        with api.client(RESEARCH) as research:
            escape = research.post(
                "/v1/experiments", json=_spec(datasets / "research" / "escape.jsonl", policy)
            )
            assert escape.status_code == 403 and escape.json()["detail"][0]["field"] == "environment.path", (
                escape.text
            )
            created = research.post("/v1/experiments", json=_spec(data, policy))
            assert created.status_code == 201, created.text
            experiment = created.json()["id"]
            # The client's own wait (a hang guard of 6 minutes, not a speed bound).
            with LecritiqueClient(api.url, RESEARCH) as client:
                view = client.wait(experiment, poll_seconds=2, timeout=360)
            assert view.status == "succeeded", view.error
            rows = research.get(f"/v1/experiments/{experiment}/metrics").json()["rows"]
        assert [row["step"] for row in rows] == [1, 2]
        assert all(row["reward_mean"] == pytest.approx(0.5) for row in rows), (
            "the allowed verifier scored every answer"
        )
        run_dir = tmp_path / "runs" / experiment
        assert list((run_dir / "run" / "tb").glob("events.out.tfevents.*")), (
            "TensorBoard wrote inside the run directory"
        )
    finally:
        api.stop()
