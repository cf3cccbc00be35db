"""The lecritique REST API: submit, list, inspect and cancel experiments (FastAPI)."""
