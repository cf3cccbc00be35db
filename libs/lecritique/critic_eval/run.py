"""Build everything a critic-eval spec names (policy engine, environment, critic backends) and run it."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from lecritique.config.experiment import PolicyModelSpec, SamplingSpec
from lecritique.critic_eval.config import CriticEvalSpec, EvaluatedCritic
from lecritique.critic_eval.evaluation import CriticEvalResult, run_critic_eval
from lecritique.critic_eval.report import write_report
from lecritique.critics.kinds import ServingContext, critic_kind
from lecritique.critics.llm import max_model_tokens
from lecritique.critics.prompts import describe_actor
from lecritique.critics.types import CriticBackend
from lecritique.engines import RolloutEngine, SamplingParams, build_engine
from lecritique.engines.config import EngineConfig
from lecritique.envs import build_environment
from lecritique.envs.base import Environment
from lecritique.episodes import EpisodePlayer
from lecritique.episodes.local import EngineSampler, LocalEnvironment
from lecritique.models.policy import load_tokenizer
from lecritique.models.templates import build_template

logger = logging.getLogger(__name__)


def resolve_policy_dir(spec: CriticEvalSpec) -> Path:
    if spec.policy.path is not None:
        return Path(spec.policy.path)
    from lecritique.tinybuild import build_tiny

    assert spec.policy.tiny is not None
    return Path(build_tiny(spec.policy.tiny, seed=spec.seed))


def build_critic(
    entry: EvaluatedCritic, spec: CriticEvalSpec, policy_dir: Path, scratch: Path
) -> CriticBackend:
    critic = entry.scored_critic(spec.segments)
    kind = critic_kind(critic)
    weights = Path(entry.path) if entry.path is not None else None
    if weights is None and kind.untrained_weights is not None:
        weights = kind.untrained_weights(critic, policy_dir, scratch / entry.name)
        logger.warning("critic %r has no path: measuring the untrained %s critic", entry.name, kind.name)
    return kind.backend(critic, weights, ServingContext(policy_dir))


def local_player(
    policy_dir: Path,
    engine_config: EngineConfig,
    policy: PolicyModelSpec,
    sampling: SamplingSpec,
    environment: Environment,
    seed: int,
) -> tuple[EpisodePlayer, RolloutEngine]:
    """An episode player over a local engine of ``policy_dir`` (the caller closes the engine);
    ``critic-eval`` and ``critic pretrain`` play their episodes with it."""
    engine = build_engine(engine_config.model_copy(update={"model_path": str(policy_dir)}))
    tokenizer = load_tokenizer(policy_dir)
    rng = np.random.default_rng(seed)
    player = EpisodePlayer(
        EngineSampler(engine),
        LocalEnvironment(environment),
        tokenizer,
        build_template(policy.template, tokenizer),
        SamplingParams(
            temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens
        ),
        max_context_tokens=max_model_tokens(engine),
        max_turns=environment.max_turns,
        seeds=lambda: int(rng.integers(2**31)),
    )
    return player, engine


def evaluate(
    spec: CriticEvalSpec, out_dir: Path, *, show_progress: bool = True
) -> tuple[CriticEvalResult, dict[str, Path]]:
    """Run the spec and write the report into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    policy_dir = resolve_policy_dir(spec)
    environment = build_environment(spec.environment)
    player, engine = local_player(policy_dir, spec.engine, spec.policy, spec.sampling, environment, spec.seed)
    # Untrained critics get their random head from this seed: the same spec measures the same critic.
    torch.manual_seed(spec.seed)
    backends = {
        entry.name: build_critic(entry, spec, policy_dir, out_dir / "untrained") for entry in spec.critics
    }
    try:
        described = [e.critic.actor_conditioning().description for e in spec.critics]
        actor = next((d for d in described if d), None) or describe_actor(policy_dir)
        result = run_critic_eval(
            spec, player, environment, backends, actor_description=actor, show_progress=show_progress
        )
    finally:
        for backend in backends.values():
            backend.close()
        engine.close()
    return result, write_report(result, out_dir, spec)
