"""The shape of a RerunResult, checked before anything else reads it.

A result arrives from a GPU host or a file: until it has this shape, no code may index into
it, compare its signature or do arithmetic on its numbers (a non-ASCII signature made
`hmac.compare_digest` raise, a string median made the rule raise, a boolean median passed for
a number). Rejections say which field is wrong. Only what the server reads is constrained;
the runner may add fields (diagnostics grow), and results of older runners still validate.

Two envelopes share one payload schema:
- SCHEMA, a controlled result: signed with a worker key, echoing the job's nonce;
- SELF_RUN_SCHEMA, the result of a self-run job (someone's own GPU): no nonce, no signature,
  `job.selfRun` true. Neither validates as the other, so a self-run result can never be
  recorded as a controlled one, even if someone signs it.

Here, in the runner, rather than in the server, so that the server's rerun import and its
upload of measured reproductions check the same schema without importing each other.
"""

from __future__ import annotations

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from .canonical import API_VERSION

NUMBER = {"type": "number"}  # JSON Schema's number excludes booleans
TEXT = {"type": "string", "maxLength": 200}
STATUSES = ["ok", "incorrect", "unavailable", "invalid", "error", "dev-interpreter"]
TIMING = {
    "type": "object",
    "properties": {"median": NUMBER, "p20": NUMBER, "p80": NUMBER, "method": TEXT},
}
RANGE = {"type": ["object", "null"], "properties": {"min": NUMBER, "median": NUMBER, "max": NUMBER}}
# kirunner/power.py: one timed window's clocks, power and throttle reasons (results of runners
# before it have no `power`, and still validate).
POWER_WINDOW = {
    "type": "object",
    "properties": {
        "source": TEXT,
        "n": {"type": "integer", "minimum": 0},
        "smMHz": RANGE,
        "powerW": RANGE,
        "powerCapped": {"type": "boolean"},
        "reasonShares": {
            "type": "object",
            "additionalProperties": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "samples": {"type": "array", "maxItems": 1000},
    },
}

CONTROLLED_JOB = {
    "type": "object",
    "required": ["id", "nonce"],
    "properties": {
        "id": {"type": "string", "maxLength": 64},
        "nonce": {"type": "string", "maxLength": 128},
        "selfRun": {"const": False},
    },
}
SELF_RUN_JOB = {
    "type": "object",
    "required": ["id", "nonce", "selfRun"],
    "properties": {
        "id": {"type": "string", "maxLength": 64},
        "nonce": {"const": None},
        "selfRun": {"const": True},
    },
}


ENVIRONMENT = {
    "type": "object",
    "properties": {
        "gpuName": {"type": ["string", "null"], "maxLength": 200},
        "allocatedAtStartBytes": {"type": "integer", "minimum": 0},
    },
}
# What the evidence rule reads of a measurement (runs/evidence.py); the rest is kept as sent.
MEASUREMENT = {
    "type": ["object", "null"],
    "properties": {
        "median": NUMBER,
        "p20": NUMBER,
        "p80": NUMBER,
        "unit": {"enum": ["ms", "us", "ns", "MiB", "B"]},
        "details": {
            "type": "object",
            "properties": {
                "baselineBytes": {"type": "integer", "minimum": 0},
                "moduleBytes": {"type": "integer", "minimum": 0},
                "requestedPeakBytes": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0},
                    "maxItems": 1000,
                },
            },
        },
        "power": {
            "type": "object",
            "properties": {"doBench": POWER_WINDOW, "deviceTime": POWER_WINDOW},
        },
        "diagnostics": {
            "type": "object",
            "properties": {
                "hostEnqueue": TIMING,
                "flush": TIMING,
                "device": TIMING,
                "clocks": {"type": ["object", "null"]},
            },
        },
    },
}
# A result that says it measured must carry the measurement the rule compares.
MEASURED_CARRIES = {
    "if": {"properties": {"status": {"enum": ["ok", "incorrect"]}}},
    "then": {
        "required": ["correctness", "measurement"],
        "properties": {
            "correctness": {"type": "object", "required": ["passed"]},
            "measurement": {"type": "object", "required": ["median", "unit"]},
        },
    },
}


def _payload(job: dict) -> dict:
    """The payload's schema, around the job block of a controlled job or of a self-run."""
    return {
        "type": "object",
        "required": ["job", "run", "status", "device", "finishedAt"],
        "properties": {
            "job": job,
            "run": {"type": "object", "properties": {"publicId": {"type": ["string", "null"]}}},
            "benchmark": {"type": ["string", "null"], "maxLength": 200},
            "pass": {"type": ["string", "null"], "maxLength": 40},
            "metric": {"type": ["string", "null"], "maxLength": 40},
            "provider": {"type": ["string", "null"], "maxLength": 200},
            "status": {"enum": STATUSES},
            "device": {"enum": ["cuda", "cpu", None]},
            "error": {"type": ["string", "null"]},
            "startedAt": {"type": ["string", "null"], "maxLength": 40},
            "finishedAt": {"type": "string", "maxLength": 40},
            "environment": ENVIRONMENT,
            "implementation": {"type": ["object", "null"]},
            "correctness": {
                "type": ["object", "null"],
                "properties": {"passed": {"type": "boolean"}},
            },
            "measurement": MEASUREMENT,
        },
        **MEASURED_CARRIES,
    }


SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "payload", "signature"],
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": "RerunResult"},
        "signature": {
            "type": "object",
            "required": ["alg", "keyId", "value"],
            "properties": {
                "alg": {"const": "HMAC-SHA256"},
                "keyId": {"type": "string", "pattern": "^[\\x21-\\x7e]{1,100}$"},
                "value": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"},
            },
        },
        "payload": _payload(CONTROLLED_JOB),
    },
}

SELF_RUN_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "payload"],
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": "RerunResult"},
        # Nothing a self-run carries is a worker's signature; one there is a forgery.
        "signature": {"const": None},
        "payload": _payload(SELF_RUN_JOB),
    },
}

_validator = Draft202012Validator(SCHEMA)
_self_run_validator = Draft202012Validator(SELF_RUN_SCHEMA)


def result_problem(envelope: object) -> str | None:
    """Why `envelope` is not a controlled RerunResult the server can read, or None."""
    return _problem(_validator, envelope)


def self_run_problem(envelope: object) -> str | None:
    """Why `envelope` is not the result of a self-run job, or None."""
    return _problem(_self_run_validator, envelope)


def _problem(validator: Draft202012Validator, envelope: object) -> str | None:
    error = best_match(validator.iter_errors(envelope))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the document"
    message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
    return f"{where}: {message}"
