from tests.critics.conftest import ascii_model  # noqa: F401  (shared session fixtures)
from tests.services.conftest import tiny_policy  # noqa: F401
