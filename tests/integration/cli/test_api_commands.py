"""``lecritique api``: what it prints for a person setting up a local API (issue 30)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lecritique.tenancy.tokens import hash_token
from tests.helm_support import ROOT


def lecritique(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("LECRITIQUE_API", "REDIS_URL"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "libs"), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "lecritique", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_hash_token_prints_the_tokens_file_and_variable_forms() -> None:
    done = lecritique("api", "hash-token", "alice")
    assert done.returncode == 0, done.stderr
    token = done.stdout.split("it is not stored anywhere): ", 1)[1].split()[0]
    entry = {"alice": hash_token(token)}
    assert (
        f"tokens file (lecritique api serve --tokens-file FILE; a JSON object, one entry per tenant): {json.dumps(entry)}"
        in done.stdout
    )
    assert f"export LECRITIQUE_API_TOKENS='{json.dumps(entry)}'" in done.stdout
    assert f"helm: --set api.auth.tokens.alice={entry['alice']}" in done.stdout


def test_serve_without_a_redis_says_where_one_comes_from() -> None:
    done = lecritique("api", "serve")
    assert done.returncode == 2
    assert (
        "the API needs a Redis: give --redis-url (or LECRITIQUE_API_REDIS_URL), or run `lecritique api serve --dev`"
        in done.stderr
    )
    assert "Missing option" not in done.stderr
