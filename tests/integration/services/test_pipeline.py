"""The five services as real processes over gRPC with a real Redis, driven by the orchestrator."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter, defaultdict

import grpc
import pytest

from lecritique.launch.local.launcher import REPO_ROOT
from lecritique.launch.local.processes import child_environment
from lecritique.models.policy import load_tokenizer
from lecritique.v1 import common_pb2, value_pb2_grpc
from tests.integration.services.conftest import (
    pipeline_spec,
    read_metrics,
    run_experiment,
    running_services,
    write_spec,
)

pytestmark = pytest.mark.slow

CRITIC_FREE = {"mean": {}}
CRITIC_ESTIMATORS = {
    "value": {},
    "gae": {"lambda_gae": "auto", "lambda_target": "auto"},
}
"""The estimators run here as processes: one without a critic, the plain value baseline (what the
critic is shown) and GAE (whose lambdas the value trainer resolves too). The estimator is math in
the orchestrator's process; every estimator of every shipped spec runs through the same services
over real gRPC in ``tests/integration/examples/test_examples_run.py``, and RLOO through the API's
processes in ``tests/integration/study/test_study_command.py``; the other four ran here as well
(20 s of processes each) and asserted nothing those do not."""
AUTO_LAMBDA = 0.4 ** (1 / 16)
"""Le Critique §7.2 calibration for the pipeline spec: 8 tokens per turn x 2 turns (1-2 empty cells)."""


@pytest.mark.parametrize("name", [*CRITIC_FREE, *CRITIC_ESTIMATORS])
def test_each_estimator_runs_policy_steps_through_all_services(name, tiny_policy, tmp_path):
    options = {**CRITIC_FREE, **CRITIC_ESTIMATORS}[name]
    critic = {} if name in CRITIC_ESTIMATORS else None
    spec = pipeline_spec(tiny_policy, estimator={"name": name, **options}, critic=critic)
    input_log = tmp_path / "critic-inputs.jsonl"
    rows = run_experiment(spec, tmp_path, {"LECRITIQUE_VALUE_INPUT_LOG": str(input_log)})
    assert [row["step"] for row in rows] == [1, 2]
    assert [row["policy_version"] for row in rows] == [1, 2]
    for row in rows:
        assert 0.0 <= row["reward_mean"] <= 1.0
        assert row["trajectories"] == 16 and row["dropped_stale"] == 0
        if name in CRITIC_ESTIMATORS:
            assert row["value_version"] >= 0
        else:
            assert row["value_version"] == -1
        if name == "gae":
            assert row["gae_lambda"] == pytest.approx(AUTO_LAMBDA)
    if name == "gae":  # the value trainer resolved the same lambda for its targets
        assert f"lambda_target = {AUTO_LAMBDA:.6f}" in (tmp_path / "logs" / "value-trainer.log").read_text()
    if name == "value":  # the pipeline spec's critic is a plain VF: it reads no context
        inputs = [json.loads(line) for line in input_log.read_text().splitlines()]
        assert inputs and all(item["context_text"] == "" and item["context_ids"] == [] for item in inputs)


def _metric(port: int, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _wait_for_metric(port: int, name: str, at_least: float, timeout: float = 60.0) -> float:
    """The metric's value once it reaches ``at_least`` (or its value at the timeout)."""
    deadline = time.monotonic() + timeout
    while (value := _metric(port, name)) < at_least and time.monotonic() < deadline:
        time.sleep(0.25)
    return value


def test_pvf_tether_with_two_rollout_replicas(tiny_policy, tmp_path):
    """The privileged critic sees the solved grid, the policy never does, both rollout replicas
    serve, and the critic version used by the orchestrator moves forward during the run. The
    critic trains in two torchrun ranks (the local launcher runs the value trainer under torchrun)."""
    spec = pipeline_spec(
        tiny_policy,
        rollout={"replicas": 2},
        # blocking: the first step must already see a warmed critic (TETHER's default, ``auto``,
        # steps at rho = 0 while the critic warms; tests/unit/orchestrator/test_warmup_stream.py)
        critic={"context": "reference", "warmup_updates": 2, "processes": 2, "warmup": "blocking"},
        orchestrator={"steps": 4},
    )
    prompt_log, input_log = tmp_path / "prompts.jsonl", tmp_path / "critic-inputs.jsonl"
    env = {"LECRITIQUE_ROLLOUT_PROMPT_LOG": str(prompt_log), "LECRITIQUE_VALUE_INPUT_LOG": str(input_log)}
    with running_services(spec, tmp_path / "run", env) as launcher:
        launcher.start_orchestrator()
        assert launcher.wait() == 0
        rollouts = [p for p in launcher.services if p.name.startswith("rollout-")]
        served = [
            _metric(p.metrics_port, "lecritique_rpc_requests_total", method="Generate") for p in rollouts
        ]
        assert len(served) == 2 and all(count > 0 for count in served), served
        evaluator = next(p for p in launcher.services if p.name.startswith("value-evaluator"))
        first_version = read_metrics(tmp_path / "run")[0]["value_version"]
        served_version = _wait_for_metric(
            evaluator.metrics_port, "lecritique_value_evaluator_version", first_version + 1
        )
        with grpc.insecure_channel(launcher.addresses()["value-trainer"][0]) as channel:
            info = value_pb2_grpc.ValueTrainerStub(channel).Info(common_pb2.ServiceInfoRequest(), timeout=30)
        assert json.loads(info.details_json)["processes"] == 2
    rows = read_metrics(tmp_path / "run")
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    assert all("tether_rho" in row for row in rows)
    # The first policy step already uses a warmed-up critic (>= 2 updates, so not the initial
    # version 0), versions only move forward, and the evaluator goes on swapping in newer ones.
    versions = [row["value_version"] for row in rows]
    assert versions == sorted(versions) and versions[0] >= 1
    assert served_version >= versions[0] + 1

    tokenizer = load_tokenizer(tiny_policy)
    inputs = [json.loads(line) for line in input_log.read_text().splitlines()]
    assert inputs
    for item in inputs:
        assert item["context_text"].startswith("ref:")
        solution = item["context_text"][len("ref:") :].strip()
        assert len(solution) == 19  # the solved 4x4 grid: 4 rows of 4 digits
        # The critic reads exactly that text: the tiny tokenizer covers printable ASCII.
        assert tokenizer.decode(item["context_ids"]) == item["context_text"]
    solutions = {item["context_text"][len("ref:") :] for item in inputs}
    prompts = [json.loads(line) for line in prompt_log.read_text().splitlines()]
    assert prompts
    for prompt in prompts:
        assert not any(solution.strip() in prompt for solution in solutions), prompt


