"""critic-eval on a task whose true values are known exactly (a Markov-chain policy, see markov.py)."""

import json

import numpy as np
import pytest

from lecritique.advantages import explained_variance, top1_ranking_accuracy, value_mse
from lecritique.critic_eval import CriticEvalSpec, run_critic_eval
from lecritique.critic_eval.report import write_report
from lecritique.critic_eval.run import build_critic
from lecritique.critic_eval.scores import ranking_counts
from lecritique.engines import HFEngineConfig, SamplingParams
from lecritique.engines.hf import HFEngine
from lecritique.episodes import EpisodePlayer
from lecritique.episodes.local import EngineSampler, LocalEnvironment
from lecritique.models.policy import load_tokenizer
from lecritique.models.templates import PlainTemplate
from tests.integration.critic_eval.markov import (
    MAX_TOKENS,
    CountAEnvironment,
    ExactValues,
    write_markov_policy,
)

M = 64


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    root = tmp_path_factory.mktemp("markov")
    policy = write_markov_policy(root / "policy")
    spec = CriticEvalSpec.model_validate(
        {
            "policy": {"path": str(policy)},
            "environment": {"kind": "arithmetic"},  # replaced by the count_a environment below
            "sampling": {"max_tokens": MAX_TOKENS},
            "tasks": 8,
            "group_size": 4,
            "states": 24,
            "continuations": M,
            "ranking_k": [2, 4],
            "ranking_states": 8,
            "ranking_oversample": 8,
            "seed": 1,
            "critics": [
                {"name": "vf", "critic": {}},
                {"name": "lvrl", "critic": {"kind": "frozen_llm", "max_tokens": 4}},
            ],
        }
    )
    tokenizer = load_tokenizer(policy)
    engine = HFEngine(HFEngineConfig(model_path=str(policy)))
    environment = CountAEnvironment()
    rng = np.random.default_rng(1)
    player = EpisodePlayer(
        EngineSampler(engine),
        LocalEnvironment(environment),
        tokenizer,
        PlainTemplate(),
        SamplingParams(temperature=1.0, max_tokens=MAX_TOKENS),
        64,
        max_turns=environment.max_turns,
        seeds=lambda: int(rng.integers(2**31)),
    )
    backends = {
        entry.name: _Recording(build_critic(entry, spec, policy, root / "scratch")) for entry in spec.critics
    }
    result = run_critic_eval(
        spec, player, environment, backends, actor_description="markov chain", show_progress=False
    )
    paths = write_report(result, root / "report", spec)
    result.shown = [actor for backend in backends.values() for actor in backend.actors]
    return result, paths, ExactValues(policy)


class _Recording:
    """A backend that records the actor information every call shows."""

    def __init__(self, backend):
        self.backend, self.actors = backend, []

    def values(self, queries, actor):
        self.actors.append(actor)
        return self.backend.values(queries, actor)

    def close(self):
        self.backend.close()


def test_in_context_conditioning_never_shows_the_evaluated_episodes_success_rate(evaluation):
    result, _, _ = evaluation
    assert len(result.icc_rewards) == 16  # episodes of their own, apart from the evaluated ones
    assert result.icc_reward_average == pytest.approx(np.mean(result.icc_rewards))
    assert result.shown and all(actor.reward_average == result.icc_reward_average for actor in result.shown)


def test_monte_carlo_values_match_the_exact_values(evaluation):
    result, _, exact = evaluation
    assert len(result.states) == 24
    z = []
    for state in result.states:
        assert len(state.mc_rewards) == M
        truth = exact.of_prefix(state.prefix_text)
        if truth in (0.0, 1.0):
            assert state.mc_value == truth  # decided states: every continuation agrees
            continue
        sigma = np.sqrt(truth * (1 - truth) / M)
        z.append((state.mc_value - truth) / sigma)
        assert abs(z[-1]) < 4.5, (state.prefix_text, state.mc_value, truth)
    assert len(z) >= 10
    assert abs(np.mean(z)) < 1.0 and 0.5 < np.std(z) < 1.6  # unbiased, with binomial spread
    # The reported noise floor is the binomial variance of the estimates.
    floor = np.mean(
        [exact.of_prefix(s.prefix_text) * (1 - exact.of_prefix(s.prefix_text)) / M for s in result.states]
    )
    assert result.mc_noise_mse == pytest.approx(floor, rel=0.5)


