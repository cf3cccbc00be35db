"""Services are entry points the CLI names (pyproject.toml), never modules the library imports."""

import ast
import tomllib

from lecritique.cli.serve import SERVICE_ENTRY_POINTS, Service, service_entry
from tests.unit.architecture.conftest import ROOT


def test_every_service_is_an_entry_point_to_a_serve_function():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
        SERVICE_ENTRY_POINTS
    ]
    assert set(declared) == {service.value for service in Service}
    for target in declared.values():
        module, function = target.split(":")
        tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
        assert function in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, target


def test_the_installed_entry_points_name_the_same_functions():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
        SERVICE_ENTRY_POINTS
    ]
    for service in Service:
        function = service_entry(service)
        assert f"{function.__module__}:{function.__name__}" == declared[service.value]
