"""The RerunResult schema lives with the runner (kirunner/result_schema.py), so that uploaded
results of self-run jobs are checked by the same schema without importing this app."""

from __future__ import annotations

from kirunner.result_schema import SCHEMA, result_problem

__all__ = ["SCHEMA", "result_problem"]
