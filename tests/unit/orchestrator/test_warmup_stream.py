"""The critic warm-up: a stream of its own when the policy waits for it (issue 39, paired arms), and
policy steps at the estimator's critic-free start while it warms (``critic.warmup: auto``, issue 45).

The policy loop runs in-process: a real Sudoku environment, a sampler that records the seed of
every sampling call and answers EOS at once, stand-ins for the trainers. Two arms of one seed, one
with a critic warm-up and one without, must train step 1 on the same tasks sampled with the same
seeds; the warm-up's batches are other draws; a resumed run continues both cursors exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from lecritique.config import parse_spec
from lecritique.critics.types import ActorInfo
from lecritique.engines.base import SamplingParams
from lecritique.envs import get_environment
from lecritique.envs.base import Task
from lecritique.episodes import EpisodePlayer, SampledAction
from lecritique.models.char_tokenizer import build_char_tokenizer
from lecritique.models.templates import PlainTemplate
from lecritique.orchestrator.batches import POLICY_DRAWS, WARMUP_DRAWS
from lecritique.orchestrator.critic_stage import CriticStage
from lecritique.orchestrator.loop import Orchestrator
from lecritique.orchestrator.state import CheckpointStore
from lecritique.v1 import policy_pb2

SEED, TASKS, K = 3, 4, 2


@dataclass
class _Environment:
    """The orchestrator's environment client, in-process."""

    environment: Any
    sampled: list[int] = field(default_factory=list)
    """The seed of every ``sample_tasks`` call."""

    def sample_tasks(self, n: int, split: str, seed: int) -> list[Task]:
        self.sampled.append(seed)
        return self.environment.sample_tasks(n, split, seed)  # type: ignore[no-any-return]

    def reset(self, tasks: Sequence[Task]) -> list[Any]:
        return [self.environment.reset(task) for task in tasks]

    def step(self, items: Sequence[tuple[Any, str]]) -> list[Any]:
        return [self.environment.step(state, action) for state, action in items]


@dataclass
class _Sampler:
    """Answers EOS at once; records each call's sampling seed."""

    eos: int
    seeds: list[int | None] = field(default_factory=list)

    def sample(self, prompts: list[list[int]], n: int, sampling: SamplingParams) -> list[list[SampledAction]]:
        self.seeds.append(sampling.seed)
        return [[SampledAction([self.eos], [-0.1]) for _ in range(n)] for _ in prompts]


@dataclass
class _ValueTrainer:
    """Makes one critic update (and publishes it) per status call."""

    updates: int = 0

    def status(self) -> SimpleNamespace:
        self.updates += 1
        return SimpleNamespace(updates=self.updates, published_version=self.updates)


@dataclass
class _Evaluator:
    """Serves the value trainer's newest version; every value 0."""

    trainer: _ValueTrainer

    def served_version(self) -> int:
        return self.trainer.updates

    def evaluate(
        self, queries: Any, prompts: Any, actor: ActorInfo
    ) -> tuple[list[Any], int, dict[str, float]]:
        values = [np.zeros(len(q.trajectory.token_ids), np.float32) for q in queries]
        return values, self.trainer.updates, {}


@dataclass
class _PolicyTrainer:
    steps: list[int] = field(default_factory=list)

    def train(self, step: int, trajectories: list[Any]) -> policy_pb2.TrainResponse:
        self.steps.append(step)
        return policy_pb2.TrainResponse(policy_version=step, path=f"v{step}")


def _run(
    out: Path,
    estimator: dict[str, Any],
    steps: int,
    warmup: int,
    critic_updates: int = 0,
    seed: int = SEED,
    eval_every: int | None = None,
    warmup_mode: str = "blocking",
    max_seconds: float | None = None,
) -> tuple[list[dict[str, Any]], _Sampler, _Environment]:
    critic = (
        None
        if estimator["name"] in ("mean", "rloo")
        else {"context": "none", "warmup_updates": warmup, "warmup": warmup_mode}
    )
    spec = parse_spec(
        {
            "name": "paired",
            "seed": seed,
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
            "policy": {"path": str(out)},
            "rollout": {"group_size": K, "tasks_per_step": TASKS},
            "estimator": estimator,
            "critic": critic,
            "orchestrator": {
                "steps": steps,
                "prefetch_batches": 1,
                "eval_every": eval_every,
                "eval_tasks": 3,
                "max_seconds": max_seconds,
            },
        }
    )
    environment = _Environment(get_environment("sudoku", size=4, empty_cells=[1, 2]))
    tokenizer = build_char_tokenizer([chr(c) for c in range(32, 127)] + ["\n"])
    sampler = _Sampler(int(tokenizer.eos_token_id))
    player = EpisodePlayer(
        sampler, environment, tokenizer, PlainTemplate(), SamplingParams(max_tokens=4), 4096, max_turns=2
    )
    trainer = _ValueTrainer(critic_updates)
    clients = SimpleNamespace(
        policy_trainer=_PolicyTrainer(),
        value_evaluator=_Evaluator(trainer) if critic else None,
        value_trainer=trainer if critic else None,
        environment=environment,
        rollout=SimpleNamespace(load_weights=lambda version, path: {"r0": object()}),
    )
    rows: list[dict[str, Any]] = []
    Orchestrator(spec, clients, player, out, experiment_id=f"paired-{out.name}").run(rows.append)  # type: ignore[arg-type]
    return rows, sampler, environment


