"""Every shipped example spec parses, and the generated ones are current."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from lecritique.config import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_examples", EXAMPLES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", sorted(p for p in EXAMPLES.glob("**/*.yaml") if "studies" not in p.parts), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_parses(path):
    spec = load_spec(path)
    if spec.estimator.build().uses_critic:
        assert spec.critic is not None


def test_every_environment_and_baseline_pair_is_present_and_current():
    generator = _generator()
    for environment in generator.ENVIRONMENTS:
        for baseline in generator.BASELINES:
            path = EXAMPLES / environment / f"{baseline}.yaml"
            assert path.exists(), f"missing {path}: run python examples/generate.py"
            assert yaml.safe_load(path.read_text()) == generator.spec_for(environment, baseline), f"{path} is stale"


@pytest.mark.parametrize("environment", sorted(p.parent.name for p in EXAMPLES.glob("*/tether.yaml")))
def test_the_examples_are_the_papers_setups(environment):
    """TETHER mixes LOO with a plain value function; tether-pvf with the privileged one; LVRL
    uses a frozen LLM critic shown the group, fit for lvrl's hindsight values."""
    tether = load_spec(EXAMPLES / environment / "tether.yaml")
    assert tether.estimator.name == "tether" and tether.critic.kind == "discriminative" and tether.critic.context == "none"
    privileged = load_spec(EXAMPLES / environment / "tether-pvf.yaml")
    assert privileged.estimator.name == "tether" and privileged.critic.context in ("reference", "loo_group")
    lvrl = load_spec(EXAMPLES / environment / "lvrl.yaml")
    assert lvrl.estimator.name == "lvrl" and lvrl.critic.kind == "frozen_llm" and lvrl.critic.hindsight
    assert lvrl.critic.max_peers >= lvrl.rollout.group_size - 1  # every sibling is shown
