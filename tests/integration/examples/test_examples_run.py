"""Every shipped experiment spec runs: two policy steps with tiny stand-ins for its models.

For each spec under ``examples/`` (environment x estimator, ``critics/``, ``datasets/``,
``sudoku-mini-pvf.yaml``; ``studies/`` only validate, in tests/config) the spec is kept where it
decides what is computed: the environment and its settings, the estimator and its options, the
critic's kind, context, segments and group settings, the group size and the length budgets
(``sampling.max_tokens``; the stand-in model's context is the spec's ``max_model_len``). Its
models are replaced by tiny Llamas the test writes, and a hosted OpenAI-compatible critic by a
loopback stand-in that answers in the format the frozen critic parses; ``harness.stand_in`` lists
every change (HF engine for vLLM, float32, one trainer process, one task x 2 steps, no critic
warmup, BabyAI episodes cut to 4 steps).

The stand-in policy is fitted for a few seconds on the demonstrations of exactly the tasks the
two steps sample, so that at temperature 1 it solves some attempts and fails others: rewards
differ within a group, and the test requires it. CodeIO (2-3k-token prompts) and BabyAI (dozens
of turns) cannot be fitted in seconds; their stand-ins are random and every reward is 0.

Asserted per spec: both steps ran and every episode acted (non-empty responses); some advantage
is non-zero (where rewards vary, or where the baseline is the value itself: value, gae, lvrl);
and for estimators that use a critic, its values reach the advantages: recomputing the second
batch's advantages with the estimator state the orchestrator had (fitted on the first batch)
reproduces them, and with shifted values changes them, unless the step's metrics say the
estimator set the critic aside (``tether_rho`` 0, ``evpo_uses_critic`` 0: an untrained critic
after one batch). With every reward 0 (CodeIO, BabyAI),
group baselines (mean, rloo, and tether/evpo, whose fit needs reward variance) must give 0.

Harness, and why: starting a spec's five services as processes (``lecritique run``) costs 10-20 s
of interpreter and torch start-up per spec, 10-20 min for ~55 specs on two cores. Here every
service is started from its own ``start(runtime)`` (what ``lecritique serve`` runs, up to waiting
for a signal) inside the test process, on loopback ports, and talks real gRPC; the orchestrator
is built by ``build_orchestrator`` from their addresses, as ``lecritique orchestrate`` builds it,
with real Redis (embedded). What this skips is the process boundary and the supervisor, which
tests/services and tests/launch cover with real processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lecritique.advantages import AdvantageBatch
from lecritique.config import load_spec
from tests.integration.examples.harness import UNFITTED, ExampleRun, StandInLLM, run_example, stand_in

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SPECS = sorted(p for p in EXAMPLES.glob("**/*.yaml") if "studies" not in p.parts)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stand-in-models")


@pytest.fixture(scope="module")
def llm() -> Any:
    server = StandInLLM()
    yield server
    server.close()


def _check_acted(run: ExampleRun) -> None:
    assert [s.step for s in run.steps] == [1, 2], [s.step for s in run.steps]
    for step in run.steps:
        for trajectory in step.trajectories:
            assert int(np.asarray(trajectory.policy_mask).sum()) > 0, f"{trajectory.trajectory_id}: no action"


def _check_values_reach_advantages(run: ExampleRun) -> None:
    """Batch 2's advantages, recomputed with the orchestrator's estimator state of then, are the
    ones it sent; with the critic's values shifted they differ."""
    assert run.rows[-1].get("critic_degraded", 0) == 0, run.rows[-1]
    batch = run.steps[1].trajectories
    assert all(t.values is not None for t in batch)
    estimator = run.spec.estimator.build()
    estimator.load_state_dict(run.steps[0].estimator_state)
    sent = AdvantageBatch.from_trajectories(batch)
    recomputed = np.asarray(estimator.compute(sent))
    recorded = AdvantageBatch.from_trajectories(batch)
    mask = np.asarray(recorded.mask, dtype=bool)
    frozen = np.zeros_like(recomputed)
    for row, trajectory in enumerate(batch):
        frozen[row, : len(trajectory.advantages)] = trajectory.advantages
    np.testing.assert_allclose(recomputed[mask], frozen[mask], rtol=1e-4, atol=1e-5)
    shifted = [_with_values(t, 0.5 * np.asarray(t.values) + 0.2) for t in batch]
    moved = np.asarray(estimator.compute(AdvantageBatch.from_trajectories(shifted)))
    if np.allclose(moved[mask], recomputed[mask]):
        # Only where the estimator says so: TETHER at rho = 0 (no fit yet: one batch without reward
        # variance) and EVPO while the critic's explained variance is too low use no value.
        state = estimator.metrics()  # of the state batch 2 was computed with
        assert state.get("tether_rho", 1.0) == 0.0 or state.get("evpo_uses_critic", 1.0) == 0.0, (
            f"the critic's values do not reach the advantages: {state}"
        )


def _with_values(trajectory: Any, values: np.ndarray) -> Any:
    import dataclasses

    return dataclasses.replace(trajectory, values=values.astype(np.float32))


BASELINE_IS_THE_VALUE = frozenset({"value", "gae", "lvrl"})
"""Estimators whose advantages move with the critic's values even when every reward is equal."""


@pytest.mark.slow(seconds=20)
@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_the_example_runs_with_stand_in_models(
    path: Path, models: Path, llm: StandInLLM, tmp_path: Path, embedded_redis: Any
) -> None:
    data = load_spec(path).model_dump(mode="json", exclude_unset=True)
    run = run_example(stand_in(data, models, llm.base_url), tmp_path / "run", embedded_redis.url)
    _check_acted(run)
    advantages = np.concatenate([np.asarray(t.advantages) for s in run.steps for t in s.trajectories])
    rewards_vary = any(
        len({t.reward for t in s.trajectories}) > 1 for s in run.steps
    )  # one task (group) per step
    fitted = run.spec.environment.kind not in UNFITTED
    if fitted:
        assert rewards_vary, "the fitted stand-in solved every attempt or none: no reward signal to check"
    estimator = run.spec.estimator
    if rewards_vary or estimator.name in BASELINE_IS_THE_VALUE:
        assert np.any(advantages != 0)
        if estimator.build().uses_critic:
            _check_values_reach_advantages(run)
    else:
        # CodeIO and BabyAI stand-ins are random: every reward 0, and a group (LOO) baseline equals it.
        assert not np.any(advantages != 0)
