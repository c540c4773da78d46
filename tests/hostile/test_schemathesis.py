"""schemathesis against /api/v1/schema/, anonymously and with a token: no 5xx, and every
response conforms to the schema. Bounded in examples per operation and in total time."""

from __future__ import annotations

import time

import hypothesis
import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck

from attestations import services
from tests.factories import RunFactory
from tests.factories_community import AttestationFactory, verify_email

schemathesis = pytest.importorskip("schemathesis")

EXAMPLES = 25
BUDGET_SECONDS = 100


def test_api_conforms_to_its_schema(db, alice, capsys):
    from django.core.wsgi import get_wsgi_application

    application = get_wsgi_application()

    run = RunFactory()
    verify_email(alice)
    AttestationFactory(run=run, author=alice)
    _, raw = services.token_create(user=alice, name="schemathesis")
    figures = {"cases": 0, "5xx": 0}
    failures: list[str] = []
    started = time.monotonic()
    # schemathesis calls the WSGI app directly, not through Django's test client: keep the
    # test's connection (and its transaction) across requests as the test client does.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", application)
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
        print(f"\nschemathesis: {figures['cases']} cases, {figures['5xx']} answered 5xx")
    assert figures["cases"] > 100
    assert figures["5xx"] == 0
    assert failures == [], "\n".join(sorted(set(failures))[:15])


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
        if response.status_code >= 500:
            figures["5xx"] += 1
            failures.append(f"5xx: {case.as_curl_command()[:300]}")
        try:
            case.validate_response(response, headers=headers, checks=_checks())
        except BaseException as exc:  # noqa: BLE001 - a failure group; collected, reported by the test
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            failures.append(f"{case.method} {case.formatted_path}: {str(exc)[:300]}")

    check()


def _checks() -> list:
    """No 5xx, and the answer conforms to the schema: status code, content type, headers, body.
    Not schemathesis's acceptance checks: an opaque cursor or a filter value that matches no
    choice is schema-valid text and rightly answered 400 or 404."""
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi import checks as oa

    return [
        not_a_server_error,
        oa.status_code_conformance,
        oa.content_type_conformance,
        oa.response_headers_conformance,
        oa.response_schema_conformance,
    ]
