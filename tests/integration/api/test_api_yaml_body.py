"""``POST /v1/experiments`` takes YAML as well as JSON (issue #41, item 2): a curl user sends the
file ``lecritique run`` reads. In process, kubernetes launcher on a recording endpoint, real Redis.

Malformed YAML, and YAML that JSON could not express (aliases, several documents, a date, ``.nan``,
a non-string key), is a 422 naming ``body`` with the problem (and its line where YAML gives one).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helm_support import ROOT, spec_data
from tests.integration.api.conftest import ALICE

AUTH = {"Authorization": f"Bearer {ALICE}"}
SPEC_YAML = """\
# the sudoku-mini spec, written as a person writes it
name: sudoku-mini
environment: {kind: sudoku, size: 4, empty_cells: [3, 4]}
policy:
  path: /weights/models/policy
critic:
  kind: discriminative
  context: reference
  optimizer: {lr: 1.0e-4}
"""


def _post(api: TestClient, body: str | bytes, content_type: str) -> Any:
    return api.post("/v1/experiments", content=body, headers={**AUTH, "Content-Type": content_type})


def _body_message(response: Any) -> str:
    assert response.status_code == 422, response.text
    messages = {item["field"]: item["message"] for item in response.json()["detail"]}
    assert "body" in messages, messages
    return str(messages["body"])


@pytest.mark.parametrize(
    "content_type", ["application/yaml", "application/x-yaml", "text/yaml", "text/yaml; charset=utf-8"]
)
def test_a_yaml_spec_is_recorded_as_the_same_spec_sent_as_json(api: TestClient, content_type: str) -> None:
    created = _post(api, SPEC_YAML, content_type)
    assert created.status_code == 201, created.text
    as_json = api.post(
        "/v1/experiments",
        json=spec_data(critic={"kind": "discriminative", "context": "reference", "optimizer": {"lr": 1e-4}}),
        headers=AUTH,
    )
    assert as_json.status_code == 201, as_json.text
    specs = [
        api.get(f"/v1/experiments/{r.json()['id']}", headers=AUTH).json()["spec"] for r in (created, as_json)
    ]
    assert specs[0] == specs[1]
    assert specs[0]["critic"]["optimizer"]["lr"] == 1e-4


def test_a_shipped_example_file_is_accepted_as_written(api: TestClient) -> None:
    text = (ROOT / "examples" / "sudoku-mini-pvf.yaml").read_text()
    created = _post(api, text, "application/yaml")
    assert created.status_code == 201, created.text


def test_a_yaml_spec_with_a_bad_field_names_the_field(api: TestClient) -> None:
    response = _post(api, SPEC_YAML.replace("lr: 1.0e-4", "lr: fast"), "application/yaml")
    assert response.status_code == 422, response.text
    assert "critic.optimizer.lr" in {item["field"] for item in response.json()["detail"]}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("name: [sudoku\nseed: 0\n", "line"),
        ("name: sudoku\n  seed: 0\n", "line 2"),
        ("a: &x [1, 2]\nb: *x\n", "aliases"),
        ('x: &a ["lol","lol"]\ny: &b [*a,*a]\nz: [*b,*b]\n', "aliases"),
        ("base: &b {seed: 1}\nother:\n  <<: *b\n", "aliases"),
        ("name: sudoku\n---\nname: other\n", "single document"),
        ("name: sudoku\nseed: 2026-12-05\n", "seed: a date value"),
        ("critic:\n  optimizer: {lr: .nan}\n", "critic.optimizer.lr: nan"),
        ("1: one\n", "key 1"),
        ("", "empty"),
        ("[" * 2000 + "]" * 2000, "nested"),
    ],
)
def test_malformed_yaml_is_422_naming_the_problem(api: TestClient, body: str, problem: str) -> None:
    message = _body_message(_post(api, body, "application/yaml"))
    assert problem in message, message


def test_json_stays_the_default_body(api: TestClient) -> None:
    """A YAML body sent without a YAML content type is read as JSON, as before."""
    assert "not valid JSON" in _body_message(_post(api, SPEC_YAML, "application/json"))
    assert "not valid JSON" in _body_message(_post(api, SPEC_YAML, "text/plain"))


def test_the_openapi_document_declares_both_body_types(api: TestClient) -> None:
    content = api.get("/openapi.json").json()["paths"]["/v1/experiments"]["post"]["requestBody"]["content"]
    assert set(content) == {"application/json", "application/yaml"}