DRAW = ("batch_cursor", "task_seed", "sampling_seed", "tasks_digest")


def _agree_over_both(first: Sequence[Any], second: Sequence[Any], at_least: int) -> bool:
    """One list is a prefix of the other, and both have at least ``at_least`` items."""
    common = min(len(first), len(second))
    return common >= at_least and list(first[:common]) == list(second[:common])


def test_a_warmed_up_arm_trains_on_the_batches_of_the_arm_without_warm_up(tmp_path):
    mean, mean_sampler, mean_env = _run(tmp_path / "mean", {"name": "mean"}, steps=2, warmup=0)
    tether, tether_sampler, tether_env = _run(tmp_path / "tether", {"name": "tether"}, steps=2, warmup=3)
    assert [[row[key] for key in DRAW] for row in mean] == [[row[key] for key in DRAW] for row in tether]
    assert [row["batch_cursor"] for row in mean] == [0, 1]
    assert mean[0]["task_seed"] == POLICY_DRAWS.task_seed(SEED, 0) == SEED * 1_000_003
    assert [row["warmup_batches"] for row in tether] == [2, 2] and mean[0]["warmup_batches"] == 0
    # The warm-up sampled its own tasks and seeds before the policy stream's, which match MEAN's.
    # Each arm's prefetcher may draw the batch after its last step before the run stops, or not:
    # the policy streams agree over what both drew, which covers every trained batch.
    warmup_tasks = [WARMUP_DRAWS.task_seed(SEED, index) for index in (0, 1)]
    assert tether_env.sampled[:2] == warmup_tasks
    assert _agree_over_both(tether_env.sampled[2:], mean_env.sampled, at_least=2)
    assert _agree_over_both(tether_sampler.seeds[2:], mean_sampler.seeds, at_least=2)
    assert not set(tether_sampler.seeds[:2]) & set(mean_sampler.seeds)
    # Another seed is another draw.
    other, _, _ = _run(tmp_path / "mean-seed4", {"name": "mean"}, steps=1, warmup=0, seed=SEED + 1)
    assert (
        other[0]["task_seed"] != mean[0]["task_seed"] and other[0]["tasks_digest"] != mean[0]["tasks_digest"]
    )


def test_a_resumed_run_continues_both_cursors_exactly_once(tmp_path):
    out = tmp_path / "run"
    first, _, _ = _run(out, {"name": "tether"}, steps=1, warmup=3)
    state = CheckpointStore(out / "orchestrator").load()
    assert (state.cursor, state.warmup_cursor, state.warmup_done) == (1, 2, True)
    # The value trainer kept its updates across the restart.
    resumed, _, environment = _run(out, {"name": "tether"}, steps=2, warmup=3, critic_updates=10)
    assert [row["step"] for row in resumed] == [2] and resumed[0]["batch_cursor"] == 1
    assert not resumed[0]["critic_degraded"]
    # The policy stream goes on from batch 1 (the producer may draw ahead); no warm-up batch again.
    drawn = environment.sampled
    assert drawn[0] == POLICY_DRAWS.task_seed(SEED, 1) and all(s < WARMUP_DRAWS.offset for s in drawn)
    assert first[0]["warmup_batches"] == resumed[0]["warmup_batches"] == 2


def test_an_old_checkpoint_without_a_warmup_cursor_loads(tmp_path):
    store = CheckpointStore(tmp_path)
    store.state_path.write_text('{"completed_step": 2, "cursor": 43, "warmup_done": true}')
    state = store.load()
    assert (state.cursor, state.warmup_cursor) == (43, 0)


