"""Entry point of the ``lecritique`` console script.

Sub-command modules import heavy dependencies (torch, grpc) inside their commands, so
``lecritique --help`` stays fast.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from lecritique import __version__
from lecritique.cli.api import api_app
from lecritique.cli.chart import chart_app
from lecritique.cli.compare import compare
from lecritique.cli.critic import critic_app
from lecritique.cli.critic_eval import critic_eval
from lecritique.cli.envs import envs_app
from lecritique.cli.experiments import experiments_app
from lecritique.cli.login import login
from lecritique.cli.models import app as models_app
from lecritique.cli.orchestrate import orchestrate
from lecritique.cli.report import report
from lecritique.cli.run import run
from lecritique.cli.serve import serve
from lecritique.cli.study import study
from lecritique.cli.submit import submit
from lecritique.launch.local.quiet import quiet_third_party


def bare_extend(argv: list[str]) -> bool:
    """Whether a ``lecritique run`` command line has ``--extend`` without a number after it (the
    spelling of releases where ``--extend`` was a flag that let SPEC's larger steps through)."""
    if "run" not in argv:
        return False
    for index, word in enumerate(argv):
        if word == "--extend":
            following = argv[index + 1] if index + 1 < len(argv) else None
            return following is None or not following.lstrip("-").isdigit()
    return False


class LecritiqueApp(typer.Typer):
    """The command line, with a clear refusal of the old ``--extend`` flag (it now takes a number)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if bare_extend(sys.argv[1:]):
            typer.echo(
                "--extend takes the number of policy steps to add: `--extend 20` continues the run in "
                "OUT to the steps its spec.json recorded plus 20 (a bare --extend, which let a larger "
                "orchestrator.steps in SPEC through, is gone; that spec needs --extend with the difference)",
                err=True,
            )
            raise SystemExit(2)
        return super().__call__(*args, **kwargs)


app = LecritiqueApp(
    name="lecritique",
    help="Reinforcement learning of LLMs with learned value functions (PVF, TETHER, GenAC, LVRL).",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Keep third-party progress bars and load reports (Hugging Face) in the output.",
        ),
    ] = False,
) -> None:
    """lecritique command line."""
    quiet_third_party(verbose)


app.add_typer(models_app, name="models")
app.command(name="serve")(serve)
app.command(name="orchestrate")(orchestrate)
app.command(name="run")(run)
app.command(name="report")(report)
# `compare A1 A2 --vs B1 B2`: --vs reaches the command among the runs (it splits them into arms).
app.command(name="compare", context_settings={"ignore_unknown_options": True})(compare)
app.add_typer(api_app, name="api")
app.add_typer(chart_app, name="chart")
app.command(name="critic-eval")(critic_eval)
app.add_typer(critic_app, name="critic")
app.add_typer(envs_app, name="envs")
app.command(name="study")(study)
app.command(name="submit")(submit)
app.add_typer(experiments_app, name="experiments")
app.command(name="login")(login)


@app.command()
def version() -> None:
    """Print the lecritique version."""
    typer.echo(__version__)


if __name__ == "__main__":
    app()
