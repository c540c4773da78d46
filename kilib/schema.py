"""OpenAPI schema hooks (drf-spectacular): the schema states every bound the API enforces, so
a request it calls valid is accepted and every answer conforms (schemathesis checks both)."""

from __future__ import annotations

import copy

# Answers any endpoint may give besides its own: bad input, no or bad credentials, not allowed,
# not found (also a stale cursor), a method the endpoint does not have, a rule beyond the
# schema, over a rate limit.
# Written once under components/responses and referred to from each operation, so the docs page
# lists them once.
ERRORS = {
    "400": ("BadRequest", "Invalid input: the body names each field and its problem."),
    "401": ("Unauthorized", "No credentials, or an unknown or revoked token."),
    "403": ("Forbidden", "Not allowed."),
    "404": ("NotFound", "Not found, or an invalid cursor."),
    "405": ("MethodNotAllowed", "Method not allowed."),
    "409": ("Conflict", "The item's state does not allow this."),
    "422": (
        "Unprocessable",
        "Input the schema allows that breaks a rule it cannot state (a reproduction without a "
        "median, p20 above the median, a unit of the other metric): the body names each field.",
    ),
    "429": ("TooManyRequests", "Too many requests."),
}
ERROR_BODY = {
    "type": "object",
    "description": "`detail` for most errors; field names for invalid input.",
    "additionalProperties": True,
}
# RejectNulBytesMiddleware and the JSON parser refuse a NUL anywhere: a text parameter or
# field that may hold one is not valid input, and the schema says so.
NO_NUL = "^[^\\x00]*$"
EXPORTS = {
    "/api/v1/runs/export.csv": ("text/csv", "CSV", "a `# end rows=N sha256=…` line"),
    "/api/v1/runs/export.jsonl": (
        "application/jsonl",
        "JSON Lines",
        'an `{"export": "end", …}` line',
    ),
}


def add_error_responses(result, generator, request, public):
    components = result.setdefault("components", {})
    shared = components.setdefault("responses", {})
    for name, text in ERRORS.values():
        shared[name] = {
            "description": text,
            "content": {"application/json": {"schema": ERROR_BODY}},
        }
    _add_exports(result)
    for path in result.get("paths", {}).values():
        for method, operation in path.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for code, (name, _) in ERRORS.items():
                responses.setdefault(code, {"$ref": f"#/components/responses/{name}"})
            for parameter in operation.get("parameters", []):
                _no_nul(parameter.get("schema", {}))
            _form_bodies(operation, components.get("schemas", {}))
    for schema in components.get("schemas", {}).values():
        for prop in schema.get("properties", {}).values():
            _no_nul(prop)
            for option in prop.get("oneOf", []):
                _no_nul(option)
    return result


def _form_bodies(operation: dict, schemas: dict) -> None:
    """Request bodies take no field they do not name; form and multipart bodies cannot carry
    null: their schema is the JSON body's without `nullable` (a field left out means none)."""
    for media, content in operation.get("requestBody", {}).get("content", {}).items():
        ref = content.get("schema", {}).get("$ref", "")
        if not ref:
            continue
        name = ref.rsplit("/", 1)[-1]
        if name in schemas:  # the serializers refuse unknown fields (RejectUnknownFields)
            schemas[name]["additionalProperties"] = False
        if media == "application/json":
            continue
        if name.endswith("Form") or name not in schemas:
            continue
        form = copy.deepcopy(schemas[name])
        for prop in form.get("properties", {}).values():
            prop.pop("nullable", None)
        schemas[f"{name}Form"] = form
        content["schema"] = {"$ref": f"#/components/schemas/{name}Form"}


def _no_nul(schema: dict) -> None:
    """A free text schema gets the no-NUL pattern; enums, formats and patterns already bound
    it more tightly."""
    if schema.get("type") == "string" and not {"enum", "pattern", "format"} & set(schema):
        schema["pattern"] = NO_NUL


def _add_exports(result: dict) -> None:
    """The CSV and JSONL exports are plain Django views (they stream); describe them here,
    with the run list's filters (not its cursor) and `after`."""
    paths = result.get("paths", {})
    runs = paths.get("/api/v1/runs/", {}).get("get")
    if runs is None:
        return
    filters = [
        copy.deepcopy(p)
        for p in runs.get("parameters", [])
        if p["name"] not in ("cursor", "page_size")
    ]
    after = {
        "in": "query",
        "name": "after",
        "schema": {"type": "integer", "minimum": 0, "maximum": 10**18 - 1},  # 18 digits
        "description": "Resume after this run id: the `next` of a partial trailer names it.",
    }
    for path, (media, name, trailer) in EXPORTS.items():
        paths[path] = {
            "get": {
                "operationId": f"runs_export_{path.rsplit('.', 1)[-1]}",
                "summary": f"Export runs as {name}",
                "description": (
                    f"Every run matching the filters, streamed as {name}, in the order runs "
                    f"were stored; the file ends with {trailer} giving the row count and the "
                    "SHA-256 of every byte before it, or a partial trailer naming the next "
                    'part\'s URL (docs/read-side.md, "Exports"). CSV text cells that start '
                    "with = + - @, a tab or a CR get a leading ' (OWASP's rule against "
                    "formula injection); JSONL values are exact."
                ),
                "tags": runs.get("tags", ["api"]),
                "parameters": [*filters, after],
                "security": runs.get("security", [{}]),
                "responses": {
                    "200": {
                        "description": f"The {name} file, with its trailer.",
                        "content": {media: {"schema": {"type": "string"}}},
                    }
                },
            }
        }
