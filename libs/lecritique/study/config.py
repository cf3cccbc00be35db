"""The study spec: a base experiment, named variants (overrides of it), seeds, and the ceiling probe.

A study answers "which baseline and which critic on this task, and how close is the critic to the
best possible one": every (variant, seed) is one ordinary experiment, run as ``lecritique run`` does.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from lecritique.config.base import SpecModel
from lecritique.config.documents import (
    SpecError,
    merge_documents,
    read_document,
    read_mapping,
    validation_message,
)
from lecritique.config.experiment import ExperimentSpec, parse_spec
from lecritique.config.overrides import OverrideError, apply_overrides
from lecritique.config.probe import PROBE_DEFAULTS, FixedPolicyProbe, MonteCarloProbe
from lecritique.pretrain.config import PretrainConfig
from lecritique.study.arms import MEAN_ARM, estimator_name, missing_rloo, quick_comparisons
from lecritique.study.summary import COMPARABLE, COMPARED


class VariantSpec(SpecModel):
    """One arm of the study: the base spec with some fields replaced."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=40)
    """Label in tables and plots, and the run folder's name (lower case, digits, dashes)."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Merged into the base spec key by key (nested mappings merge; ``null`` removes a key, e.g. ``critic: null``)."""
    description: str = ""
    """What this variant is, in words (shown in study.md)."""
    pools: bool | None = None
    """This arm's emulated node pools (None: the study's). ``false`` on a critic-free arm gives its
    policy path every core, a critic arm's value core too: the compute-matched control."""


class CeilingSpec(FixedPolicyProbe):
    """The oracle-ceiling probe on each critic variant's final policy and critic (``critic-eval``):
    ``tasks``, ``group_size``, ``states``, ``continuations`` as :class:`FixedPolicyProbe` (defaults:
    the ``ceiling`` row of :mod:`lecritique.config.probe`), on held-out (eval split) tasks, with
    states at every token position (prompt end and inside responses)."""

    probe_context = "ceiling"

    enabled: bool = True
    """Measure it after the runs (critic variants only)."""
    position_edges: list[int] = Field(default_factory=lambda: [1, 3])
    """Response-position bucket edges: [1, 3] gives t = 0 (prompt), 1-2, 3+."""
    seeds: list[int] | None = None
    """Seeds whose final checkpoints are probed; None: the study's first seed only (it is costly)."""


PRETRAINED = "pretrained"
"""``critic.model_path: pretrained`` (the study's one pretrain stage) or ``pretrained:NAME`` in a variant."""


class PretrainStage(SpecModel):
    """A critic pretrained once, before the variants, on the study's own starting policy
    (``lecritique critic pretrain``); variants name it as ``critic.model_path: pretrained[:NAME]``."""

    name: str = Field(default="pretrained", pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=40)
    """The stage's name (its folder ``OUT/pretrain/NAME``)."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Merged into the base spec as a variant's are: the critic pretrained (e.g. ``critic: {context: none}``)."""
    budget: PretrainConfig = Field(default_factory=PretrainConfig)
    """The pretraining budget (tasks per policy, epochs, patience, batch size; stated in study.md)."""


QUICK_CEILING = PROBE_DEFAULTS["study --quick"]
"""The ``--quick`` ceiling probe's tasks, states and continuations (:mod:`lecritique.config.probe`)."""


class QuickCeiling(MonteCarloProbe):
    """The quick profile's ceiling probe: the probe's own fields, defaults from the ``study --quick``
    row of :mod:`lecritique.config.probe`."""

    probe_context = "study --quick"


class QuickProfile(SpecModel):
    """``--quick``: the machinery end to end in a minute or two; not science."""

    steps: int = Field(default=3, ge=1)
    """Policy steps per run."""
    tasks_per_step: int = Field(default=4, ge=1)
    """Tasks per policy step."""
    variants: list[str] | None = None
    """Variants run; None: the reference and the first other variant. A MEAN arm is always added
    (the study's own, else a critic-free ``mean`` variant), each kept variant compared with it."""
    # model_validate: the defaults come from the probe table when the class is built (as CeilingSpec).
    ceiling: QuickCeiling = Field(default_factory=lambda: QuickCeiling.model_validate({}))
    """The ceiling probe's states and continuations (its tasks: the table's row; its group size: the
    study's ceiling's)."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_names(cls, data: Any) -> Any:
        """Studies published before ``ceiling`` (their study.json) name its fields ``ceiling_states``
        and ``ceiling_continuations``: read them as the probe's own."""
        if isinstance(data, dict) and ("ceiling_states" in data or "ceiling_continuations" in data):
            data = dict(data)
            ceiling = dict(data.get("ceiling") or {})
            for old, new in (("ceiling_states", "states"), ("ceiling_continuations", "continuations")):
                if old in data:
                    ceiling[new] = data.pop(old)
            data["ceiling"] = ceiling
        return data


