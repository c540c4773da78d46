"""Every URL pattern and every API parameter with hostile values: no response is a 5xx.

URL patterns come from the resolver, so a page added later is covered without editing this
file. Each pattern gets each value in each of its path parameters, and then the same values in
every query parameter the site reads; anonymously and signed in.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from django.urls import URLPattern, URLResolver, get_resolver

from tests.factories import RunFactory
from tests.factories_attestations import AttestationFactory, verify_email

HOSTILE = [
    "a\x00b",
    "x" * 3000,
    "ü名\u202e",
    "a/b",
    "..",
    "%",
    "a b",
    "99999999999999999999999999",
    "-1",
    "1e309",
]
QUERY_PARAMS = [
    "run", "source", "external_id", "benchmark", "implementation", "gpu", "timed_pass",
    "metric", "dtype", "evidence", "q", "ordering", "page", "page_size", "cursor", "format",
    "next", "category",
]  # fmt: skip
_PARAM = re.compile(r"<(?:(?P<conv>[^>:]+):)?(?P<name>[^>]+)>")


def _routes(resolver: URLResolver | None = None, prefix: str = "") -> list[str]:
    """Every route in the URLconf as a template with <conv:name> placeholders."""
    out: list[str] = []
    for entry in (resolver or get_resolver()).url_patterns:
        pattern = entry.pattern
        text = getattr(pattern, "_route", None)
        if text is None:  # a regex pattern (the admin's catch-alls): its literal prefix only
            text = re.split(r"[(\[\\?*+]", str(pattern).lstrip("^"))[0]
        if isinstance(entry, URLResolver):
            out.extend(_routes(entry, prefix + text))
        elif isinstance(entry, URLPattern):
            out.append(prefix + text.rstrip("$"))
    return sorted(set(out))


def _schema_query_params() -> set[str]:
    """Every query parameter the API documents, so a filter added later is covered too."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        parameter["name"]
        for path in schema["paths"].values()
        for operation in path.values()
        for parameter in operation.get("parameters", [])
        if parameter.get("in") == "query"
    }


def _fill(route: str, value: str) -> str:
    def one(match: re.Match) -> str:
        if match["conv"] == "int":
            return "99999999999999999999" if not value.lstrip("-").isdigit() else value.lstrip("-")
        return quote(value, safe="")

    return "/" + _PARAM.sub(one, route)


def test_no_url_answers_5xx_to_hostile_input(client, db, alice):
    run = RunFactory()
    verify_email(alice)
    AttestationFactory(run=run, author=alice)
    routes = _routes()
    params = sorted(set(QUERY_PARAMS) | _schema_query_params())
    assert len(routes) > 30 and any("benchmarks" in r for r in routes)
    failures: list[str] = []
    requests = 0
    for signed_in in (False, True):
        client.logout()
        if signed_in:
            client.force_login(alice)
        for route in routes:
            for value in HOSTILE:
                # The value in every path parameter and in every query parameter at once.
                url = _fill(route, value) if "<" in route else "/" + route
                query = "&".join(f"{name}={quote(value, safe='')}" for name in params)
                for method in ("get", "post"):
                    response = getattr(client, method)(f"{url}?{query}")
                    requests += 1
                    if response.status_code >= 500:
                        failures.append(f"{method.upper()} {url[:80]} {value[:10]!r}")
    assert failures == [], failures[:20]
    assert requests > 800
