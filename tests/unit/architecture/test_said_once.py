"""Each setting is defined in one place: the spec section is the component's own settings model."""

import ast
import typing
from pathlib import Path

from lecritique.advantages import estimator_classes
from lecritique.config import ReplaySpec
from lecritique.config.estimators import EstimatorSpec
from lecritique.replay.buffer import ReplayBuffer
from lecritique.replay.config import ReplayBounds, ReplayConfig

LIBS = Path(__file__).resolve().parents[3] / "libs" / "lecritique"


def _python_files():
    return [path for path in LIBS.rglob("*.py") if "v1" not in path.relative_to(LIBS).parts]


def test_one_dtype_literal():
    definitions = [
        str(path.relative_to(LIBS))
        for path in _python_files()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "DType"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    assert definitions == ["models/dtypes.py"]


def test_replay_bounds_are_the_spec_section_and_the_buffer_defaults():
    assert ReplaySpec is ReplayBounds
    assert issubclass(ReplayConfig, ReplayBounds)
    defaults = ReplayBuffer.__init__.__defaults__
    assert defaults[:3] == (
        ReplayBounds().capacity,
        ReplayBounds().max_reuse,
        ReplayBounds().max_age_versions,
    )


def test_the_reuse_limit_is_written_once():
    """``max_reuse`` gets a value in exactly one place: the ReplayBounds field."""
    sites = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == "max_reuse"
            ):
                sites.append(f"{path.relative_to(LIBS)}:{node.lineno}")
            if isinstance(node, ast.arguments):
                named = [*node.posonlyargs, *node.args]
                for argument, default in zip(
                    named[len(named) - len(node.defaults) :], node.defaults, strict=True
                ):
                    # ``= ...`` in an @overload is no value.
                    if (
                        argument.arg == "max_reuse"
                        and isinstance(default, ast.Constant)
                        and default.value is not Ellipsis
                    ):
                        sites.append(f"{path.relative_to(LIBS)}:{argument.lineno}")
    assert len(sites) == 1 and sites[0].startswith("replay/config.py"), sites


def test_estimator_specs_are_the_estimators_own_and_the_union_is_the_registry():
    """An estimator's options are its ``Spec`` (one model, next to the class); the spec's union is derived."""
    members = typing.get_args(typing.get_args(EstimatorSpec)[0])
    assert set(members) == {cls.Spec for cls in estimator_classes()}
    for cls in estimator_classes():
        built = cls.Spec().build()
        assert type(built) is cls
        for field, value in cls.Spec().options().items():
            assert getattr(built, field) == value, (cls.__name__, field)


# ---- the Monte-Carlo probe: one settings model, one table of defaults, one home for the ceiling ----


def _int_fields_named(names: set[str]) -> list[str]:
    """``module:Class.field`` of every class attribute annotated ``int`` named one of ``names``."""
    found = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for statement in node.body:
                if (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and statement.target.id in names
                    and ast.unparse(statement.annotation) == "int"
                ):
                    found.append(f"{path.relative_to(LIBS)}:{node.name}.{statement.target.id}")
    return sorted(found)


def test_only_the_probe_models_declare_states_and_continuations():
    assert _int_fields_named({"states", "continuations"}) == [
        "config/probe.py:MonteCarloProbe.continuations",
        "config/probe.py:MonteCarloProbe.states",
    ]


def test_every_configured_probe_embeds_the_one_model():
    from lecritique.config.probe import CriticProbeSpec, FixedPolicyProbe, MonteCarloProbe
    from lecritique.critic_eval.config import CriticEvalSpec
    from lecritique.study.config import CeilingSpec

    assert issubclass(CriticProbeSpec, MonteCarloProbe)
    assert issubclass(CeilingSpec, FixedPolicyProbe) and issubclass(CriticEvalSpec, FixedPolicyProbe)
    for model in (CriticProbeSpec, CeilingSpec, CriticEvalSpec):
        for name in MonteCarloProbe.model_fields:
            # The bounds and the docstring are the shared field's; only the default is the context's.
            ours, shared = model.model_fields[name], MonteCarloProbe.model_fields[name]
            assert (ours.metadata, ours.description) == (shared.metadata, shared.description), (model, name)


