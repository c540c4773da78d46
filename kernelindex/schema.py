"""OpenAPI schema hooks (drf-spectacular)."""

from __future__ import annotations

# Answers any endpoint may give besides its own: bad input, no or bad credentials, not allowed,
# not found (also a stale cursor), a method the endpoint does not have, over a rate limit.
_ERRORS = {
    "400": "Invalid input: the body names each field and its problem.",
    "401": "No credentials, or an unknown or revoked token.",
    "403": "Not allowed.",
    "404": "Not found, or an invalid cursor.",
    "405": "Method not allowed.",
    "409": "The item's state does not allow this.",
    "429": "Too many requests.",
}


def add_error_responses(result, generator, request, public):
    error = {
        "type": "object",
        "description": "`detail` for most errors; field names for invalid input.",
        "additionalProperties": True,
    }
    for path in result.get("paths", {}).values():
        for method, operation in path.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for code, text in _ERRORS.items():
                responses.setdefault(
                    code,
                    {
                        "description": text,
                        "content": {"application/json": {"schema": error}},
                    },
                )
    return result
