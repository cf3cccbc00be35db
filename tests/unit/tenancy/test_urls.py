"""Base URLs are compared once normalised; what servers could read two ways is refused."""

from __future__ import annotations

import pytest

from lecritique.tenancy.policy import validate_policies
from lecritique.tenancy.urls import NormalURL, endpoint_allowed, normal_url

BASE = ("http://127.0.0.1:5000/alice",)


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("HTTP://Example.COM/a/b/", NormalURL("http", "example.com", 80, "/a/b")),
        ("https://example.com", NormalURL("https", "example.com", 443, "/")),
        ("https://example.com:8443/a/./b/../c", NormalURL("https", "example.com", 8443, "/a/c")),
        ("http://h/alice/%2e%2e/bob", NormalURL("http", "h", 80, "/bob")),
        ("http://h/%61lice", NormalURL("http", "h", 80, "/alice")),
        ("http://[::1]:5000/x", NormalURL("http", "::1", 5000, "/x")),
    ],
)
def test_normal_forms(url: str, normal: NormalURL) -> None:
    assert normal_url(url) == normal


@pytest.mark.parametrize(
    "url",
    [
        "http://h/alice%2f..%2fbob",
        "http://h/alice/..%5Cbob",
        "http://h/alice\\..\\bob",
        "http://h/alice/%252e%252e/bob",
        "http://h/alice/..;/bob",
        "http://h/alice//x",
        "http://h/alice/%00",
        "http://h/alice/%ff",
        "http://h/a b",
        "http://user@h/x",
        "http://h/x?y=1",
        "http://h/x?",
        "http://h/x#f",
        "http://h./x",
        "http://h%2e/x",
        "http://h:99999/x",
        "ftp://h/x",
        "file:///etc",
        "databricks",
        "",
    ],
)
def test_ambiguous_or_foreign_urls_have_no_normal_form(url: str) -> None:
    assert normal_url(url) is None
    assert not endpoint_allowed(url, ("http://h", "ftp://h", "file:///"))


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:5000/alice", True),
        ("http://127.0.0.1:5000/alice/", True),
        ("http://127.0.0.1:5000/alice/runs/1", True),
        ("http://127.0.0.1:5000/alice/x/../y", True),
        ("http://127.0.0.1:5000/alice/%2e%2e/bob", False),
        ("http://127.0.0.1:5000/alice/x/%2e%2e/%2e%2e/bob", False),
        ("http://127.0.0.1:5000/alice-other", False),
        ("http://127.0.0.1:5000/bob", False),
        ("http://127.0.0.1:5001/alice", False),
        ("https://127.0.0.1:5000/alice", False),
    ],
)
def test_endpoint_allowed_compares_normal_forms(url: str, allowed: bool) -> None:
    assert endpoint_allowed(url, BASE) is allowed


def test_default_ports_are_explicit_on_both_sides() -> None:
    assert endpoint_allowed("https://api.wandb.ai", ("https://api.wandb.ai:443",))
    assert endpoint_allowed("https://api.wandb.ai:443/x", ("https://API.wandb.ai",))
    assert not endpoint_allowed("https://api.wandb.ai:444/x", ("https://api.wandb.ai",))


def test_policies_with_ambiguous_endpoints_are_refused_at_start_up() -> None:
    with pytest.raises(ValueError, match="encoded slashes"):
        validate_policies({"alice": {"trackerEndpoints": ["http://h/alice%2fx"]}})
    validate_policies({"alice": {"trackerEndpoints": ["http://h/alice"], "llmEndpoints": ["https://x/v1/"]}})
