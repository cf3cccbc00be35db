"""Every command README.md and docs/*.md tell a person to type is run as written
(tests/integration/docs/test_documented_commands_run.py), or marked as needing what this machine
lacks (tests/unit/docs/documented.py says how); a documented command that stops working fails a
test, and so does a ``lecritique`` command naming a sub-command or an option the CLI no longer has.
"""

from __future__ import annotations

from typing import Any

import pytest
import typer

from lecritique.cli.main import app
from tests.unit.docs.documented import ROOT, Command, all_commands, lecritique_words

COMMANDS = all_commands()


def _cli_command(words: list[str]) -> tuple[Any, list[str], list[str]]:
    """The (click) command the words name, the sub-command path, and the words after it."""
    command: Any = typer.main.get_command(app)
    path: list[str] = []
    rest = list(words)
    while hasattr(command, "commands") and rest:  # a group (typer vendors its own click: no isinstance)
        if rest[0].startswith("-"):  # the group's own option (`lecritique --verbose run ...`)
            group_options = {name for parameter in command.params for name in parameter.opts}
            assert rest[0] in group_options, (
                f"`lecritique {' '.join(path)}` has no option {rest[0]} (known: {sorted(group_options)})"
            )
            path.append(rest.pop(0))
            continue
        names = rest[0].split("|")  # a synopsis may list alternatives: `experiments list|get|...`
        found = [command.commands.get(name) for name in names]
        missing = [name for name, sub in zip(names, found, strict=True) if sub is None]
        assert not missing, (
            f"`lecritique {' '.join(path)}` has no sub-command {missing} (known: {sorted(command.commands)})"
        )
        command = found[0]
        path.append(rest.pop(0))
    return command, path, rest


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if lecritique_words(c) is not None], ids=lambda c: c.where
)
def test_a_documented_lecritique_command_names_what_the_cli_has(command: Command) -> None:
    words = lecritique_words(command)
    assert words is not None
    cli_command, path, rest = _cli_command(words)
    options = {
        name for parameter in cli_command.params for name in (*parameter.opts, *parameter.secondary_opts)
    } | {"--help"}
    if path == ["compare"]:
        from lecritique.cli.compare import VERSUS

        options.add(VERSUS)  # the separator between two arms, which the command reads among its runs
    named = {word.strip("[]").split("=", 1)[0] for word in rest if word.strip("[").startswith("--")}
    unknown = sorted(named - options)
    assert not unknown, (
        f"{command.where}: `lecritique {' '.join(path)}` has no option {unknown} (known: {sorted(options)})"
    )
    if command.kind == "synopsis":
        return
    for word in rest:  # files of the repository it names exist (examples/..., helm/...)
        if "/" in word and word.endswith((".yaml", ".yml", ".json")) and not word.startswith(("$", "/")):
            assert (ROOT / word).exists(), f"{command.where}: {word} does not exist"


def test_every_command_is_run_or_marked() -> None:
    """The classification itself: every command is one of the known kinds, and some are run."""
    kinds = {command.kind for command in COMMANDS}
    assert kinds <= {"run", "synopsis", "local-api"} | {
        f"needs:{kind}" for kind in ("cluster", "gpu", "long", "docker", "api")
    }
    assert [c.text for c in COMMANDS if c.kind == "run"], "no documented command is run"
    assert any(c.text.startswith("make demo") and c.kind == "needs:long" for c in COMMANDS)