def test_loo_group_never_contains_the_trajectory(tiny_policy, tmp_path):
    """(The plain VF's empty context is asserted on the ``value`` run above.)"""
    spec = pipeline_spec(tiny_policy, critic={"context": "loo_group"}, estimator={"name": "value"})
    input_log = tmp_path / "loo_group.jsonl"
    run_experiment(spec, tmp_path / "loo_group", {"LECRITIQUE_VALUE_INPUT_LOG": str(input_log)})
    inputs = [json.loads(line) for line in input_log.read_text().splitlines()]
    groups = defaultdict(list)
    for item in inputs:
        groups[(item["trajectory_id"].split("-")[0], item["group_id"])].append(item)
    assert groups
    for members in groups.values():
        assert len(members) == 4
        for item in members:
            peers = item["context_text"].strip().split("\n")
            assert len(peers) == 3
            sibling_rewards = Counter(f"{m['reward']:.2f}" for m in members if m is not item)
            assert Counter(p.split(":", 1)[0].removeprefix("peer ") for p in peers) == sibling_rewards


def test_killed_orchestrator_resumes_without_repeating_or_skipping_a_step(tiny_policy, tmp_path):
    spec = pipeline_spec(tiny_policy, orchestrator={"steps": 6, "eval_every": 3, "eval_tasks": 4})
    with running_services(spec, tmp_path) as launcher:
        orchestrator = launcher.start_orchestrator()
        deadline = time.monotonic() + 300
        while len(read_metrics(tmp_path)) < 3:  # step 0 (held-out), steps 1 and 2
            assert orchestrator.running, orchestrator.log_tail()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        orchestrator.kill()
        killed_at = len(read_metrics(tmp_path))
        launcher.start_orchestrator()
        assert launcher.wait() == 0
    rows = read_metrics(tmp_path)
    # Step 0: the initial policy's held-out evaluation, once (the resumed process does not redo it).
    assert [row["step"] for row in rows] == [0, 1, 2, 3, 4, 5, 6], f"killed after {killed_at} steps"
    assert [row["policy_version"] for row in rows] == [0, 1, 2, 3, 4, 5, 6]
    # Held-out greedy evaluation before training, then every 3 steps, on the weights that step published.
    assert [row["step"] for row in rows if "eval_success" in row] == [0, 3, 6]
    assert all(
        0.0 <= row["eval_success"] <= row["eval_reward_mean"] <= 1.0 for row in rows if "eval_success" in row
    )
    record = json.loads((tmp_path / "state" / "policy_trainer.json").read_text())
    assert record["step"] == 6 and record["policy_version"] == 6
    # The critic's running reward average resumed too: every consumed batch is folded in once
    # (a restart from the prior would count only the batches after the kill).
    state = json.loads((tmp_path / "orchestrator" / "state.json").read_text())
    # The reward average folds in every batch of both streams: the policy's and the warm-up's.
    assert state["reward_average_batches"] == state["cursor"] + state["warmup_cursor"]
    assert state["cursor"] >= 6
    assert 0.0 <= state["reward_average"] <= 1.0


def test_a_wrong_spec_field_fails_before_any_process_starts(tiny_policy, tmp_path):
    spec = pipeline_spec(tiny_policy, critic={"context": "reference", "replay": {"capcity": 10}})
    path = write_spec(tmp_path / "bad.yaml", spec)
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "lecritique", "run", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        env=child_environment(REPO_ROOT),
        timeout=120,
    )
    assert result.returncode == 2
    assert "critic.replay.capcity: unknown field" in result.stdout + result.stderr
    assert not out.exists()
