"""The source tree as data: modules, their imports (top-level and function-local), their sizes."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GENERATED = ("libs/lecritique/v1/",)
"""Generated code (gRPC stubs): outside every rule here."""


@dataclass
class Module:
    name: str
    """Dotted name: ``lecritique.critics.kinds``, ``services.value_trainer.server``."""
    path: Path
    tree: ast.Module
    imports: set[str] = field(default_factory=set)
    """Dotted names this module imports, anywhere in it (a function-local import counts)."""

    @property
    def relative(self) -> str:
        return str(self.path.relative_to(ROOT))


def _module_name(path: Path) -> str:
    relative = (
        path.relative_to(ROOT / "libs") if path.is_relative_to(ROOT / "libs") else path.relative_to(ROOT)
    )
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from package import submodule`` depends on the submodule, ``from module import name`` on the module.
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def load_modules() -> dict[str, Module]:
    paths = [
        *sorted((ROOT / "libs" / "lecritique").rglob("*.py")),
        *sorted((ROOT / "services").rglob("*.py")),
    ]
    modules = {}
    for path in paths:
        if any(str(path.relative_to(ROOT)).startswith(prefix) for prefix in GENERATED):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        module = Module(_module_name(path), path, tree, _imported_names(tree))
        modules[module.name] = module
    return modules


def resolve(name: str, modules: dict[str, Module]) -> str | None:
    """The project module an imported name lives in (``a.b.C`` -> ``a.b``), or None if foreign."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


@pytest.fixture(scope="session")
def modules() -> dict[str, Module]:
    return load_modules()
