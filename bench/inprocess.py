"""The orchestrator's loop in one process: the services' work called directly, no gRPC, no processes.

The reference of the pipeline benchmark's system-overhead ratio. The clients below stand in for
:class:`lecritique.orchestrator.clients.ServiceClients` and do what each service does for the
policy loop, minus the transport: the rollout engine generates and reloads published weights from
the weight store, the environment steps episodes, the policy trainer updates, publishes each
version to the store and checkpoints its state like the service (``checkpoint_every``).

    python bench/inprocess.py SPEC.json OUT_DIR     (run by bench/pipeline.py, pinned to the policy cores)
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "libs")]

from lecritique.config import load_spec  # noqa: E402
from lecritique.config.experiment import ExperimentSpec  # noqa: E402
from lecritique.engines import SamplingParams, build_engine  # noqa: E402
from lecritique.envs import build_environment  # noqa: E402
from lecritique.envs.base import Task  # noqa: E402
from lecritique.episodes.local import EngineSampler, LocalEnvironment  # noqa: E402
from lecritique.episodes.player import SampledAction  # noqa: E402
from lecritique.weights import WeightStore  # noqa: E402


class InProcessRollout:
    """The rollout service's Generate and LoadWeights, called directly."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.sampler = EngineSampler(engine)
        self.version = 0
        self.lock = threading.Lock()

    def sample(self, prompts: list[list[int]], n: int, sampling: SamplingParams) -> list[list[SampledAction]]:
        with self.lock:
            groups = self.sampler.sample(prompts, n, sampling)
            version = self.version
        return [[SampledAction(a.token_ids, a.logprobs, version) for a in group] for group in groups]

    def load_weights(self, version: int, path: str) -> dict[str, Any]:
        with self.lock:
            if version > self.version:
                self.engine.load_weights(version, path)
                self.version = version
        return {"in-process": SimpleNamespace(version=self.version)}

    def info(self) -> dict[str, Any]:
        info = self.engine.info()
        limit = (
            info.get("max_model_len") or info.get("max_position_embeddings") or 2048
        )  # as the service reports it
        return {"weights_version": self.version, **info, "max_sequence_tokens": int(limit)}


@dataclass(frozen=True)
class InProcessEnvironment(LocalEnvironment):
    """The environment-verifier's SampleTasks and Info beside the episode player's Reset and Step."""

    def sample_tasks(self, n: int, split: str, seed: int) -> list[Task]:
        return self.environment.sample_tasks(n, split=split, seed=seed)  # type: ignore[arg-type]

    def info(self) -> dict[str, Any]:
        return {"environment": self.environment.name, "max_turns": self.environment.max_turns}


class InProcessPolicyTrainer:
    """The policy-trainer service's Train: one update, publish, checkpoint."""

    def __init__(self, spec: ExperimentSpec, store: WeightStore, state_dir: Path) -> None:
        from lecritique.training.checkpoint import TrainerCheckpoints
        from lecritique.training.policy_trainer import PolicyTrainer

        _version, path = store.wait_latest("policy")
        self.trainer = PolicyTrainer(path, spec.policy_trainer)
        self.store = store
        every = spec.policy_trainer.checkpoint_every
        self.checkpoints = (
            TrainerCheckpoints(
                state_dir / "policy_trainer_checkpoints", spec.policy_trainer.checkpoint_keep, every
            )
            if every is not None
            else None
        )
        self.last_step = 0

    def train(self, step: int, trajectories: Sequence[Any]) -> Any:
        metrics = self.trainer.train_step(trajectories)
        version = self.trainer.publish(self.store, keep_last=3)
        assert version is not None
        if self.checkpoints is not None:
            self.checkpoints.save_if_due(self.trainer)
        self.last_step = step
        return SimpleNamespace(
            step=step, policy_version=version, path=str(self.store.path("policy", version)), metrics=metrics
        )

    def status(self) -> Any:
        return SimpleNamespace(last_step=self.last_step)


def run(spec_path: Path, out: Path) -> None:
    from lecritique.episodes import EpisodePlayer
    from lecritique.models.policy import load_tokenizer
    from lecritique.models.templates import build_template
    from lecritique.orchestrator.loop import Orchestrator

    spec = load_spec(spec_path)
    if spec.critic is not None:
        raise SystemExit("the in-process loop is the critic-free reference (MEAN)")
    store = WeightStore(out / "weights")
    assert spec.policy.path is not None
    if store.latest("policy") is None:
        store.publish("policy", spec.policy.path)
    _version, path = store.wait_latest("policy")
    rollout = InProcessRollout(build_engine(spec.rollout.engine.model_copy(update={"model_path": str(path)})))
    environment = InProcessEnvironment(build_environment(spec.environment))
    trainer = InProcessPolicyTrainer(spec, store, out / "state")
    tokenizer = load_tokenizer(path)
    sampling = spec.rollout.sampling
    # As lecritique.orchestrator.wiring builds the services' player.
    player = EpisodePlayer(
        rollout,
        environment,
        tokenizer,
        build_template(spec.policy.template, tokenizer),
        SamplingParams(
            temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens
        ),
        max_context_tokens=int(rollout.info()["max_sequence_tokens"]),
        max_turns=int(environment.environment.max_turns) + 1,
    )
    clients = SimpleNamespace(
        rollout=rollout,
        environment=environment,
        policy_trainer=trainer,
        value_evaluator=None,
        value_trainer=None,
    )
    Orchestrator(spec, clients, player, out, experiment_id=spec.name).run()  # type: ignore[arg-type]


if __name__ == "__main__":
    run(Path(sys.argv[1]), Path(sys.argv[2]))
