"""Import rules of the source tree: no module imports itself through others."""

from __future__ import annotations

import re

from tests.unit.architecture.conftest import ROOT, Module, resolve


def _graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, module in modules.items():
        targets = {resolve(imported, modules) for imported in module.imports}
        graph[name] = {target for target in targets if target is not None and target != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_even_through_function_local_imports(modules):
    assert _cycles(_graph(modules)) == []


def test_a_planted_cycle_through_a_function_local_import_is_found(modules):
    """Positive control: ``trajectory`` imports ``arrays``; planting a function-local import of
    ``trajectory`` in ``arrays`` closes a cycle, which the check above must report."""
    import ast
    import dataclasses

    assert "lecritique.arrays" in _graph(modules)["lecritique.trajectory"]
    arrays = modules["lecritique.arrays"]
    planted_source = (
        arrays.path.read_text()
        + "\n\ndef _planted():\n    from lecritique.trajectory import Trajectory\n    return Trajectory\n"
    )
    planted_tree = ast.parse(planted_source)
    from tests.unit.architecture.conftest import _imported_names

    planted = dataclasses.replace(arrays, tree=planted_tree, imports=_imported_names(planted_tree))
    cycles = _cycles(_graph({**modules, "lecritique.arrays": planted}))
    assert any({"lecritique.arrays", "lecritique.trajectory"} <= set(cycle) for cycle in cycles), cycles


# ---- which package may import which ---------------------------------------------------------
# The picture in docs/ARCHITECTURE.md ("Packages and their imports") is the contract: a package
# imports only the packages its arrow names (and itself). Generated gRPC stubs are the package ``v1``.

ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
ARROW = re.compile(r"^ (\w+) ─*► ([\w ]+?)(?:\s{2,}\(.*\))?$")
"""``package ──► a b c`` (an optional note in parentheses after two spaces)."""


def allowed_imports_from_the_doc() -> dict[str, set[str]]:
    """Package -> the packages it may import, read from the picture in docs/ARCHITECTURE.md."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Packages and their imports") :]
    picture = section[section.index("```\n") + 4 :]
    picture = picture[: picture.index("```")]
    allowed: dict[str, set[str]] = {}
    for line in picture.splitlines():
        if line.startswith(" leaves:"):
            allowed.update({name: set() for name in line.removeprefix(" leaves:").split()})
        elif (arrow := ARROW.match(line)) and arrow.group(1) != "cli":
            allowed[arrow.group(1)] = set(arrow.group(2).split())
    return allowed


ALLOWED = allowed_imports_from_the_doc()
"""Allowed imports of each package of libs/lecritique (``cli`` may import any of them; the
package root only ``cli``). A service may import any package but ``cli``, and no other service."""


def _package(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "services":
        return ".".join(parts[:2])
    if len(parts) == 1 or parts[1] in ("__main__",):
        return "lecritique"
    return parts[1]


def _package_imports(modules: dict[str, Module]) -> set[tuple[str, str]]:
    edges = set()
    for name, module in modules.items():
        for imported in module.imports:
            if imported.startswith("lecritique.v1"):
                target = "v1"
            else:
                resolved = resolve(imported, modules)
                if resolved is None:
                    continue
                target = _package(resolved)
            source = _package(name)
            if target != source:
                edges.add((source, target))
    return edges


def _allowed(source: str, target: str) -> bool:
    if source == "lecritique":
        return target == "cli"
    if source == "cli":
        return not target.startswith("services")
    if source.startswith("services."):
        return not target.startswith("services.") and target != "cli"
    return target in ALLOWED.get(source, set())


def test_every_package_imports_only_what_the_table_allows(modules):
    assert sorted(edge for edge in _package_imports(modules) if not _allowed(*edge)) == []


def test_the_table_names_every_package(modules):
    packages = {_package(name) for name in modules if name.startswith("lecritique.")}
    assert packages - {"cli", "lecritique"} <= set(ALLOWED), sorted(packages - set(ALLOWED))


def test_the_doc_picture_is_read_whole():
    """Every line of the picture is understood: a package the doc names but the parser missed
    would silently allow nothing, or a renamed package silently stop being checked."""
    assert set(ALLOWED) >= {"advantages", "orchestrator", "critics", "config", "launch", "v1", "client"}
    named = {target for targets in ALLOWED.values() for target in targets}
    assert named <= set(ALLOWED), sorted(named - set(ALLOWED))


# ---- launch/ by room -------------------------------------------------------------------------
# Kubernetes rendering and launching, local processes and their supervision, and the API's local
# launcher are separate rooms of launch/ (its package docstring); each imports only itself and the
# modules they share (base, components, redis_acl, host_paths), which import no room.

LAUNCH_ROOMS = ("kubernetes", "local", "api_local")


def _launch_room(module: str) -> str | None:
    """The room of a module under lecritique.launch, "shared" for a top-level module, else None."""
    parts = module.split(".")
    if parts[:2] != ["lecritique", "launch"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in LAUNCH_ROOMS else "shared"


def test_launch_rooms_import_only_themselves_and_the_shared_modules(modules):
    rooms_seen = {_launch_room(name) for name in modules} - {None}
    assert rooms_seen == {*LAUNCH_ROOMS, "shared"}, rooms_seen
    crossings = []
    for name, module in modules.items():
        source = _launch_room(name)
        if source is None:
            continue
        for imported in module.imports:
            resolved = resolve(imported, modules)
            target = _launch_room(resolved) if resolved else None
            if target is not None and target != source and target != "shared":
                crossings.append((name, resolved))
    assert crossings == []
