"""Each setting is defined in one place: the spec section is the component's own settings model."""

import ast
import typing
from pathlib import Path

from lecritique.advantages import estimator_classes
from lecritique.config import ReplaySpec
from lecritique.config.estimators import EstimatorSpec
from lecritique.replay.buffer import ReplayBuffer
from lecritique.replay.config import ReplayBounds, ReplayConfig

LIBS = Path(__file__).resolve().parents[2] / "libs" / "lecritique"


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
