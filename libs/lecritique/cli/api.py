"""``lecritique api``: run the REST API, make bearer tokens.

The API is a service (``services/api``), not part of the library: ``serve`` names its entry point
(``services.api.app:create_app_from_env``) for uvicorn to load and passes its options as the
``LECRITIQUE_API_*`` variables the service reads, exactly as the Helm chart does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from lecritique.tenancy.tokens import hash_token, is_tenant_name, new_token

API_FACTORY = "services.api.app:create_app_from_env"
"""The API service's application factory, as uvicorn names it."""

api_app = typer.Typer(name="api", help="The REST API (submit, inspect and cancel experiments).", no_args_is_help=True)


@api_app.command("serve")
def serve(
    redis_url: Annotated[str, typer.Option(envvar=["LECRITIQUE_API_REDIS_URL", "REDIS_URL"], help="Redis for experiment records.")],
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8000,
    launcher: Annotated[str, typer.Option(envvar="LECRITIQUE_API_LAUNCHER", help="local or kubernetes.")] = "local",
    tokens_file: Annotated[
        Path | None, typer.Option(envvar="LECRITIQUE_API_TOKENS_FILE", help="JSON of tenant -> sha256:<hex> token hash.")
    ] = None,
    runs_dir: Annotated[Path, typer.Option(envvar="LECRITIQUE_API_RUNS_DIR", help="Local launcher: run directories.")] = Path("runs"),
    launcher_defaults: Annotated[
        Path | None, typer.Option(envvar="LECRITIQUE_API_LAUNCHER_DEFAULTS", help="Kubernetes launcher: the chart's launcher-defaults.json.")
    ] = None,
    reconcile_seconds: Annotated[float, typer.Option(envvar="LECRITIQUE_API_RECONCILE_SECONDS", help="Status refresh period.")] = 15.0,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "info",
) -> None:
    """Serve the REST API with uvicorn (OpenAPI at /docs). Every other setting (tokens, tenant
    policies, body limit, ...) comes from its LECRITIQUE_API_* variable; see docs/deployment.md."""
    import uvicorn

    if launcher not in ("local", "kubernetes"):
        raise typer.BadParameter(f"launcher must be 'local' or 'kubernetes', got {launcher!r}")
    options = {
        "LECRITIQUE_API_REDIS_URL": redis_url,
        "LECRITIQUE_API_LAUNCHER": launcher,
        "LECRITIQUE_API_TOKENS_FILE": str(tokens_file) if tokens_file else "",
        "LECRITIQUE_API_RUNS_DIR": str(runs_dir),
        "LECRITIQUE_API_LAUNCHER_DEFAULTS": str(launcher_defaults) if launcher_defaults else "",
        "LECRITIQUE_API_RECONCILE_SECONDS": str(reconcile_seconds),
    }
    os.environ.update(options)
    uvicorn.run(API_FACTORY, factory=True, host=host, port=port, log_level=log_level.lower())


@api_app.command("hash-token")
def hash_token_command(
    tenant: Annotated[str, typer.Argument(help="Tenant the token belongs to.")],
    stdin: Annotated[bool, typer.Option("--stdin", help="Hash the token read from stdin instead of making a new one.")] = False,
) -> None:
    """Make a bearer token and print it with the hash to configure (only the hash is stored)."""
    token = sys.stdin.readline().strip() if stdin else new_token()
    if not token:
        raise typer.BadParameter("empty token on stdin")
    if not is_tenant_name(tenant):
        raise typer.BadParameter(f"tenant name {tenant[:80]!r} must be 1-63 of a-z 0-9 _ . - (starting alphanumeric)")
    digest = hash_token(token)
    if not stdin:
        typer.echo(f"token (give it to {tenant}; it is not stored anywhere): {token}")
    typer.echo(f"hash: {digest}")
    typer.echo(f"helm: --set api.auth.tokens.{tenant}={digest}")
