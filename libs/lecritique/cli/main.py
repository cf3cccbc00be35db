"""Entry point of the ``lecritique`` console script.

Sub-command modules import heavy dependencies (torch, grpc) inside their commands, so
``lecritique --help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated

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

app = typer.Typer(
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
app.command(name="compare")(compare)
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