class StudySpec(SpecModel):
    """Variants x seeds of one base experiment, compared against a reference variant."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=40)
    """Study name (prefix of every experiment's name)."""
    base: str | dict[str, Any]
    """The base experiment spec: a path (relative to the study file) or the spec inline."""
    base_set: list[str] = Field(default_factory=list, max_length=256)
    """``PATH=VALUE`` overrides of the base spec (``lecritique study --set``, as ``lecritique run
    --set``), applied before any variant's or pretrain stage's own overrides, so a variant still
    differs where it says it does; recorded in the study folder's ``study.yaml.json``."""
    variants: list[VariantSpec] = Field(min_length=1)
    """The arms compared."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Experiment seeds (task sampling, rollouts, critic head): every variant of a seed draws the
    same batches and starts from the same policy (paired arms)."""
    policy_builds: int | None = Field(default=None, ge=1)
    """Starting policies (tiny builds): seed number i of ``seeds`` starts from the build seeded
    ``seeds[i % policy_builds]``; None: one per seed, at most 3. 1: every seed the first seed's."""
    reference: str
    """The variant every other one is compared against (paired by seed)."""
    final_fraction: float = Field(default=0.25, gt=0.0, le=1.0)
    """Final reward = mean over this last fraction of each run's steps (at least one step; Le
    Critique Fig. 7), stated in the tables."""
    final_window: int | None = Field(default=None, ge=1)
    """Or: a fixed number of last steps (studies published before ``final_fraction``)."""
    metrics: list[str] = Field(default_factory=lambda: list(COMPARED), min_length=1)
    """The figures each declared comparison tests (``final_reward``, ``final_eval_success``,
    ``ev_var_second_half``, ``ev_mse_over_ceiling``): every (comparison, figure) is one test of the
    study's Holm family."""
    bootstrap_samples: int = Field(default=2000, ge=100)
    """Resamples of the seed-level bootstrap CI of paired differences."""
    # model_validate: the probe fields' defaults come from the table when the class is built, which
    # the type checker's view of CeilingSpec() (every probe field required) does not see.
    ceiling: CeilingSpec = Field(default_factory=lambda: CeilingSpec.model_validate({}))
    """The oracle-ceiling probe."""
    quick: QuickProfile = Field(default_factory=QuickProfile)
    """What ``--quick`` runs."""
    comparisons: list[tuple[str, str]] | None = None
    """The paired comparisons (a, b) that get intervals, declared before running (Holm-corrected
    over every declared test); None: every variant against the reference. A comparison of a TETHER
    variant with a MEAN one needs an RLOO variant and the TETHER one compared with it too (at rho =
    0 TETHER is the leave-one-out baseline)."""
    pretrain: list[PretrainStage] = Field(default_factory=list)
    """Critics pretrained once before the variants (resumable); variants use them by ``model_path``."""
    pools: bool = False
    """Run every local experiment with two emulated node pools (``lecritique run --pools``): the
    policy path on half the cores, the value plane on the other half, as on a cluster where the
    critic has nodes of its own. Arms compared at equal wall time (``orchestrator.max_seconds``)
    then pay for a critic what they would pay there, not the cores it takes from the policy."""
    drawn_beside: list[str] = Field(default_factory=list)
    """Studies published in the same ``--doc`` whose variants its figure draws beside this one's
    (one study split across files to fit a time budget); tables and comparisons stay per study."""

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be unique, got {seeds}")
        return seeds

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, metrics: list[str]) -> list[str]:
        unknown = [m for m in metrics if m not in COMPARABLE]
        if unknown or len(set(metrics)) != len(metrics):
            raise ValueError(f"metrics: {metrics} must be distinct names among {', '.join(COMPARABLE)}")
        return metrics

    @model_validator(mode="after")
    def _reference_is_a_variant(self) -> StudySpec:
        if self.policy_builds is not None and self.policy_builds > len(self.seeds):
            raise ValueError(
                f"policy_builds: {self.policy_builds} starting policies for {len(self.seeds)} seeds "
                "(each build is the start of at least one seed)"
            )
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique, got {names}")
        if self.reference not in names:
            raise ValueError(f"reference {self.reference!r} is not a variant ({', '.join(names)})")
        if self.quick.variants is not None and not set(self.quick.variants) <= set(names):
            raise ValueError(f"quick.variants {self.quick.variants} must name variants ({', '.join(names)})")
        for index, (a, b) in enumerate(self.comparisons or []):
            if a == b or a not in names or b not in names:
                raise ValueError(
                    f"comparisons.{index}: [{a}, {b}] must name two different variants ({', '.join(names)})"
                )
        if self.name in self.drawn_beside:
            raise ValueError(f"drawn_beside: names the study itself ({self.name!r})")
        stages = [stage.name for stage in self.pretrain]
        if len(set(stages)) != len(stages):
            raise ValueError(f"pretrain: stage names must be unique, got {stages}")
        for variant in self.variants:
            wanted = pretrained_stage(variant.overrides, stages)
            if wanted is not None and wanted not in stages:
                raise ValueError(
                    f"variant {variant.name!r}: critic.model_path names pretrain stage {wanted!r}, but the study's "
                    f"pretrain stages are {stages or 'none (add a pretrain: section)'}"
                )
        return self

    def final_steps(self, steps: int) -> int:
        """How many last steps of a ``steps``-step run the final reward averages."""
        if self.final_window is not None:
            return self.final_window
        return max(1, math.ceil(self.final_fraction * steps - 1e-9))

    def final_label(self) -> str:
        """The final reward's window, as the tables state it."""
        if self.final_window is not None:
            return f"last {self.final_window} steps"
        return f"last {self.final_fraction:.0%} of steps"

    def build_seeds(self) -> dict[int, int]:
        """Experiment seed -> the seed of the tiny build it starts from."""
        builds = self.policy_builds or min(3, len(self.seeds))
        return {seed: self.seeds[i % builds] for i, seed in enumerate(self.seeds)}

    def compared(self) -> list[tuple[str, str]]:
        """The declared comparisons, or every variant against the reference."""
        if self.comparisons is not None:
            return [(a, b) for a, b in self.comparisons]
        return [(v.name, self.reference) for v in self.variants if v.name != self.reference]


