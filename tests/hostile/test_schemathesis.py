"""schemathesis against /api/v1/schema/, anonymously and with a token: no 5xx, every response
conforms to the schema (ST108), and every request the schema calls valid is accepted (ST202):
the schema states each constraint the API enforces. Bounded in examples per operation and in
total time."""

from __future__ import annotations

import time

import hypothesis
import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck

from attestations import services
from tests.factories import RunFactory
from tests.factories_attestations import AttestationFactory, verify_email

schemathesis = pytest.importorskip("schemathesis")

EXAMPLES = 25
# ST202 strict: a schema-valid request may be refused only by an answer that is not about its
# shape: no such object (404), state (409), a rule the schema cannot state (422: attestations'
# cross-field rules), credentials (401, 403) or the rate limit (429). Never 400.
CONFIG = schemathesis.config.SchemathesisConfig.from_str(
    """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429"]
"""
)
BUDGET_SECONDS = 100


def test_api_conforms_to_its_schema(db, alice, capsys, settings):
    from django.core.wsgi import get_wsgi_application

    # Writes are exercised, not answered 429 after the tenth: the limits have their own tests.
    settings.COMMUNITY_RATE_LIMITS = {
        k: (100_000, 3600) for k in ("attestation", "report", "token")
    }
    settings.COMMUNITY_IP_RATE_LIMITS = settings.COMMUNITY_RATE_LIMITS
    settings.API_TOKEN_FAILURES = (10**9, 600)  # generated bad tokens would lock out the good

    django_app = get_wsgi_application()

    def application(environ, start_response):
        # schemathesis's WSGI transport sends no client address; without one every write
        # was refused ("Unable to determine client IP address") and never exercised.
        environ.setdefault("REMOTE_ADDR", "127.0.0.1")
        return django_app(environ, start_response)

    run = RunFactory()
    verify_email(alice)
    AttestationFactory(run=run, author=alice)
    _, raw = services.token_create(user=alice, name="schemathesis")
    figures = {"cases": 0, "5xx": 0, "ST108": 0, "ST202": 0, "statuses": {}}
    failures: list[str] = []
    started = time.monotonic()
    # schemathesis calls the WSGI app directly, not through Django's test client: keep the
    # test's connection (and its transaction) across requests as the test client does.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", application, config=CONFIG)
        for result in schema.get_all_operations():
            operation = result.ok()
            # The WSGI transport does not decode gzip, which the page cache serves to clients
            # that ask for it; identity keeps the bodies readable.
            for auth in ({}, {"Authorization": f"Bearer {raw}"}):
                headers = {"Accept-Encoding": "identity", **auth}
                _exercise(operation, headers, figures, failures, started)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    with capsys.disabled():
        print(
            f"\nschemathesis: {figures['cases']} cases, {figures['5xx']} answered 5xx, "
            f"ST108 {figures['ST108']}, ST202 {figures['ST202']}; answers by status "
            f"{dict(sorted(figures['statuses'].items()))}"
        )
    assert figures["cases"] > 100
    shown = "\n".join(sorted({f.split(": ", 1)[0] + ": " + f[-200:] for f in failures})[:40])
    assert (figures["5xx"], figures["ST108"], figures["ST202"]) == (0, 0, 0), shown
    assert failures == [], shown


def _exercise(operation, headers: dict, figures: dict, failures: list, started: float) -> None:
    @hypothesis.settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.given(case=operation.as_strategy())
    def check(case):
        if time.monotonic() - started > BUDGET_SECONDS:
            return
        figures["cases"] += 1
        response = case.call(headers=headers)
        figures["statuses"][response.status_code] = (
            figures["statuses"].get(response.status_code, 0) + 1
        )
        if response.status_code >= 500:
            figures["5xx"] += 1
            failures.append(f"5xx: {case.as_curl_command()[:300]}")
        try:
            case.validate_response(response, headers=headers, checks=_checks())
        except BaseException as exc:  # noqa: BLE001 - a failure group; collected, reported by the test
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            for code in _codes(exc) & {"ST108", "ST202"}:
                figures[code] += 1
            failures.append(f"{case.method} {case.formatted_path}: {str(exc)[:300]}")

    check()


def _codes(exc: BaseException) -> set[str]:
    """The failure codes (ST108, ST202, ...) in what a validation raised."""
    found = {getattr(exc, "code", None)}
    for inner in getattr(exc, "exceptions", ()):
        found |= _codes(inner)
    return {code for code in found if isinstance(code, str)}


def _checks() -> list:
    """No 5xx; the answer conforms to the schema (status code, content type, headers, body:
    ST108); a request the schema calls valid is accepted (ST202: the schema names each bound
    the API enforces, so an opaque cursor it did not issue is the only valid-looking text it
    refuses, and that answer is a 404 the schema lists)."""
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi import checks as oa

    return [
        not_a_server_error,
        oa.status_code_conformance,
        oa.content_type_conformance,
        oa.response_headers_conformance,
        oa.response_schema_conformance,
        oa.positive_data_acceptance,
    ]
