"""Every shipped example spec parses, and the generated ones are current."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from lecritique.config import load_spec

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_examples", EXAMPLES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "path",
    sorted(p for p in EXAMPLES.glob("**/*.yaml") if "studies" not in p.parts),
    ids=lambda p: str(p.relative_to(EXAMPLES)),
)
def test_example_parses(path):
    spec = load_spec(path)
    if spec.estimator.build().uses_critic:
        assert spec.critic is not None


def test_every_environment_and_baseline_pair_is_present_and_current():
    generator = _generator()
    for environment in generator.ENVIRONMENTS:
        for baseline in generator.baselines(environment):
            path = EXAMPLES / environment / f"{baseline}.yaml"
            assert path.exists(), f"missing {path}: run python examples/generate.py"
            assert yaml.safe_load(path.read_text()) == generator.spec_for(environment, baseline), (
                f"{path} is stale"
            )
        shipped = {path.stem for path in (EXAMPLES / environment).glob("*.yaml")}
        assert shipped == set(generator.baselines(environment)), (
            f"{environment}: stale files, run python examples/generate.py"
        )


@pytest.mark.parametrize("environment", sorted(p.parent.name for p in EXAMPLES.glob("*/tether.yaml")))
def test_the_examples_are_the_papers_setups(environment):
    """TETHER mixes LOO with a plain value function; tether-pvf with the privileged one."""
    tether = load_spec(EXAMPLES / environment / "tether.yaml")
    assert (
        tether.estimator.name == "tether"
        and tether.critic.kind == "discriminative"
        and tether.critic.context == "none"
    )
    privileged = load_spec(EXAMPLES / environment / "tether-pvf.yaml")
    assert privileged.estimator.name == "tether" and privileged.critic.context in ("reference", "loo_group")


def test_lvrl_ships_only_where_it_is_lvrl():
    """LVRL (Zhu et al., 2026): a multi-turn task, a capable frozen LLM behind an OpenAI-compatible
    endpoint shown the whole group, one state per turn scored in hindsight. On a single-turn task
    it is GRPO, so none is shipped there."""
    from lecritique.envs import build_environment

    shipped = sorted(EXAMPLES.glob("**/*.yaml"))
    lvrl = [p for p in shipped if "studies" not in p.parts and load_spec(p).estimator.name == "lvrl"]
    for path in lvrl:
        assert build_environment(load_spec(path).environment).multi_turn, f"{path}: single-turn LVRL is GRPO"
        if path.parent.name == "critics":  # the tiny CPU ones say they show the mechanics only
            assert "mechanics" in path.read_text().split("\nname:")[0], (
                f"{path} does not say it is not LVRL's setup"
            )
    assert [p.relative_to(EXAMPLES).as_posix() for p in lvrl if p.parent.name != "critics"] == [
        "babyai-text/lvrl.yaml"
    ]
    spec = load_spec(EXAMPLES / "babyai-text" / "lvrl.yaml")
    critic = spec.critic
    assert critic.kind == "frozen_llm" and critic.hindsight and critic.llm.kind == "openai"
    assert critic.llm.base_url.startswith("https://") and critic.llm.api_key_env
    assert critic.max_peers >= spec.rollout.group_size - 1  # every sibling is shown
    assert critic.segments.rule == "turn" and critic.segments.max_segments is None  # each turn is a state


def test_babyai_examples_hold_a_whole_episode():
    """Every turn of a 100-step BabyAI episode fits the engine's context (256-token actions)."""
    for path in (EXAMPLES / "babyai-text").glob("*.yaml"):
        spec = load_spec(path)
        assert spec.rollout.engine.max_model_len >= 100 * spec.rollout.sampling.max_tokens, path


def test_the_five_minute_pair_differs_only_in_its_critic():
    """README, "A critic beside its baseline in five minutes": same seed, tasks, policy and evaluation."""
    critic = load_spec(EXAMPLES / "five-minutes" / "tether-pvf.yaml").model_dump(mode="json")
    baseline = load_spec(EXAMPLES / "five-minutes" / "mean.yaml").model_dump(mode="json")
    assert critic["estimator"]["name"] == "tether" and critic["critic"]["context"] == "reference"
    assert baseline["estimator"]["name"] == "mean" and baseline["critic"] is None
    changed = {key for key in critic.keys() | baseline.keys() if critic.get(key) != baseline.get(key)}
    assert changed == {"name", "estimator", "critic"}, changed
    assert critic["orchestrator"]["eval_every"] is not None and critic["orchestrator"]["steps"] <= 50
