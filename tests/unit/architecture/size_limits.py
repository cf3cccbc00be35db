"""The warning the size limits raise (a module of its own: pytest-xdist re-imports a warning's class
by its module name in the controlling process, which cannot import a test module)."""


class SizeWarning(UserWarning):
    """A module or function past its soft limit: look whether it holds one concept."""
