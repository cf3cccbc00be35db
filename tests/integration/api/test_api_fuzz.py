"""Schemathesis against a real API process, from its own OpenAPI document, with and without a token.

It generates requests from the document (boundary values of every field of the spec, random and
malformed data, and stateful sequences that follow the document's links: submit, then inspect,
read metrics and cancel the experiment just created) and checks every response: no server error,
every status code documented, every body, content type and documented header as declared.

The run is bounded (``--max-examples``, one worker) and seeded, so it is repeatable; the same
command, run by hand against ``lecritique api serve``, is in docs/security.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api.api_process import ApiProcess
from tests.integration.api.kubernetes_recorder import RecordingApiServer
from tests.integration.api.test_api_security import ALICE, api_settings

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance"
MAX_EXAMPLES = 15


def schemathesis(url: str, report: Path, *extra: str) -> tuple[dict[str, Any], str]:
    """Run ``st run`` (the schemathesis CLI of this environment); its JSON report and its output."""
    command = [
        str(Path(sys.executable).with_name("st")),
        "run",
        f"{url}/openapi.json",
        "--checks",
        CHECKS,
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        "1",
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
        "--report",
        "json",
        "--report-json-path",
        str(report),
        "--no-color",
        *extra,
    ]
    # In the report's directory: schemathesis keeps a cache (.schemathesis/) in its working directory.
    result = subprocess.run(command, capture_output=True, text=True, timeout=400, cwd=report.parent)
    return json.loads(report.read_text()), result.stdout


@pytest.mark.timeout(900)
def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    tmp_path: Path, embedded_redis: Any, redis_db: Any, recorder: RecordingApiServer
) -> None:
    # A generous running quota, so that the stateful phase can follow its links from many submissions.
    policies = {"*": {"maxRunningExperiments": 10_000}}
    settings = api_settings(
        tmp_path, embedded_redis.url, recorder, LECRITIQUE_API_TENANT_POLICIES=json.dumps(policies)
    )
    api = ApiProcess(settings, tmp_path / "api.log").start()
    try:
        with_token, output = schemathesis(
            api.url, tmp_path / "with-token.json", "-H", f"Authorization: Bearer {ALICE}"
        )
        # Without a token every /v1 call stops at authentication: the boundary-value phase ("coverage")
        # would only repeat 401s, so it runs with a token only (it is most of the run's time).
        without_token, _ = schemathesis(
            api.url, tmp_path / "without-token.json", "--phases", "examples,fuzzing,stateful"
        )
    finally:
        api.stop()
    for report in (with_token, without_token):
        assert report["complete"] and report["errors"] == [], report["errors"]
        assert report["failures"] == [], json.dumps(report["failures"], indent=1) + output[-6000:]
        assert report["test_cases"]["with_failures"] == 0 and report["test_cases"]["generated"] > 100
        assert report["operations"]["tested"] == report["operations"]["total"] == 11
    # With a token the fuzzer reaches the API's logic: experiments are created and the links followed.
    assert with_token["valid_rates"]["POST /v1/experiments"]["coverage"]["accepted"] > 0
    links = re.search(r"API Links:\s+(\d+) covered", output)
    assert links and int(links.group(1)) > 0, output[-3000:]
    print(
        f"schemathesis: {with_token['test_cases']['generated']} cases with a token, "
        f"{without_token['test_cases']['generated']} without; {links.group(0)}"
    )
