"""Measure critics against Monte-Carlo values of a fixed policy (GenAC §6.1 and §6.3.2).

1. Play ``group_size`` episodes on each of ``tasks`` tasks with the fixed policy.
2. States are prefixes cut at segment starts (one rule for every critic). Sample ``states`` of
   them; estimate each one's true value V(h_t) as the mean reward of M continuations.
3. Ranking probe: for ``ranking_states`` states (not in the last segment of their episode),
   sample continuations; each one cut at its next segment start is a candidate next segment,
   and the state after it gets its own Monte-Carlo value. Candidates that end the episode
   instead are skipped (a critic scores states, not outcomes); up to ``ranking_oversample`` x
   max(k) draws are made, and a probe without max(k) candidates is dropped (and counted).
   Top-1 accuracy at k uses the first k candidates of every probe.
4. Every critic scores every state through the same backend the value evaluator serves, with
   the same contexts (privileged context, group peers, In-Context Conditioning).

Metrics per critic (:mod:`.scores`): value MSE and ``ev_var`` against the Monte-Carlo values,
pairwise ranking accuracy over untied pairs and top-1 per k with ties counted apart, and the reason for every n/a. The same
metrics for the critic-free baselines of :mod:`.baselines`. ``mc_noise_mse`` (the mean estimated variance of the Monte-Carlo
estimates, p(1-p)/(M-1)) is the MSE a perfect critic would still show against them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich.progress import Progress

from lecritique.critic_eval.baselines import baseline_fields
from lecritique.critic_eval.ceiling import ceiling_rows
from lecritique.critic_eval.config import CriticEvalSpec
from lecritique.critic_eval.scores import critic_row
from lecritique.critics.inputs import attempt_of, critic_queries, shown_on
from lecritique.critics.segments import segment_starts
from lecritique.critics.specs import CriticSpec
from lecritique.critics.states import decode, token_texts
from lecritique.critics.types import ActorInfo, CriticBackend
from lecritique.envs.base import Environment
from lecritique.episodes import EpisodePlayer, EpisodeRecord

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StatePoint:
    """A state: the moment before token ``token_index`` of an episode."""

    record: EpisodeRecord
    base: int
    """Index of the base episode it descends from (its group context and critic context)."""
    token_index: int


@dataclass
class EvaluatedState:
    episode: int
    token_index: int
    prefix_text: str
    mc_value: float
    mc_rewards: list[float]
    critic_values: dict[str, float] = field(default_factory=dict)
    position: int = 0
    """Response (policy) tokens of the episode before it, every turn counted (0: before the first)."""
    turn_position: int = 0
    """Policy tokens of its own turn before it (0: the turn's prompt end); differs on multi-turn tasks."""


@dataclass
class Candidate:
    segment_text: str
    """The candidate next segment (continuing from the probe state)."""
    mc_value: float
    critic_values: dict[str, float] = field(default_factory=dict)


@dataclass
class RankingProbe:
    episode: int
    token_index: int
    prefix_text: str
    candidates: list[Candidate]


@dataclass
class CriticEvalResult:
    metrics: dict[str, dict[str, float]]
    """Per critic: value_mse, ev_var, pairs_k{k} (with untied_pairs_k{k}), top1_k{k} (with mc_ties_k{k}, critic_ties_k{k}), the backend's summed statistics."""
    states: list[EvaluatedState]
    probes: list[RankingProbe]
    mc_noise_mse: float
    base_success_rate: float
    icc_reward_average: float = 0.0
    """The actor's average In-Context Conditioning showed (from episodes apart from the evaluated ones)."""
    icc_rewards: list[float] = field(default_factory=list)
    """Rewards of the episodes it was measured on."""
    scored_on: dict[str, str] = field(default_factory=dict)
    """Per critic: ``prefix`` (V(h_t) from the cut prefix) or ``hindsight`` (from the whole episode)."""
    ceiling: list[dict[str, Any]] = field(default_factory=list)
    """The oracle ceiling and each critic's EV / ceiling per response-position bucket (:mod:`.ceiling`)."""
    notes: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per critic: why a metric is n/a (metric name -> reason)."""
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    baseline_notes: dict[str, dict[str, str]] = field(default_factory=dict)
    tied_groups: float = float("nan")
    """The critic-free baselines' metrics and n/a reasons, and the share of tied groups (:mod:`.baselines`)."""


def _states_of(
    record: EpisodeRecord, tokenizer: Any, spec: CriticEvalSpec, capped: bool = True
) -> np.ndarray:
    texts = token_texts(tokenizer, record.token_ids)
    limit = spec.segments.max_segments if capped else None
    return segment_starts(texts, record.policy_mask, record.step_ids, spec.segments.rule, limit)


def response_position(record: EpisodeRecord, token_index: int) -> int:
    """Policy tokens of the episode before ``token_index``, counted from its first policy token."""
    return int(np.asarray(record.policy_mask, dtype=bool)[:token_index].sum())


def turn_position(record: EpisodeRecord, token_index: int) -> int:
    """Policy tokens of the state's own turn emitted before ``token_index``."""
    mask = np.asarray(record.policy_mask, dtype=bool)[:token_index]
    steps = np.asarray(record.step_ids)
    return int((mask & (steps[:token_index] == steps[token_index])).sum())


def _monte_carlo(
    player: EpisodePlayer, points: Sequence[StatePoint], continuations: int
) -> list[list[float]]:
    cursors = [point.record.cut(point.token_index) for point in points for _ in range(continuations)]
    player.play(cursors)
    rewards = [c.reward for c in cursors]
    return [rewards[i * continuations : (i + 1) * continuations] for i in range(len(points))]


def critic_values(
    backend: CriticBackend,
    critic: CriticSpec,
    points: Sequence[StatePoint],
    base: Sequence[EpisodeRecord],
    tokenizer: Any,
    actor: ActorInfo,
) -> tuple[list[float], dict[str, float]]:
    """The critic's V(h_t) at every point (one query per distinct episode) and its statistics.

    Every episode is shown what its base episode would be shown in an experiment
    (:func:`~lecritique.critics.inputs.critic_queries` over the base episodes' groups).
    """
    attempts = [attempt_of(record, record.trajectory(f"e{i}")) for i, record in enumerate(base)]
    shown = critic_queries(critic, attempts, tokenizer, actor)
    episodes: dict[int, tuple[EpisodeRecord, int]] = {}
    for point in points:
        episodes.setdefault(id(point.record), (point.record, point.base))
    order = list(episodes)
    queries = []
    for number, key in enumerate(order):
        record, base_index = episodes[key]
        queries.append(shown_on(shown[base_index], record.trajectory(f"q{number}")))
    result = backend.values(queries, actor)
    by_episode = dict(zip(order, result.values, strict=True))
    return [float(by_episode[id(p.record)][p.token_index]) for p in points], dict(result.stats)


def _icc_average(
    spec: CriticEvalSpec, player: EpisodePlayer, environment: Environment
) -> tuple[float, list[float]]:
    """The actor's average reward for In-Context Conditioning, from episodes of other tasks: the
    evaluated episodes' own success rate would tell the critic their outcomes."""
    if spec.icc_reward_average is not None:
        return spec.icc_reward_average, []
    if spec.icc_episodes == 0:
        return spec.critics[0].critic.actor_conditioning().initial_reward_average, []
    tasks = environment.sample_tasks(spec.icc_episodes, split=spec.split, seed=spec.seed + 1_000_003)
    episodes = player.start(tasks, 1)
    player.play(episodes)
    rewards = [float(e.reward) for e in episodes]
    return float(np.mean(rewards)), rewards


def _sample(pool: Sequence[tuple[int, int]], count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    if count >= len(pool):
        return list(pool)
    chosen = rng.choice(len(pool), size=count, replace=False)
    return [pool[i] for i in sorted(chosen)]


@dataclass
class _Ranking:
    """The ranking probe: probe states that yielded ``k`` candidate next states each."""

    probes: list[tuple[int, int]]
    """(base episode, token index) of every kept probe state."""
    candidates: list[StatePoint]
    """``k`` candidates per kept probe, in probe order."""
    k: int


@dataclass
class _Scores:
    """One critic's values at the sampled states and at the ranking candidates, and its statistics."""

    states: list[float]
    candidates: list[float]
    stats: dict[str, float]


def _ranking(
    player: EpisodePlayer,
    base: Sequence[EpisodeRecord],
    pool: Sequence[tuple[int, int]],
    spec: CriticEvalSpec,
    rng: np.random.Generator,
) -> _Ranking:
    """Probe states and their candidate next states (step 3 of the module docstring)."""
    k_max = max(spec.ranking_k) if spec.ranking_k else 0
    # Probe states whose episode went on to another segment: from a state in the last segment
    # every candidate ends the episode, and a terminal state is not something a critic scores.
    last_state: dict[int, int] = {}
    for i, t in pool:
        last_state[i] = max(t, last_state.get(i, t))
    later_pool = [(i, t) for i, t in pool if t < last_state[i]]
    probes_at = _sample(later_pool, spec.ranking_states, rng) if k_max else []
    draws = k_max * spec.ranking_oversample
    rollouts = [base[i].cut(t) for i, t in probes_at for _ in range(draws)]
    player.play(rollouts)
    ranking = _Ranking([], [], k_max)
    for number, (base_index, t) in enumerate(probes_at):
        found = []
        for rollout in rollouts[number * draws : (number + 1) * draws]:
            later = [int(s) for s in _states_of(rollout, player.tokenizer, spec, capped=False) if s > t]
            if later:
                found.append(StatePoint(rollout, base_index, later[0]))
            if len(found) == k_max:
                break
        if len(found) == k_max:
            ranking.probes.append((base_index, t))
            ranking.candidates += found
    dropped = len(probes_at) - len(ranking.probes)
    if dropped:
        logger.warning(
            "ranking: %d of %d probe states had fewer than %d non-terminal candidates; dropped",
            dropped,
            len(probes_at),
            k_max,
        )
    return ranking


def run_critic_eval(
    spec: CriticEvalSpec,
    player: EpisodePlayer,
    environment: Environment,
    backends: Mapping[str, CriticBackend],
    *,
    actor_description: str,
    show_progress: bool = True,
) -> CriticEvalResult:
    """The measurements of the module docstring; ``backends`` maps each critic's name to its backend."""
    tokenizer = player.tokenizer
    rng = np.random.default_rng(spec.seed)
    specs = {c.name: c.scored_critic(spec.segments) for c in spec.critics}
    tasks = environment.sample_tasks(spec.tasks, split=spec.split, seed=spec.seed)
    with Progress(disable=not show_progress) as progress:
        phase = progress.add_task("critic-eval", total=4 + len(backends))
        base = player.start(tasks, spec.group_size)
        player.play(base)
        progress.advance(phase)
        success = float(np.mean([r.reward for r in base]))
        logger.info("played %d episodes of the fixed policy (mean reward %.3f)", len(base), success)

        pool = [(i, int(t)) for i, record in enumerate(base) for t in _states_of(record, tokenizer, spec)]
        if not pool:
            raise ValueError("the policy produced no policy tokens: there are no states to evaluate")
        points = [StatePoint(base[i], i, t) for i, t in _sample(pool, spec.states, rng)]
        mc = _monte_carlo(player, points, spec.continuations)
        progress.advance(phase)
        ranking = _ranking(player, base, pool, spec, rng)
        progress.advance(phase)
        candidate_values = [
            float(np.mean(r)) for r in _monte_carlo(player, ranking.candidates, spec.continuations)
        ]
        progress.advance(phase)
        icc_average, icc_rewards = _icc_average(spec, player, environment)
        actor = ActorInfo(actor_description, icc_average)
        scores: dict[str, _Scores] = {}
        for name, backend in backends.items():
            values, stats = critic_values(
                backend, specs[name], [*points, *ranking.candidates], base, tokenizer, actor
            )
            scores[name] = _Scores(values[: len(points)], values[len(points) :], stats)
            progress.advance(phase)

    mc_values = np.array([np.mean(rewards) for rewards in mc])
    m = spec.continuations
    noise = float(np.mean([v * (1 - v) / (m - 1) for v in mc_values])) if m > 1 else float("nan")
    rows = {
        name: _metrics(spec, score, mc_values, candidate_values, ranking) for name, score in scores.items()
    }
    metrics = {name: row for name, (row, _) in rows.items()}
    notes = {name: why for name, (_, why) in rows.items() if why}
    states = _evaluated_states(points, mc, mc_values, scores, tokenizer)
    probes = _probe_records(tokenizer, base, ranking, candidate_values, scores)
    scored_on = {c.name: c.scored_on(spec.segments) for c in spec.critics}
    ceiling = _ceiling(spec, mc, states, scores) if m > 1 else []
    extra = baseline_fields(base, points, ranking.candidates, mc_values, candidate_values, spec)
    return CriticEvalResult(
        metrics, states, probes, noise, success, icc_average, icc_rewards, scored_on, ceiling, notes, **extra
    )


def _evaluated_states(
    points: Sequence[StatePoint],
    mc: list[list[float]],
    mc_values: np.ndarray,
    scores: dict[str, _Scores],
    tokenizer: Any,
) -> list[EvaluatedState]:
    return [
        EvaluatedState(
            episode=point.base,
            token_index=point.token_index,
            prefix_text=decode(tokenizer, point.record.token_ids[: point.token_index]),
            mc_value=float(value),
            mc_rewards=list(rewards),
            critic_values={name: score.states[n] for name, score in scores.items()},
            position=response_position(point.record, point.token_index),
            turn_position=turn_position(point.record, point.token_index),
        )
        for n, (point, value, rewards) in enumerate(zip(points, mc_values, mc, strict=True))
    ]


def _ceiling(
    spec: CriticEvalSpec, mc: list[list[float]], states: list[EvaluatedState], scores: dict[str, _Scores]
) -> list[dict[str, Any]]:
    """The oracle ceiling and each critic's EV / ceiling per position bucket (:mod:`.ceiling`)."""
    return ceiling_rows(
        np.array(mc, dtype=float),
        np.array([state.position for state in states]),
        {name: np.array(score.states) for name, score in scores.items()},
        spec.position_edges,
        episodes=np.array([state.episode for state in states]),
        turn_positions=np.array([state.turn_position for state in states]),
        seed=spec.seed,
    )


def _metrics(
    spec: CriticEvalSpec,
    score: _Scores,
    mc_values: np.ndarray,
    candidate_values: list[float],
    ranking: _Ranking,
) -> tuple[dict[str, float], dict[str, str]]:
    """One critic's row (:mod:`.scores`) with its statistics, and the reason for every n/a in it."""
    truth = np.array(candidate_values).reshape(len(ranking.probes), ranking.k)
    guess = np.array(score.candidates).reshape(len(ranking.probes), ranking.k)
    row, notes = critic_row(
        np.array(score.states), mc_values, guess, truth, spec.ranking_k, ranking_states=spec.ranking_states
    )
    row.update({f"stat_{key}": value for key, value in score.stats.items()})
    return row, notes


def _probe_records(
    tokenizer: Any,
    base: Sequence[EpisodeRecord],
    ranking: _Ranking,
    candidate_values: list[float],
    scores: dict[str, _Scores],
) -> list[RankingProbe]:
    probes = []
    k = ranking.k
    for number, (base_index, t) in enumerate(ranking.probes):
        chosen_candidates = [
            Candidate(
                segment_text=decode(tokenizer, point.record.token_ids[t : point.token_index]),
                mc_value=candidate_values[n],
                critic_values={name: score.candidates[n] for name, score in scores.items()},
            )
            for n, point in enumerate(ranking.candidates[number * k : (number + 1) * k], start=number * k)
        ]
        probes.append(
            RankingProbe(base_index, t, decode(tokenizer, base[base_index].token_ids[:t]), chosen_candidates)
        )
    return probes
