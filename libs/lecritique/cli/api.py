"""``lecritique api``: run the REST API, make bearer tokens.

The API is a service (``services/api``), not part of the library: ``serve`` names its entry point
(``services.api.app:create_app_from_env``) for uvicorn to load and passes its options as the
``LECRITIQUE_API_*`` variables the service reads, exactly as the Helm chart does.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lecritique.tenancy.tokens import hash_token, is_tenant_name, new_token

if TYPE_CHECKING:
    from lecritique.redis_connection import EmbeddedRedis

API_FACTORY = "services.api.app:create_app_from_env"
"""The API service's application factory, as uvicorn names it."""

api_app = typer.Typer(
    name="api", help="The REST API (submit, inspect and cancel experiments).", no_args_is_help=True
)


DevMode = Annotated[
    bool,
    typer.Option(
        "--dev",
        help="This machine only: start an embedded Redis (as `lecritique run` does), give tenant "
        "'dev' a token (kept in RUNS_DIR/dev/token, the same at every restart) and model and dataset "
        "folders laid out as on the cluster's weight volume, RUNS_DIR playing /weights "
        "(RUNS_DIR/models/dev, where `lecritique models stage DIR --tenant dev --root RUNS_DIR` puts a "
        "model, and RUNS_DIR/datasets/dev), and use the local launcher.",
    ),
]
DevDatasetRoots = Annotated[
    list[Path] | None,
    typer.Option(
        "--dataset-root",
        help="--dev: another folder the dev tenant's dataset paths may lie under (repeatable).",
    ),
]
DevModelRoots = Annotated[
    list[Path] | None,
    typer.Option(
        "--model-root", help="--dev: another folder the dev tenant's model paths may lie under (repeatable)."
    ),
]
DevNewToken = Annotated[
    bool, typer.Option("--new-token", help="--dev: replace the kept token with a new one.")
]


