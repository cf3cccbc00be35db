"""Each text critic kind through all services: real processes, gRPC, Redis, the tiny policy."""

import json
import time
import urllib.request

import pytest

from lecritique.orchestrator.clients import ValueTrainerClient
from lecritique.rpc.replica_pool import ReplicaPool
from lecritique.v1 import value_pb2_grpc
from tests.integration.critics.llm_server import LLM_KEY, LLM_MODEL, rollout_llm
from tests.integration.services.conftest import pipeline_spec, read_metrics, running_services

pytestmark = pytest.mark.slow


def metric(port, name, **labels):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items())
    )


def served_version(port, at_least, timeout=60.0):
    """The evaluator's served critic version, once it reaches ``at_least`` (it polls the weight store)."""
    deadline = time.monotonic() + timeout
    while True:
        version = metric(port, "lecritique_value_evaluator_version")
        if version >= at_least or time.monotonic() > deadline:
            return version
        time.sleep(0.25)


def run(spec, out, env=None, expect_version=0):
    """Run the experiment; returns metrics rows, the value trainer's status, evaluator metrics, inputs."""
    input_log = out / "critic-inputs.jsonl"
    with running_services(
        spec, out / "run", {**(env or {}), "LECRITIQUE_VALUE_INPUT_LOG": str(input_log)}
    ) as launcher:
        launcher.start_orchestrator()
        assert launcher.wait() == 0, (out / "run" / "logs" / "orchestrator.log").read_text()[-4000:]
        addresses = launcher.addresses()
        pool = ReplicaPool("value-trainer", addresses["value-trainer"], value_pb2_grpc.ValueTrainerStub)
        status = ValueTrainerClient(pool).status()
        pool.close()
        evaluator = next(p for p in launcher.services if p.name.startswith("value-evaluator"))
        evaluator_metrics = {
            outcome: metric(evaluator.metrics_port, "lecritique_critic_llm_requests_total", outcome=outcome)
            for outcome in ("ok", "failed")
        }
        evaluator_metrics["served_version"] = served_version(evaluator.metrics_port, expect_version)
    inputs = [json.loads(line) for line in input_log.read_text().splitlines()]
    return read_metrics(out / "run"), status, evaluator_metrics, inputs


def test_generative_critic_scores_segments_and_trains_through_the_services(tiny_policy, tmp_path):
    """The generative critic served, trained by REINFORCE and hot-swapped across real services.
    That REINFORCE raises the critic's reward is asserted where enough updates fit in a fast test:
    ``test_text_critics.py::test_reinforce_raises_the_critics_reward`` (it fails with a zero
    learning rate or a flipped advantage sign)."""
    # Direct scoring with the tag "=": the sudoku policy writes a digit after "=" ("r1c2=3"), so
    # some scores parse and REINFORCE has a signal even from an untrained critic.
    spec = pipeline_spec(tiny_policy, estimator={"name": "value"})
    spec["critic"] = {
        "kind": "generative",
        "reasoning": False,
        "score_tag": "=",
        "max_tokens": 1,
        "segments": {"rule": "turn"},
        "warmup_updates": 2,
        "batch_size": 8,
        "max_train_states": 16,
        "samples_per_state": 2,
        "baseline": "state_mean",
        "optimizer": {"lr": 1e-3},
    }
    rows, status, evaluator, inputs = run(spec, tmp_path, expect_version=1)
    assert [row["step"] for row in rows] == [1, 2]
    # Policy steps start once a REINFORCE-trained critic scores the batches.
    assert status.updates >= 2 and rows[0]["value_version"] >= 1 and evaluator["served_version"] >= 1
    for key in ("critic_reward", "parse_failure_rate", "value_mse", "loss"):
        assert key in status.metrics
    assert status.metrics["samples"] == 2 * status.metrics["states"]
    for row in rows:
        states = row["critic_states"]
        assert states >= row["trajectories"]  # one state per turn, at least one turn each
        assert row["critic_completions"] == states
        # Every unparseable state fell back to the group baseline, and was counted.
        assert row["critic_parse_failures"] == row["critic_fallback_states"] <= states
        assert 0.0 <= row["critic_reward_average"] <= 1.0
    assert sum(row["critic_parse_failures"] for row in rows) < sum(row["critic_states"] for row in rows)
    # In-Context Conditioning: the first batch (the critic's first warm-up batch, drawn from the
    # warm-up's own stream) sees the prior, later ones a running average.
    assert {item["actor_reward_average"] for item in inputs if item["trajectory_id"].startswith("w0-")} == {
        0.5
    }
    assert all(item["actor_description"].endswith("llama") for item in inputs)
    assert all(len(item["peers"]) == 3 for item in inputs)


def test_frozen_llm_critic_over_an_openai_endpoint_with_lvopd(tiny_policy, ascii_model, tmp_path):
    spec = pipeline_spec(
        tiny_policy,
        estimator={"name": "lvrl"},
        policy_trainer={"distillation": {"teacher": str(tiny_policy), "gate": "value_decrease"}},
    )
    spec["critic"] = {
        "kind": "frozen_llm",
        "llm": {
            "kind": "openai",
            "base_url": "http://127.0.0.1:1/v1",
            "model": LLM_MODEL,
            "api_key_env": "CRITIC_LLM_KEY",
            "prompt_price_per_million": 5.0,
            "completion_price_per_million": 25.0,
        },
        "max_tokens": 12,
        "max_peer_chars": 40,
        "system_prompt": "Estimate state values.",
    }
    with rollout_llm(ascii_model, tmp_path / "llm") as llm:
        spec["critic"]["llm"]["base_url"] = llm.base_url
        rows, status, requests, inputs = run(spec, tmp_path, {"CRITIC_LLM_KEY": LLM_KEY})
    assert [row["step"] for row in rows] == [1, 2]
    assert status.updates == 0  # nothing to train
    for row in rows:
        assert row["value_version"] == 0
        assert row["critic_llm_requests"] == row["trajectories"] == 16
        assert row["critic_llm_failures"] == 0
        assert row["critic_llm_prompt_tokens"] > 0 and row["critic_llm_completion_tokens"] > 0
        expected_cost = (
            row["critic_llm_prompt_tokens"] * 5.0 + row["critic_llm_completion_tokens"] * 25.0
        ) / 1e6
        assert row["critic_llm_cost_usd"] == pytest.approx(expected_cost)
        assert 0.0 <= row["policy_distill_gated_fraction"] <= 1.0
    assert requests["ok"] >= 32 and requests["failed"] == 0
    for item in inputs:
        peer_ids = [p["trajectory_id"] for p in item["peers"]]
        assert len(peer_ids) == 3 and item["trajectory_id"] not in peer_ids
