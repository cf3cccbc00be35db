"""``lecritique api``: run the REST API, make bearer tokens.

The API is a service (``services/api``), not part of the library: ``serve`` names its entry point
(``services.api.app:create_app_from_env``) for uvicorn to load and passes its options as the
``LECRITIQUE_API_*`` variables the service reads, exactly as the Helm chart does.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lecritique.tenancy.tokens import hash_token, is_tenant_name, new_token

if TYPE_CHECKING:
    from lecritique.redis_connection import EmbeddedRedis

API_FACTORY = "services.api.app:create_app_from_env"
"""The API service's application factory, as uvicorn names it."""

api_app = typer.Typer(
    name="api", help="The REST API (submit, inspect and cancel experiments).", no_args_is_help=True
)


@api_app.command("serve")
def serve(
    redis_url: Annotated[
        str | None,
        typer.Option(
            envvar=["LECRITIQUE_API_REDIS_URL", "REDIS_URL"],
            help="Redis for experiment records (--dev: an embedded one).",
        ),
    ] = None,
    dev: Annotated[
        bool,
        typer.Option(
            "--dev",
            help="This machine only: start an embedded Redis (as `lecritique run` does), make a token "
            "for tenant 'dev' (printed once) and use the local launcher.",
        ),
    ] = False,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="LECRITIQUE_API_PORT", help="HTTP port.")] = 8000,
    launcher: Annotated[
        str, typer.Option(envvar="LECRITIQUE_API_LAUNCHER", help="local or kubernetes.")
    ] = "local",
    tokens_file: Annotated[
        Path | None,
        typer.Option(envvar="LECRITIQUE_API_TOKENS_FILE", help="JSON of tenant -> sha256:<hex> token hash."),
    ] = None,
    runs_dir: Annotated[
        Path, typer.Option(envvar="LECRITIQUE_API_RUNS_DIR", help="Local launcher: run directories.")
    ] = Path("runs"),
    launcher_defaults: Annotated[
        Path | None,
        typer.Option(
            envvar="LECRITIQUE_API_LAUNCHER_DEFAULTS",
            help="Kubernetes launcher: the chart's launcher-defaults.json.",
        ),
    ] = None,
    reconcile_seconds: Annotated[
        float, typer.Option(envvar="LECRITIQUE_API_RECONCILE_SECONDS", help="Status refresh period.")
    ] = 15.0,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "info",
) -> None:
    """Serve the REST API with uvicorn (OpenAPI at /docs). Every other setting (tokens, tenant
    policies, body limit, ...) comes from its LECRITIQUE_API_* variable; see docs/deployment.md."""
    import uvicorn

    redis_url, redis, token = _redis_and_token(redis_url, dev, launcher, runs_dir, host, port)
    variables = _service_variables(
        redis_url, launcher, tokens_file, runs_dir, launcher_defaults, reconcile_seconds, token
    )
    if redis is not None:
        # --dev: the runs connect as the experiments' user, which sees only lecritique:exp-* keys.
        variables["LECRITIQUE_API_EXPERIMENT_REDIS_URL"] = redis.experiments_url
    os.environ.update(variables)
    try:
        uvicorn.run(API_FACTORY, factory=True, host=host, port=port, log_level=log_level.lower())
    finally:
        if redis is not None:
            redis.stop()


def _redis_and_token(
    redis_url: str | None, dev: bool, launcher: str, runs_dir: Path, host: str, port: int
) -> tuple[str, DevRedis | None, str | None]:
    """The API's Redis URL, the embedded server to stop (--dev) and the dev tenant's token (--dev);
    a bad launcher, or no Redis without --dev, is refused with the reason."""
    if launcher not in ("local", "kubernetes"):
        raise typer.BadParameter(f"launcher must be 'local' or 'kubernetes', got {launcher!r}")
    if dev:
        if launcher != "local":
            raise typer.BadParameter("--dev runs experiments on this machine: it needs --launcher local")
        return _dev_setup(runs_dir, host, port)
    if not redis_url:
        typer.secho(
            "error: the API needs a Redis: give --redis-url (or LECRITIQUE_API_REDIS_URL), or run "
            "`lecritique api serve --dev` for an embedded one on this machine (docs/deployment.md, Local mode)",
            fg="red",
            err=True,
        )
        raise typer.Exit(2)
    return redis_url, None, None


