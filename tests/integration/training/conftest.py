"""Fixtures of the integration tier's training tests: the unit tier's tiny random Llama."""

from tests.unit.training.conftest import tiny_llama_dir  # noqa: F401  (a shared session fixture)