def _documented_table() -> dict[str, dict[str, int]]:
    """The module docstring's table of defaults, read back: context -> field -> default."""
    from lecritique.config import probe

    assert probe.__doc__ is not None
    lines = [line for line in probe.__doc__.splitlines() if line.startswith("| ``")]
    header = ["tasks", "group_size", "states", "continuations"]
    table = {}
    for line in lines:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        context = cells[0].split("``")[1]
        table[context] = {
            name: int(cell) for name, cell in zip(header, cells[1:], strict=True) if cell != "-"
        }
    return table


def test_the_defaults_table_is_the_docstring_the_models_and_the_docs():
    from lecritique.config.probe import PROBE_DEFAULTS, CriticProbeSpec
    from lecritique.critic_eval.config import CriticEvalSpec
    from lecritique.study.config import CeilingSpec

    assert _documented_table() == PROBE_DEFAULTS
    models = {"critic_probe": CriticProbeSpec, "ceiling": CeilingSpec, "critic-eval": CriticEvalSpec}
    assert set(models) == set(PROBE_DEFAULTS) - {"study --quick"}
    for context, model in models.items():
        assert model.probe_context == context
        fields = set(model.model_fields) & {"tasks", "group_size", "states", "continuations"}
        assert {name: model.model_fields[name].default for name in fields} == PROBE_DEFAULTS[context]
    docs = (LIBS.parents[1] / "docs" / "critics.md").read_text()
    for context, defaults in PROBE_DEFAULTS.items():
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{context}`"))
        assert [int(cell) for cell in row.split("|")[2:-1] if cell.strip() not in ("", "-")] == [
            defaults[name] for name in ("tasks", "group_size", "states", "continuations") if name in defaults
        ], row


def test_a_context_default_leaves_the_shared_model_and_its_siblings_alone():
    from lecritique.config.probe import CriticProbeSpec, FixedPolicyProbe, MonteCarloProbe
    from lecritique.study.config import CeilingSpec

    # The shared models have no defaults of their own: the table's are the only ones.
    for shared in (MonteCarloProbe, FixedPolicyProbe):
        assert all(field.is_required() for field in shared.model_fields.values()), shared
    assert (CriticProbeSpec().states, CeilingSpec().states) == (32, 128)
    assert CeilingSpec(states=40).states == 40
    assert CeilingSpec.model_json_schema()["properties"]["states"]["default"] == 128


def test_the_quick_studys_ceiling_takes_the_tables_row():
    from lecritique.config.probe import PROBE_DEFAULTS, MonteCarloProbe
    from lecritique.study.config import QuickCeiling, QuickProfile, apply_quick, load_study_spec

    row = PROBE_DEFAULTS["study --quick"]
    assert (QuickProfile().ceiling.states, QuickProfile().ceiling.continuations) == (
        row["states"],
        row["continuations"],
    )
    assert QuickCeiling.probe_context == "study --quick" and issubclass(QuickCeiling, MonteCarloProbe)
    study = load_study_spec(LIBS.parents[1] / "examples" / "studies" / "arithmetic.yaml")
    quick = apply_quick(study, LIBS.parents[1] / "examples" / "studies").ceiling
    assert quick.probe_settings() == {**row, "group_size": study.ceiling.group_size}


def test_the_learning_rate_defaults_are_written_once():
    """A default learning rate is a number in one place (``training/config.py``: ``POLICY_LR``,
    ``CRITIC_LR``); elsewhere an ``lr=`` keyword with a literal number is a second home for it."""
    literal_lr = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "lr" and isinstance(node.value, ast.Constant):
                literal_lr.append(f"{path.relative_to(LIBS)}:{node.value.lineno}")
    assert literal_lr == [], literal_lr
    from lecritique.critics.config import GenerativeCriticConfig
    from lecritique.critics.specs import DiscriminativeCriticSpec
    from lecritique.training.config import CRITIC_LR, POLICY_LR, PolicyTrainerConfig

    assert PolicyTrainerConfig().optimizer.lr == POLICY_LR
    assert DiscriminativeCriticSpec().optimizer.lr == CRITIC_LR == GenerativeCriticConfig().optimizer.lr
