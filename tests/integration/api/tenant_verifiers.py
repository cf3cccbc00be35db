"""A python verifier an operator allows for one tenant (tests/integration/api/test_api_tenant_local_run.py)."""

from __future__ import annotations

from typing import Any


def half_credit(answer: str, reference: str, row: dict[str, Any]) -> tuple[float, str]:
    """0.5 for every answer, so that the run's rewards show this function scored them."""
    return 0.5, f"scored row {row['id']}"