def test_ranking_candidates_are_next_segments_with_exact_values(evaluation):
    result, _, exact = evaluation
    assert result.probes, "no ranking probe kept"
    for probe in result.probes:
        assert len(probe.candidates) == 4
        for candidate in probe.candidates:
            # A candidate is one sentence: it ends with ". " before the next segment.
            assert candidate.segment_text.endswith(".")
            truth = exact.of_prefix(probe.prefix_text + candidate.segment_text)
            sigma = max(np.sqrt(truth * (1 - truth) / M), 1e-9)
            assert abs(candidate.mc_value - truth) <= 4.5 * sigma


def test_reported_metrics_are_those_of_the_recorded_values(evaluation):
    result, _, _ = evaluation
    mc = np.array([s.mc_value for s in result.states])
    for name in ("vf", "lvrl"):
        predicted = np.array([s.critic_values[name] for s in result.states])
        metrics = result.metrics[name]
        assert metrics["value_mse"] == pytest.approx(value_mse(predicted, mc))
        assert metrics["ev_var"] == pytest.approx(explained_variance(predicted, mc))
        assert metrics["bias"] == pytest.approx(float(np.mean(predicted - mc)))
        if np.std(predicted) > 0:
            assert metrics["correlation"] == pytest.approx(float(np.corrcoef(predicted, mc)[0, 1]))
        else:  # a critic that scores every state alike has no correlation to report
            assert (
                np.isnan(metrics["correlation"])
                and result.notes[name]["correlation"] == "constant critic values"
            )
        truth = np.array([[c.mc_value for c in p.candidates] for p in result.probes])
        guess = np.array([[c.critic_values[name] for c in p.candidates] for p in result.probes])
        for k in (2, 4):
            counts = ranking_counts(guess[:, :k], truth[:, :k])
            assert metrics[f"top1_k{k}"] == pytest.approx(counts["top1"], nan_ok=True)
            assert metrics[f"mc_ties_k{k}"] + counts["decided"] == len(result.probes)
            # Ties left out: the hit count is the old (ties-are-misses) accuracy over the decided probes.
            assert counts["top1"] * counts["decided"] == pytest.approx(
                top1_ranking_accuracy(guess[:, :k], truth[:, :k]) * len(result.probes)
            )
        assert metrics["ranking_probes"] == len(result.probes)
    # The Markov model writes no "k: p" lines: the frozen critic falls back to the group's peers.
    assert result.metrics["lvrl"]["stat_fallback_states"] == result.metrics["lvrl"]["stat_states"] > 0
    # An untrained scalar head barely varies: it explains none of the variance.
    assert result.metrics["vf"]["ev_var"] < 0.2


def test_report_files(evaluation):
    result, paths, _ = evaluation
    data = json.loads(paths["json"].read_text())
    assert set(data["metrics"]) == {"vf", "lvrl"}
    assert len(data["states"]) == 24 and len(data["ranking_probes"]) == len(result.probes)
    table = paths["markdown"].read_text()
    assert (
        "| critic | scored on | value MSE | ev_var (vs MC values) | bias mean(V − m) | corr(V, m) | sd(V) / sd(m) "
        "| pairs right @ k=2 | pairs right @ k=4 |" in table
    )
    assert table.count("\n| vf |") == 1 and table.count("\n| lvrl |") == 1
    assert paths["plot"].stat().st_size > 10_000 and paths["plot"].read_bytes()[:4] == b"\x89PNG"
