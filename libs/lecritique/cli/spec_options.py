"""Options every command that reads a spec shares: ``--set PATH=VALUE`` overrides."""

from __future__ import annotations

from typing import Annotated

import typer

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="PATH=VALUE",
        help="Override one field of the spec, as if the file said it (repeatable): --set critic.optimizer.lr=3e-4.",
    ),
]