@dataclass(frozen=True)
class PlannedRun:
    """One (variant, seed) experiment of a study."""

    variant: str
    seed: int
    spec: ExperimentSpec
    policy_seed: int | None = None
    """The seed of the tiny build it starts from (None: the spec names a policy path)."""
    pools: bool = False
    """Two emulated node pools (``lecritique run --pools``; the variant's or the study's setting)."""

    @property
    def key(self) -> str:
        return f"{self.variant}/seed{self.seed}"


def pretrained_stage(document: dict[str, Any], stages: list[str]) -> str | None:
    """The pretrain stage a spec (or overrides) names in ``critic.model_path``, else None."""
    critic = document.get("critic")
    path = critic.get("model_path") if isinstance(critic, dict) else None
    if not isinstance(path, str) or not (path == PRETRAINED or path.startswith(PRETRAINED + ":")):
        return None
    if path == PRETRAINED:
        return stages[0] if len(stages) == 1 else PRETRAINED
    return path.split(":", 1)[1]


def pretrain_dir(out: Path, stage: str, policy_seed: int | None = None) -> Path:
    """Where a pretrain stage's ``lecritique critic pretrain`` output lives in the study folder
    (per starting policy when the study has several: ``policy-seed<s>``)."""
    folder = out / "pretrain" / stage
    return folder if policy_seed is None else folder / f"policy-seed{policy_seed}"


def base_document(study: StudySpec, study_dir: Path) -> tuple[dict[str, Any], Path]:
    """The base spec as a mapping, and the folder its relative paths start from."""
    if isinstance(study.base, dict):
        document = copy.deepcopy(study.base)
    else:
        path = (study_dir / study.base).resolve()
        document, study_dir = read_mapping(path, "the study's base spec"), path.parent
    if study.base_set:
        try:
            document = apply_overrides(document, study.base_set, ExperimentSpec)
        except OverrideError as error:
            raise SpecError(f"study {study.name}, base spec: {error}") from None
    return document, study_dir