@dataclass
class _SlowToLoad:
    """An evaluator that serves an older critic version for its first few Info calls."""

    served: list[int]
    answered: list[int] = field(default_factory=list)

    def served_version(self) -> int:
        return self.served.pop(0) if len(self.served) > 1 else self.served[0]

    def evaluate(
        self, queries: Any, prompts: Any, actor: ActorInfo
    ) -> tuple[list[Any], int, dict[str, float]]:
        version = self.served[0]
        self.answered.append(version)
        return [np.zeros(len(q.trajectory.token_ids), np.float32) for q in queries], version, {}


def test_the_first_policy_batch_waits_for_the_warmed_up_critic(monkeypatch):
    from tests.unit.orchestrator.test_degraded_critic import _episodes, _plain_queries, _stage

    evaluator = _SlowToLoad([3, 3, 5])
    stage: CriticStage = _stage(evaluator)  # type: ignore[arg-type]
    _plain_queries(monkeypatch)
    stage.least_version = 5
    first = stage.score(_episodes())
    assert first.value_version == 5 and evaluator.answered == [5] and first.update_wait[1] is None
    assert stage.least_version == -1, "only the first batch waits"


def test_streams_never_share_a_draw():
    for seed in (0, 1, 7):
        policy = {POLICY_DRAWS.task_seed(seed, i) for i in range(1000)}
        warmup = {WARMUP_DRAWS.task_seed(seed, i) for i in range(1000)}
        assert not policy & warmup
    with pytest.raises(AttributeError):
        POLICY_DRAWS.offset = 1  # type: ignore[misc]


def test_tether_steps_at_once_while_the_critic_warms_then_uses_it(tmp_path):
    """critic.warmup auto: no warm-up batches, step 1 on the policy stream's first batch (MEAN's), the
    cold steps at rho = 0 with nothing fitted; the batch scored by the warm version fits rho."""
    mean, _, mean_env = _run(tmp_path / "mean", {"name": "mean"}, steps=6, warmup=0)
    tether, _, tether_env = _run(
        tmp_path / "tether", {"name": "tether"}, steps=6, warmup=3, warmup_mode="auto"
    )
    assert [[row[key] for key in DRAW] for row in mean] == [[row[key] for key in DRAW] for row in tether]
    assert all(row["warmup_batches"] == 0 for row in tether)
    assert all(seed < WARMUP_DRAWS.offset for seed in tether_env.sampled), "no warm-up stream drawn"
    assert _agree_over_both(tether_env.sampled, mean_env.sampled, at_least=6)
    warm = [row["critic_warm"] for row in tether]
    assert warm[0] is False and warm[-1] is True and warm == sorted(warm), warm
    state = CheckpointStore(tmp_path / "tether" / "orchestrator").load()
    # The stand-in trainer makes one update per status call: warm at the third, version 3.
    assert state.critic_warm_version == 3
    cold = [row for row in tether if not row["critic_warm"]]
    assert cold and all(row["tether_rho"] == 0.0 for row in cold)
    assert all(row["value_version"] < 3 for row in cold)
    assert all(row["value_version"] >= 3 for row in tether if row["critic_warm"])
    assert "critic_warm" not in mean[0] and mean[0].get("critic_warm") is None


def test_a_resumed_run_keeps_the_warm_version(tmp_path):
    out = tmp_path / "run"
    _run(out, {"name": "tether"}, steps=5, warmup=2, warmup_mode="auto")
    warm_version = CheckpointStore(out / "orchestrator").load().critic_warm_version
    assert warm_version >= 0
    resumed, _, _ = _run(out, {"name": "tether"}, steps=6, warmup=2, critic_updates=10, warmup_mode="auto")
    assert [row["step"] for row in resumed] == [6] and resumed[0]["critic_warm"] is True
    assert CheckpointStore(out / "orchestrator").load().critic_warm_version == warm_version


@pytest.mark.parametrize(
    ("estimator", "mode"), [({"name": "value"}, "auto"), ({"name": "tether"}, "blocking")]
)
def test_an_estimator_that_needs_the_critic_or_a_blocking_warm_up_waits(tmp_path, estimator, mode):
    rows, _, _ = _run(tmp_path / "run", estimator, steps=2, warmup=3, warmup_mode=mode)
    assert [row["warmup_batches"] for row in rows] == [2, 2]
    assert all(row["critic_warm"] is True for row in rows)