def _service_variables(
    redis_url: str,
    launcher: str,
    tokens_file: Path | None,
    runs_dir: Path,
    launcher_defaults: Path | None,
    reconcile_seconds: float,
    dev_token: str | None,
) -> dict[str, str]:
    """The LECRITIQUE_API_* variables the service reads (with --dev, the dev tenant's token hash
    added to the tokens already in the environment)."""
    variables = {
        "LECRITIQUE_API_REDIS_URL": redis_url,
        "LECRITIQUE_API_LAUNCHER": launcher,
        "LECRITIQUE_API_TOKENS_FILE": str(tokens_file) if tokens_file else "",
        "LECRITIQUE_API_RUNS_DIR": str(runs_dir),
        "LECRITIQUE_API_LAUNCHER_DEFAULTS": str(launcher_defaults) if launcher_defaults else "",
        "LECRITIQUE_API_RECONCILE_SECONDS": str(reconcile_seconds),
    }
    if dev_token is not None:
        tokens = json.loads(os.environ.get("LECRITIQUE_API_TOKENS") or "{}")
        variables["LECRITIQUE_API_TOKENS"] = json.dumps({**tokens, DEV_TENANT: hash_token(dev_token)})
    return variables


DEV_TENANT = "dev"
"""The tenant ``serve --dev`` makes a token for."""


@dataclass(frozen=True)
class DevRedis:
    """``serve --dev``'s embedded Redis, with the chart's ACL users (``lecritique.launch.redis_acl``)
    in its configuration from the start: the API's user and the experiments' user, random passwords."""

    server: EmbeddedRedis
    api_url: str
    experiments_url: str

    def stop(self) -> None:
        self.server.stop()


def _dev_setup(runs_dir: Path, host: str, port: int) -> tuple[str, DevRedis, str]:
    """The embedded Redis (data under the runs folder, so records survive a restart) and a fresh
    token; prints what a client needs. Returns (the API's Redis URL, the server, token)."""
    from lecritique.launch import redis_acl
    from lecritique.redis_connection import start_embedded_redis

    data = runs_dir.resolve() / ".api-redis"
    api_password, experiments_password = secrets.token_hex(24), secrets.token_hex(24)
    server = start_embedded_redis(data, acl=redis_acl.dev_acl(api_password, experiments_password))
    redis = DevRedis(
        server,
        redis_acl.user_url(server.url, redis_acl.API_USER, api_password),
        redis_acl.user_url(server.url, redis_acl.EXPERIMENTS_USER, experiments_password),
    )
    token = new_token()
    api_url = f"http://{host}:{port}"
    lines = [
        f"lecritique API (dev): {api_url}, local launcher, runs in {runs_dir.resolve()}, embedded Redis (data in {data})",
        f"token of tenant {DEV_TENANT!r}, printed this once and stored nowhere (a restart makes a new one); in another shell:",
        f"export LECRITIQUE_API_URL={api_url}",
        f"export LECRITIQUE_API_TOKEN={token}",
    ]
    typer.echo("\n".join(lines))
    sys.stdout.flush()
    return redis.api_url, redis, token


@api_app.command("hash-token")
def hash_token_command(
    tenant: Annotated[str, typer.Argument(help="Tenant the token belongs to.")],
    stdin: Annotated[
        bool, typer.Option("--stdin", help="Hash the token read from stdin instead of making a new one.")
    ] = False,
) -> None:
    """Make a bearer token and print it with the hash to configure (only the hash is stored): as a
    Helm value, a --tokens-file entry and the LECRITIQUE_API_TOKENS variable."""
    token = sys.stdin.readline().strip() if stdin else new_token()
    if not token:
        raise typer.BadParameter("empty token on stdin")
    if not is_tenant_name(tenant):
        raise typer.BadParameter(
            f"tenant name {tenant[:80]!r} must be 1-63 of a-z 0-9 _ . - (starting alphanumeric)"
        )
    digest = hash_token(token)
    if not stdin:
        typer.echo(f"token (give it to {tenant}; it is not stored anywhere): {token}")
    typer.echo(f"hash: {digest}")
    typer.echo(f"helm: --set api.auth.tokens.{tenant}={digest}")
    entry = json.dumps({tenant: digest})
    typer.echo(
        f"tokens file (lecritique api serve --tokens-file FILE; a JSON object, one entry per tenant): {entry}"
    )
    typer.echo(f"or the variable: export LECRITIQUE_API_TOKENS='{entry}'")
