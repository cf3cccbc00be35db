"""The chart installs only with bearer-token hashes of the operator's own.

A values file shipped in the repository once carried the hash of the example token
"lecritique-example-token": a cluster installed as documented accepted a token anyone can read.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import yaml

from lecritique.tenancy.tokens import PUBLISHED_HASHES, PUBLISHED_TOKENS, parse_token_hashes
from tests.helm_support import (
    CHART,
    GPU_VALUES_FILE,
    render_objects,
    render_templates,
    with_operator_token,
)

SHIPPED = {"default": {}, "gpu-pools": yaml.safe_load(GPU_VALUES_FILE.read_text())}
"""Every values file the repository ships (the chart's own values.yaml is the default)."""


def _refusal(values: dict[str, Any]) -> str:
    with pytest.raises(Exception) as caught:
        render_templates(values, operator_token=False)
    return str(caught.value)


@pytest.mark.parametrize("name", list(SHIPPED))
def test_a_shipped_values_file_without_the_operators_token_does_not_install(name: str) -> None:
    message = _refusal(SHIPPED[name])
    assert "api.auth.tokens is empty" in message and "lecritique api hash-token" in message


@pytest.mark.parametrize("name", list(SHIPPED))
@pytest.mark.parametrize("digest", PUBLISHED_HASHES)
def test_a_published_example_hash_does_not_install(name: str, digest: str) -> None:
    values = {
        **SHIPPED[name],
        "api": {
            **SHIPPED[name].get("api", {}),
            "auth": {"tokens": {"ops": "sha256:" + "5e" * 32, "research": digest}},
        },
    }
    message = _refusal(values)
    assert (
        "api.auth.tokens.research" in message
        and "published" in message
        and "lecritique api hash-token" in message
    )


@pytest.mark.parametrize("name", list(SHIPPED))
def test_the_operators_own_token_or_secret_installs(name: str) -> None:
    assert render_objects(with_operator_token(SHIPPED[name]))
    assert render_templates(
        {**SHIPPED[name], "api": {**SHIPPED[name].get("api", {}), "auth": {"existingSecret": "ops-tokens"}}},
        operator_token=False,
    )


def test_the_published_hashes_are_those_of_the_published_tokens_and_the_chart_knows_them() -> None:
    assert (
        tuple("sha256:" + hashlib.sha256(token.encode()).hexdigest() for token in PUBLISHED_TOKENS)
        == PUBLISHED_HASHES
    )
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert all(digest in helpers for digest in PUBLISHED_HASHES)


def test_the_api_refuses_a_published_hash_too() -> None:
    with pytest.raises(ValueError, match="published in the lecritique repository"):
        parse_token_hashes({"research": PUBLISHED_HASHES[0]}, "LECRITIQUE_API_TOKENS")
