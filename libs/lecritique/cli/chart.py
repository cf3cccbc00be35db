"""``lecritique chart render``: the Helm chart rendered without a ``helm`` binary.

Helm's own template engine, through the Python binding of Helm's Go SDK that the chart tests use
(``helm-python-sdk``, the ``chart`` extra): the same objects ``helm template`` prints, for
``kubectl apply -f`` or a review, on a machine that has no ``helm``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from lecritique.config.documents import SpecError, merge_documents, read_mapping

chart_app = typer.Typer(
    name="chart", help="The Helm chart (helm/lecritique) without a helm binary.", no_args_is_help=True
)
DEFAULT_CHART = Path("helm/lecritique")


def set_value(values: dict[str, Any], assignment: str) -> dict[str, Any]:
    """``values`` with ``a.b.c=VALUE`` applied (VALUE read as a YAML scalar, as ``helm --set`` reads it)."""
    path, sep, raw = assignment.partition("=")
    if not sep or not path or any(not part for part in path.split(".")):
        raise typer.BadParameter(f"{assignment!r} is not KEY.PATH=VALUE", param_hint="--set")
    nested: Any = yaml.safe_load(raw) if raw else ""
    for part in reversed(path.split(".")):
        nested = {part: nested}
    return merge_documents(values, nested)


def rendered_documents(templates: dict[str, str]) -> str:
    """One multi-document YAML stream, each object under a ``# Source:`` line, as ``helm template`` prints."""
    parts = []
    for path in sorted(templates):
        text = templates[path].strip()
        if not text or path.endswith("NOTES.txt"):
            continue
        for document in text.split("\n---"):
            if document.strip() and document.strip() != "---":
                parts.append(f"---\n# Source: {path}\n{document.strip().removeprefix('---').strip()}\n")
    return "".join(parts)


ExperimentOption = Annotated[
    Path | None,
    typer.Option(
        "--experiment",
        help="Instead of the chart's objects: the pods an experiment of this spec would get from the API's "
        "kubernetes launcher with these chart values (image, node selectors, tolerations, affinity, "
        "resources, pull secrets; --out writes every object of the experiment).",
        exists=True,
        dir_okay=False,
    ),
]


@chart_app.command("render")
def render(
    values: Annotated[
        list[Path] | None, typer.Option("--values", "-f", help="A values file (repeatable; later ones win).")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY.PATH=VALUE over the files (repeatable), as in helm."),
    ] = None,
    chart: Annotated[Path, typer.Option(help="The chart folder.")] = DEFAULT_CHART,
    name: Annotated[str, typer.Option(help="Release name.")] = "lecritique",
    namespace: Annotated[str, typer.Option(help="Namespace of the objects.")] = "lecritique",
    out: Annotated[Path | None, typer.Option(help="Write the objects here (default: stdout).")] = None,
    experiment: ExperimentOption = None,
    experiment_id: Annotated[
        str,
        typer.Option(
            help="--experiment: the id the objects are named after (the API makes one per submission)."
        ),
    ] = "exp-preview",
    tenant: Annotated[
        str | None,
        typer.Option(
            help="--experiment: also list what this tenant's policy in the values (api.tenantPolicies, "
            "modelsRoot, datasetsRoot) refuses, as the API would answer its submission."
        ),
    ] = None,
) -> None:
    """Render the chart with Helm's engine (what `helm template NAME CHART -n NAMESPACE -f FILE` prints),
    or with --experiment SPEC the pods that experiment would get."""
    merged = _values(values, set_)
    if experiment is not None:
        from lecritique.cli.chart_experiment import without_token_requirement

        merged = without_token_requirement(merged)
    templates = _rendered(merged, chart, name, namespace)
    if experiment is not None:
        from lecritique.cli.chart_experiment import experiment_pods

        summary, objects = experiment_pods(templates, experiment, experiment_id, tenant)
        typer.echo(summary, nl=False)
        if out is not None:
            out.write_text(yaml.safe_dump_all(objects, sort_keys=False))
            typer.echo(f"{len(objects)} objects of experiment {experiment_id} written to {out}", err=True)
        return
    stream = rendered_documents(templates)
    if out is None:
        typer.echo(stream, nl=False)
    else:
        out.write_text(stream)
        typer.echo(f"{stream.count('# Source:')} objects written to {out}", err=True)


def _values(values: list[Path] | None, set_: list[str] | None) -> dict[str, Any]:
    """The values files merged in order, then the --set assignments."""
    merged: dict[str, Any] = {}
    for path in values or ():
        try:
            loaded = read_mapping(path, "values file")
        except SpecError as error:
            raise typer.BadParameter(str(error), param_hint="--values") from None
        merged = merge_documents(merged, loaded)
    for assignment in set_ or ():
        merged = set_value(merged, assignment)
    return merged


def _rendered(merged: dict[str, Any], chart: Path, name: str, namespace: str) -> dict[str, str]:
    """Template path -> text, from Helm's engine (exit 2 without the binding, 1 on Helm's refusal)."""
    try:
        from helm_python import Chart
    except ImportError:
        typer.secho(
            "error: rendering needs Helm's Python binding: pip install 'lecritique[chart]' (helm-python-sdk)",
            fg="red",
            err=True,
        )
        raise typer.Exit(2) from None
    if not (chart / "Chart.yaml").is_file():
        raise typer.BadParameter(f"{chart} has no Chart.yaml (run from the repository root, or give --chart)")
    loaded_chart = Chart.load(str(chart))
    try:
        return dict(loaded_chart.render(merged, name=name, namespace=namespace))
    except Exception as error:  # Helm's failures (a `required` value, the schema) come back as one message
        typer.secho(f"error: {error}", fg="red", err=True)
        raise typer.Exit(1) from None
    finally:
        loaded_chart.close()
