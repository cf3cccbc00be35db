"""Where the client finds the API and its token: arguments, then environment, then ``lecritique login``'s file.

* URL: ``--api`` / ``api_url=``, else ``LECRITIQUE_API_URL``, else the config file, else
  ``http://127.0.0.1:8000``.
* Token: ``token=``, else ``LECRITIQUE_API_TOKEN``, else the config file. Never a command-line
  option: arguments are visible to every user in the process table.
* Config file: ``$LECRITIQUE_CLIENT_CONFIG``, else ``$XDG_CONFIG_HOME/lecritique/client.json`` (``~/.config``),
  written with mode 0600 by ``lecritique login``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_API_URL = "http://127.0.0.1:8000"
URL_ENV = "LECRITIQUE_API_URL"
TOKEN_ENV = "LECRITIQUE_API_TOKEN"
CONFIG_ENV = "LECRITIQUE_CLIENT_CONFIG"


def config_path() -> Path:
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "lecritique" / "client.json"


def read_config(path: Path | None = None) -> dict[str, str]:
    path = path or config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the client config {path}: {error}") from None
    return (
        {key: str(value) for key, value in data.items() if isinstance(value, str)}
        if isinstance(data, dict)
        else {}
    )


def write_config(api_url: str, token: str, path: Path | None = None) -> Path:
    """Store the API URL and token, readable by the owner only."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"api_url": api_url, "token": token}, handle)
    os.replace(temporary, path)
    return path


@dataclass(frozen=True)
class ClientSettings:
    api_url: str
    """Base URL of the REST API."""
    token: str | None
    """Bearer token (None: requests go unauthenticated and get 401)."""
    token_source: str = "argument"
    """Where the token came from, named in the message when the API refuses it: ``argument``,
    ``env`` (``LECRITIQUE_API_TOKEN``), ``config`` (the login file) or ``none``."""


def resolve_settings(api_url: str | None = None, token: str | None = None) -> ClientSettings:
    stored = read_config()
    url = api_url or os.environ.get(URL_ENV) or stored.get("api_url") or DEFAULT_API_URL
    if token:
        return ClientSettings(url.rstrip("/"), token, "argument")
    if os.environ.get(TOKEN_ENV):
        return ClientSettings(url.rstrip("/"), os.environ[TOKEN_ENV], "env")
    if stored.get("token"):
        return ClientSettings(url.rstrip("/"), stored["token"], "config")
    return ClientSettings(url.rstrip("/"), None, "none")


def refused_token_advice(source: str) -> str:
    """What to fix when the API refuses the token that came from ``source`` (see :class:`ClientSettings`)."""
    if source == "env":
        return (
            f"the token in {TOKEN_ENV} is wrong: fix or unset {TOKEN_ENV} "
            "(it takes precedence over the token `lecritique login` saved)"
        )
    if source == "config":
        return f"the token `lecritique login` saved in {config_path()} is wrong: run `lecritique login` again"
    if source == "none":
        return f"no token was given: run `lecritique login` (or set {TOKEN_ENV})"
    return (
        "the token given is wrong: ask whoever runs the API for yours (`lecritique api hash-token` makes one)"
    )
