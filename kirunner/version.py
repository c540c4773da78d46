"""The runner's version, recorded in every result; kept equal to pyproject.toml's (its own module,
so that runner.py reads it without importing the package that imports runner.py)."""

__version__ = "0.1.0"
