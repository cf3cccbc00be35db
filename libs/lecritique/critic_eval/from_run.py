"""The critic-eval spec of a run folder (``lecritique critic-eval --run RUN_DIR``; the study's probe).

The run's resolved ``spec.json`` gives the task, the policy's template and sampling and the
critic; the weight store gives the policy and critic versions. States are held-out (eval split)
prefixes at every response position (segment rule ``token``), so the report has the ceiling table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lecritique.config.experiment import ExperimentSpec, SpecError, parse_spec
from lecritique.config.probe import FixedPolicyProbe
from lecritique.critic_eval.config import CriticEvalSpec, EvaluatedCritic
from lecritique.critics.config import SegmentsConfig
from lecritique.run_folder import RunFolder
from lecritique.weights.store import WeightStore


def run_spec(folder: Path) -> ExperimentSpec:
    """The run's resolved experiment spec (``RUN_DIR/spec.json``)."""
    try:
        document = RunFolder(folder).recorded_spec()
    except ValueError as error:
        raise SpecError(f"--run {folder}: {error}") from None
    if document is None:
        raise SpecError(
            f"--run {folder}: no spec.json in it; name the --out folder of a `lecritique run` (or a study's runs/<variant>/seed<s>)"
        )
    return parse_spec(document, spec_dir=folder)


def critic_label(spec: ExperimentSpec) -> str:
    """``pvf`` for a critic shown the reference, ``vf`` for one shown the trajectory only, else its kind/context."""
    context = getattr(spec.critic, "context", None)
    return {"none": "vf", "reference": "pvf"}.get(
        str(context), f"{getattr(spec.critic, 'kind', 'critic')}-{context}"
    )


def spec_from_run(
    folder: Path, *, name: str | None = None, critic_version: int | None = None, **settings: Any
) -> CriticEvalSpec:
    """The critic-eval spec of a run: its newest policy and its newest critic (or ``critic_version``).

    ``settings`` override critic-eval's own fields (``tasks``, ``states``, ``continuations``, ...).
    """
    spec = run_spec(folder)
    if spec.critic is None:
        raise SpecError(
            f"--run {folder}: the run has no critic (estimator {spec.estimator.name!r}); there is nothing to evaluate"
        )
    store = WeightStore(folder / "weights")
    policy = store.latest("policy")
    if policy is None:
        raise SpecError(
            f"--run {folder}: no policy weights in {folder / 'weights' / 'policy'}; did the run start?"
        )
    critic = _critic_path(store, folder, critic_version)
    return probe_spec(spec, str(policy[1]), critic, name or critic_label(spec), **settings)


def probe_spec(
    spec: ExperimentSpec,
    policy: str,
    critic: str | None,
    name: str,
    *,
    probe: FixedPolicyProbe | None = None,
    **settings: Any,
) -> CriticEvalSpec:
    """critic-eval of ``spec``'s critic (weights ``critic``) on held-out states of ``policy``, at
    every response position (the ceiling table); ``probe``'s tasks, group size, states and
    continuations (None: critic-eval's defaults), and ``settings`` override critic-eval's fields."""
    assert spec.critic is not None
    document = {
        "policy": {"path": policy, "template": spec.policy.template},
        "environment": spec.environment.model_dump(mode="json"),
        "sampling": spec.rollout.sampling.model_dump(mode="json"),
        "split": "eval",
        "seed": spec.seed,
        "segments": SegmentsConfig(rule="token", max_segments=4096).model_dump(mode="json"),
        "critics": [EvaluatedCritic(name=name, critic=spec.critic, path=critic).model_dump(mode="json")],
        **(probe.probe_settings() if probe is not None else {}),
        **settings,
    }
    return CriticEvalSpec.model_validate(document)


def _critic_path(store: WeightStore, folder: Path, version: int | None) -> str | None:
    """The critic's weights: ``version`` (refused naming what is there if absent), else the newest;
    None for a critic without weights (a frozen LLM)."""
    if version is not None:
        path = store.path("critic", version)
        if not path.is_dir():
            raise SpecError(
                f"critic version {version} is not in {store.role_dir('critic')} (kept: {store.versions('critic')}); "
                "older versions are pruned after critic.keep_versions"
            )
        return str(path)
    latest = store.latest("critic")
    return None if latest is None else str(latest[1])