@api_app.command("serve")
def serve(
    redis_url: Annotated[
        str | None,
        typer.Option(
            envvar=["LECRITIQUE_API_REDIS_URL", "REDIS_URL"],
            help="Redis for experiment records (--dev: an embedded one).",
        ),
    ] = None,
    dev: DevMode = False,
    dataset_root: DevDatasetRoots = None,
    model_root: DevModelRoots = None,
    new_token: DevNewToken = False,
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

    roots = _dev_options(dev, dataset_root, model_root, new_token)
    redis_url, redis, token = _redis_and_token(
        redis_url, dev, launcher, runs_dir, host, port, roots, new_token
    )
    variables = _service_variables(
        redis_url, launcher, tokens_file, runs_dir, launcher_defaults, reconcile_seconds, token
    )
    if redis is not None:
        variables.update(_dev_variables(redis, runs_dir, roots))
    os.environ.update(variables)
    try:
        uvicorn.run(API_FACTORY, factory=True, host=host, port=port, log_level=log_level.lower())
    finally:
        if redis is not None:
            redis.stop()


def _dev_options(
    dev: bool, dataset_roots: list[Path] | None, model_roots: list[Path] | None, new_token: bool
) -> DevRoots:
    """The --dev roots given; those options without --dev are refused, naming what widens roots then."""
    roots = DevRoots(tuple(dataset_roots or ()), tuple(model_roots or ()))
    if not dev and (roots.datasets or roots.models or new_token):
        raise typer.BadParameter(
            "--dataset-root, --model-root and --new-token go with --dev; otherwise a tenant's roots are "
            "datasetRoots / modelRoots in LECRITIQUE_API_TENANT_POLICIES (docs/deployment.md, Tenant policy and quotas)"
        )
    return roots


def _dev_variables(redis: DevRedis, runs_dir: Path, roots: DevRoots) -> dict[str, str]:
    """--dev's own service variables: the runs' Redis user, the weight roots under the runs folder,
    the dev tenant's extra roots (the flags'), the dev flag."""
    policies = dev_policies(os.environ.get("LECRITIQUE_API_TENANT_POLICIES") or "{}", roots.absolute())
    runs = Path(os.path.abspath(runs_dir))
    return {
        # The runs connect as the experiments' user, which sees only lecritique:exp-* keys.
        "LECRITIQUE_API_EXPERIMENT_REDIS_URL": redis.experiments_url,
        # The runs folder plays the weight volume: <runs>/models/<tenant>, <runs>/datasets/<tenant>.
        "LECRITIQUE_API_MODELS_ROOT": str(runs / DEV_MODELS),
        "LECRITIQUE_API_DATASETS_ROOT": str(runs / DEV_DATASETS),
        "LECRITIQUE_API_TENANT_POLICIES": json.dumps(policies),
        "LECRITIQUE_API_DEV": "true",
    }


def _redis_and_token(
    redis_url: str | None,
    dev: bool,
    launcher: str,
    runs_dir: Path,
    host: str,
    port: int,
    roots: DevRoots,
    new_token: bool,
) -> tuple[str, DevRedis | None, str | None]:
    """The API's Redis URL, the embedded server to stop (--dev) and the dev tenant's token (--dev);
    a bad launcher, or no Redis without --dev, is refused with the reason."""
    if launcher not in ("local", "kubernetes"):
        raise typer.BadParameter(f"launcher must be 'local' or 'kubernetes', got {launcher!r}")
    if dev:
        if launcher != "local":
            raise typer.BadParameter("--dev runs experiments on this machine: it needs --launcher local")
        return _dev_setup(runs_dir, host, port, roots, new_token)
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
DEV_FOLDER = "dev"
"""``serve --dev``'s folder under the runs directory: the token file."""
DEV_MODELS = "models"
DEV_DATASETS = "datasets"
"""``serve --dev``'s model and dataset roots under the runs directory, laid out as the chart's weight
volume (``/weights/models/<tenant>``, ``/weights/datasets/<tenant>``): ``lecritique models stage
DIR --tenant dev --root RUNS`` stages a model where ``--dev`` runs may name it."""


@dataclass(frozen=True)
class DevRoots:
    """The dev tenant's dataset and model roots (absolute, normalised; symbolic links kept as written,
    since a spec names paths as the user types them and the launcher resolves both sides)."""

    datasets: tuple[Path, ...]
    models: tuple[Path, ...]

    def absolute(self) -> DevRoots:
        return DevRoots(
            _unique(tuple(Path(os.path.abspath(p)) for p in self.datasets)),
            _unique(tuple(Path(os.path.abspath(p)) for p in self.models)),
        )

    def with_defaults(self, runs_dir: Path) -> DevRoots:
        """``<runs>/datasets/dev`` and ``<runs>/models/dev`` first (created: the tenant's own folders),
        then the flags' folders."""
        runs = Path(os.path.abspath(runs_dir))
        defaults = (runs / DEV_DATASETS / DEV_TENANT, runs / DEV_MODELS / DEV_TENANT)
        for default in defaults:
            default.mkdir(parents=True, exist_ok=True)
        extra = self.absolute()
        return DevRoots(_unique((defaults[0], *extra.datasets)), _unique((defaults[1], *extra.models)))


def _unique(paths: tuple[Path, ...]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(paths))


def dev_policies(policies_json: str, roots: DevRoots) -> dict[str, Any]:
    """The tenant policies of ``LECRITIQUE_API_TENANT_POLICIES`` with the dev tenant's roots added
    (after any its entry already has, in either key spelling)."""
    policies: dict[str, Any] = json.loads(policies_json)
    entry = dict(policies.get(DEV_TENANT, {}))
    for camel, snake, added in (
        ("datasetRoots", "dataset_roots", roots.datasets),
        ("modelRoots", "model_roots", roots.models),
    ):
        earlier = [*entry.pop(camel, []), *entry.pop(snake, [])]
        entry[camel] = list(dict.fromkeys([*earlier, *(str(path) for path in added)]))
    return {**policies, DEV_TENANT: entry}


def dev_token(folder: Path, replace: bool) -> str:
    """The dev tenant's token, kept in ``<folder>/token`` (0600) so that a restart does not change it;
    a new one when there is none, or with ``replace``. A token file others may read is refused."""
    path = folder / "token"
    folder.mkdir(parents=True, exist_ok=True)
    if path.exists() and not replace:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise typer.BadParameter(
                f"{path} is readable by others (mode {mode:o}): `chmod 600 {path}`, or --new-token to replace it"
            )
        kept = path.read_text().strip()
        if kept:
            return kept
    token = new_token()
    temporary = folder / f".token.{os.getpid()}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    os.replace(temporary, path)
    return token


@dataclass(frozen=True)
class DevRedis:
    """``serve --dev``'s embedded Redis, with the chart's ACL users (``lecritique.launch.redis_acl``)
    in its configuration from the start: the API's user and the experiments' user, random passwords."""

    server: EmbeddedRedis
    api_url: str
    experiments_url: str

    def stop(self) -> None:
        self.server.stop()


def _dev_setup(
    runs_dir: Path, host: str, port: int, roots: DevRoots, replace_token: bool
) -> tuple[str, DevRedis, str]:
    """The embedded Redis (data under the runs folder, so records survive a restart), the kept token
    and the dev tenant's folders; prints what a client needs. Returns (the API's Redis URL, the
    server, token)."""
    from lecritique.launch import redis_acl
    from lecritique.redis_connection import start_embedded_redis

    data = runs_dir.resolve() / ".api-redis"
    api_password, experiments_password = secrets.token_hex(24), secrets.token_hex(24)
    server = start_embedded_redis(
        data,
        acl=redis_acl.dev_acl(api_password, experiments_password),
        config=redis_acl.memory_limits(redis_acl.DEV_MAXMEMORY),
    )
    redis = DevRedis(
        server,
        redis_acl.user_url(server.url, redis_acl.API_USER, api_password),
        redis_acl.user_url(server.url, redis_acl.EXPERIMENTS_USER, experiments_password),
    )
    folder = Path(os.path.abspath(runs_dir)) / DEV_FOLDER
    token = dev_token(folder, replace_token)
    roots = roots.with_defaults(runs_dir)
    api_url = f"http://{host}:{port}"
    lines = [
        f"lecritique API (dev): {api_url}, local launcher, runs in {runs_dir.resolve()}, embedded Redis (data in {data})",
        f"dataset paths of tenant {DEV_TENANT!r} (environment.path) may lie under: "
        + ", ".join(str(p) for p in roots.datasets)
        + " (more: --dataset-root PATH)",
        f"model paths of tenant {DEV_TENANT!r} (policy.path, ...) may lie under: "
        + ", ".join(str(p) for p in roots.models)
        + " (more: --model-root PATH)",
        f"token of tenant {DEV_TENANT!r}, kept in {folder / 'token'} (the same after a restart; "
        "--new-token replaces it); in another shell:",
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
