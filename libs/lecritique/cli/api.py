"""``lecritique api``: run the REST API, make bearer tokens."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

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
    """Serve the REST API with uvicorn (OpenAPI at /docs). Tokens also come from LECRITIQUE_API_TOKENS."""
    import logging
    import os

    import uvicorn

    from services.api.app import create_app
    from services.api.settings import ApiSettings

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s api %(levelname)s %(name)s: %(message)s")
    if launcher not in ("local", "kubernetes"):
        raise typer.BadParameter(f"launcher must be 'local' or 'kubernetes', got {launcher!r}")
    kind: Literal["local", "kubernetes"] = "kubernetes" if launcher == "kubernetes" else "local"
    try:
        settings = ApiSettings(
            redis_url=redis_url,
            launcher=kind,
            tokens=json.loads(os.environ.get("LECRITIQUE_API_TOKENS") or "{}"),
            tokens_file=tokens_file,
            runs_dir=runs_dir,
            launcher_defaults=launcher_defaults,
            namespace=os.environ.get("LECRITIQUE_API_NAMESPACE") or None,
            reconcile_seconds=reconcile_seconds,
        )
        app = create_app(settings)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower())


@api_app.command("hash-token")
def hash_token_command(
    tenant: Annotated[str, typer.Argument(help="Tenant the token belongs to.")],
    stdin: Annotated[bool, typer.Option("--stdin", help="Hash the token read from stdin instead of making a new one.")] = False,
) -> None:
    """Make a bearer token and print it with the hash to configure (only the hash is stored)."""
    from services.api.auth import hash_token, new_token, parse_token_hashes

    token = sys.stdin.readline().strip() if stdin else new_token()
    if not token:
        raise typer.BadParameter("empty token on stdin")
    digest = hash_token(token)
    try:
        parse_token_hashes({tenant: digest}, "tenant")
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    if not stdin:
        typer.echo(f"token (give it to {tenant}; it is not stored anywhere): {token}")
    typer.echo(f"hash: {digest}")
    typer.echo(f"helm: --set api.auth.tokens.{tenant}={digest}")
