"""The library never imports a service: ``lecritique api serve`` names the API's entry point for
uvicorn instead (services are entry points the CLI names, not imports)."""

from __future__ import annotations

import ast

from tests.helm_support import ROOT


def test_no_library_module_imports_a_service() -> None:
    offenders = []
    for path in sorted((ROOT / "libs" / "lecritique").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            offenders += [
                f"{path.relative_to(ROOT)}: {name}"
                for name in names
                if name == "services" or name.startswith("services.")
            ]
    assert offenders == []


def test_the_cli_names_the_api_factory_that_exists() -> None:
    from lecritique.cli.api import API_FACTORY

    module, _, name = API_FACTORY.partition(":")
    assert module == "services.api.app" and callable(getattr(__import__(module, fromlist=[name]), name))