def apply_quick(study: StudySpec, study_dir: Path = Path(".")) -> StudySpec:
    """The ``--quick`` profile of ``study``: one seed, few steps, a tiny ceiling probe; the reference
    and the first other variant (or ``quick.variants``) and a MEAN arm, each compared with MEAN, so
    that even a quick study says which estimator to use (the study's own MEAN variant, else one added)."""
    quick = study.quick
    names = quick.variants or [
        study.reference,
        next((v.name for v in study.variants if v.name != study.reference), study.reference),
    ]
    base, _ = base_document(study, study_dir)
    mean = next(
        (v for v in study.variants if estimator_name(merge_documents(base, v.overrides)) == "mean"), None
    )
    added = [] if mean is not None else [VariantSpec.model_validate(_mean_arm(study))]
    mean_name = mean.name if mean is not None else added[0].name
    variants = [v for v in study.variants if v.name in names or v.name == mean_name] + added
    kept = [v.name for v in variants]
    ceiling = study.ceiling.model_copy(
        update={
            "tasks": QUICK_CEILING["tasks"],
            **quick.ceiling.probe_settings(),
            "seeds": None,
        }
    )
    # The quick profile must itself be a valid study (the report re-validates it): the reference and
    # the declared comparisons follow the variants it keeps.
    reference = study.reference if study.reference in kept else variants[0].name
    comparisons = quick_comparisons(study.compared(), kept, mean_name)
    return study.model_copy(
        update={
            "variants": variants,
            "reference": reference,
            "comparisons": comparisons,
            "seeds": study.seeds[:1],
            "policy_builds": 1,
            "ceiling": ceiling,
            "final_window": 2,
        }
    )


def _mean_arm(study: StudySpec) -> dict[str, Any]:
    taken = {v.name for v in study.variants}
    name = next(n for n in ("mean", "mean-quick", "mean-baseline") if n not in taken)
    return {**MEAN_ARM, "name": name}


def plan_runs(
    study: StudySpec, study_dir: Path, *, quick: bool = False, out: Path | None = None
) -> list[PlannedRun]:
    """Every (variant, seed) experiment, validated; raises :class:`SpecError` naming the bad one.

    A ``critic.model_path`` naming a pretrain stage becomes that stage's critic (pretrained on the
    run's starting policy) in ``out``; a TETHER-vs-MEAN comparison without its RLOO arm is refused
    (not in the quick profile, which checks the machinery)."""
    base, spec_dir = base_document(study, study_dir)
    documents = {v.name: merge_documents(base, v.overrides) for v in study.variants}
    missing = (
        None
        if quick
        else missing_rloo(study.compared(), {n: estimator_name(d) for n, d in documents.items()})
    )
    if missing is not None:
        raise SpecError(f"study {study.name}: {missing}")
    stages = [stage.name for stage in study.pretrain]
    builds = study.build_seeds()
    runs = []
    # Seed-major: an interrupted study has every variant of its first seeds, not some variants only.
    for seed in study.seeds:
        for variant in study.variants:
            document = copy.deepcopy(documents[variant.name])
            document["name"] = f"{study.name}-{variant.name}-s{seed}"
            document["seed"] = seed
            tiny = isinstance(document.get("policy"), dict) and document["policy"].get("tiny") is not None
            policy_seed = builds[seed] if tiny else None
            stage = pretrained_stage(document, stages)
            if stage is not None:
                per_build = policy_seed if len(set(builds.values())) > 1 else None
                document["critic"]["model_path"] = str(
                    pretrain_dir(out or Path("study-out"), stage, per_build).resolve() / "critic"
                )
            if quick:
                document = merge_documents(document, _quick_overrides(study.quick, "critic" in document))
            try:
                spec = parse_spec(document, spec_dir=spec_dir)
            except SpecError as error:
                raise SpecError(f"variant {variant.name!r}, seed {seed}: {error}") from None
            pools = study.pools if variant.pools is None else variant.pools
            runs.append(PlannedRun(variant.name, seed, spec, policy_seed, pools))
    return runs


def plan_pretrain(study: StudySpec, study_dir: Path, stage: PretrainStage) -> ExperimentSpec:
    """The experiment spec whose critic a stage pretrains: the base with the stage's overrides."""
    base, spec_dir = base_document(study, study_dir)
    document = merge_documents(base, stage.overrides)
    document["name"] = f"{study.name}-pretrain-{stage.name}"
    if isinstance(document.get("critic"), dict):
        document["critic"].pop("model_path", None)
    try:
        return parse_spec(document, spec_dir=spec_dir)
    except SpecError as error:
        raise SpecError(f"pretrain stage {stage.name!r}: {error}") from None


def _quick_overrides(quick: QuickProfile, has_critic: bool) -> dict[str, Any]:
    overrides: dict[str, Any] = {
        "rollout": {"tasks_per_step": quick.tasks_per_step},
        "orchestrator": {"steps": quick.steps, "eval_every": quick.steps, "eval_tasks": 4},
    }
    if has_critic:
        overrides["critic"] = {"warmup_updates": 2}
    return overrides


def load_study_spec(path: str | Path) -> StudySpec:
    """Read and validate a YAML study spec; :class:`SpecError` names every bad field."""
    data = read_document(path, "study spec")
    try:
        return StudySpec.model_validate(data)
    except ValidationError as error:
        raise SpecError(validation_message(error, StudySpec, "study spec")) from None
