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


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("**/*.yaml")), ids=lambda p: str(p.relative_to(EXAMPLES)))
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
