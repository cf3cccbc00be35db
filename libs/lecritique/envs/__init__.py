"""Task suites behind one interface: ``get_environment(name, **config)``.

>>> env = get_environment("sudoku", size=4, empty_cells=[3, 4])
>>> tasks = env.sample_tasks(8, split="train", seed=0)

Each environment has a pydantic config (``kind`` selects it) in the ``EnvironmentConfig``
discriminated union that experiment specs embed; ``build_environment(config)`` builds one.
Heavy libraries (reasoning-gym, minigrid) are imported only when an environment needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from lecritique.envs.arithmetic import ArithmeticConfig, ArithmeticEnvironment
from lecritique.envs.babyai_text import BabyAITextConfig, BabyAITextEnvironment
from lecritique.envs.base import (
    Demonstration,
    Environment,
    EpisodeState,
    ScoreResult,
    Split,
    StepResult,
    Task,
)
from lecritique.envs.codeio import CodeIOConfig, CodeIOEnvironment
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.countdown import CountdownConfig, CountdownEnvironment
from lecritique.envs.dataset import DatasetConfig, DatasetEnvironment
from lecritique.envs.hidden_digits import HiddenDigitsConfig, HiddenDigitsEnvironment
from lecritique.envs.reasoning_gym import ReasoningGymConfig, ReasoningGymEnvironment
from lecritique.envs.sudoku import SudokuConfig, SudokuEnvironment

EnvironmentConfig = Annotated[
    SudokuConfig
    | ArithmeticConfig
    | CountdownConfig
    | ReasoningGymConfig
    | CodeIOConfig
    | BabyAITextConfig
    | DatasetConfig
    | HiddenDigitsConfig,
    Field(discriminator="kind"),
]
"""One environment's configuration; ``kind`` names the environment."""

_ENVIRONMENTS: dict[str, tuple[type[EnvironmentConfigBase], type[Environment]]] = {
    "sudoku": (SudokuConfig, SudokuEnvironment),
    "arithmetic": (ArithmeticConfig, ArithmeticEnvironment),
    "countdown": (CountdownConfig, CountdownEnvironment),
    "reasoning_gym": (ReasoningGymConfig, ReasoningGymEnvironment),
    "codeio": (CodeIOConfig, CodeIOEnvironment),
    "babyai_text": (BabyAITextConfig, BabyAITextEnvironment),
    "dataset": (DatasetConfig, DatasetEnvironment),
    "hidden_digits": (HiddenDigitsConfig, HiddenDigitsEnvironment),
}
_CONFIG_ADAPTER: TypeAdapter[Any] = TypeAdapter(EnvironmentConfig)


def environment_names() -> list[str]:
    return sorted(_ENVIRONMENTS)


def parse_environment_config(data: Mapping[str, Any]) -> EnvironmentConfigBase:
    """Validate a config mapping with a ``kind`` field; errors name the environment and fields."""
    kind = data.get("kind")
    if kind not in _ENVIRONMENTS:
        raise ValueError(f"unknown environment {kind!r}; known: {', '.join(environment_names())}")
    try:
        config: EnvironmentConfigBase = _CONFIG_ADAPTER.validate_python(dict(data))
    except ValidationError as error:
        raise ValueError(_describe(str(kind), error)) from None
    return config


def _describe(kind: str, error: ValidationError) -> str:
    config_class = _ENVIRONMENTS[kind][0]
    unknown = [str(item["loc"][-1]) for item in error.errors() if item["type"] == "extra_forbidden"]
    problems = []
    if unknown:
        known = ", ".join(name for name in config_class.model_fields if name != "kind")
        problems.append(f"unknown field(s) {', '.join(unknown)} (known: {known})")
    for item in error.errors():
        if item["type"] != "extra_forbidden":
            location = ".".join(str(part) for part in item["loc"][1:]) or "config"
            problems.append(f"{location}: {item['msg']}")
    return f"invalid configuration for environment {kind!r}: " + "; ".join(problems)


def build_environment(config: EnvironmentConfigBase) -> Environment:
    """The environment a validated config describes."""
    kind = getattr(config, "kind", None)
    if kind not in _ENVIRONMENTS:
        raise ValueError(f"unknown environment {kind!r}; known: {', '.join(environment_names())}")
    config_class, environment_class = _ENVIRONMENTS[kind]
    if not isinstance(config, config_class):
        raise TypeError(f"environment {kind!r} needs a {config_class.__name__}, got {type(config).__name__}")
    return environment_class(config)  # type: ignore[call-arg]


def environment_turn_limit(config: EnvironmentConfigBase) -> int:
    """The most policy turns of one episode of the environment ``config`` describes.

    Single-turn environments answer without being built; multi-turn ones derive their limit from
    their config when built (cheap: their heavy libraries load on first use).
    """
    kind = getattr(config, "kind", None)
    if kind in _ENVIRONMENTS and not _ENVIRONMENTS[kind][1].multi_turn:
        return 1
    return int(build_environment(config).max_turns)


def environment_prompt_budget(config: EnvironmentConfigBase) -> int:
    """Tokens a first prompt of the environment ``config`` describes may take (without building it)."""
    kind = getattr(config, "kind", None)
    if kind not in _ENVIRONMENTS:
        raise ValueError(f"unknown environment {kind!r}; known: {', '.join(environment_names())}")
    return _ENVIRONMENTS[kind][1].prompt_budget_tokens


def get_environment(name: str, **config: Any) -> Environment:
    """Build environment ``name`` from keyword settings (validated by its config model)."""
    if "kind" in config and config["kind"] != name:
        raise ValueError(f"kind {config['kind']!r} contradicts environment name {name!r}")
    return build_environment(parse_environment_config({**config, "kind": name}))


__all__ = [
    "ArithmeticConfig",
    "BabyAITextConfig",
    "CodeIOConfig",
    "CountdownConfig",
    "DatasetConfig",
    "Demonstration",
    "Environment",
    "EnvironmentConfig",
    "EnvironmentConfigBase",
    "EpisodeState",
    "HiddenDigitsConfig",
    "ReasoningGymConfig",
    "ScoreResult",
    "Split",
    "StepResult",
    "SudokuConfig",
    "Task",
    "build_environment",
    "environment_names",
    "environment_prompt_budget",
    "environment_turn_limit",
    "get_environment",
    "parse_environment_config",
]
