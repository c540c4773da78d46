"""Every error page is the site's own, in its words and layout, with DEBUG on and off: no
technical page listing URL patterns, no "Resolver404", no advice that does not hold."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.pages import text_of

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.error_urls")]


@pytest.fixture(params=[True, False], ids=["debug", "production"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


def _site_page(response, status: int) -> str:
    assert response.status_code == status
    html = response.content.decode()
    assert '<header class="site-header"><a class="brand" href="/">KernelIndex</a>' in html
    assert "/static/css/site.css" in html
    assert "Content-Security-Policy" in response  # no inline styles: the policy holds
    for technical in ("URLconf", "Resolver404", "Django tried these URL patterns", "DJANGO_"):
        assert technical not in html
    return text_of(response)


def test_a_url_no_route_matches(client, debug):
    text = _site_page(client.get("/no/such/page/"), 404)
    assert "Not found There is nothing at this address." in text


def test_a_missing_run_says_which(client, debug):
    text = _site_page(client.get("/runs/deadbeef/"), 404)
    assert "No run has the id deadbeef." in text


def test_the_api_answers_json_for_a_url_no_route_matches(client, debug):
    response = client.get("/api/v1/no-such-endpoint/")
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}


def test_a_server_error_does_not_promise_that_retrying_helps(debug):
    client = Client(raise_request_exception=False)
    text = _site_page(client.get("/fails/"), 500)
    assert "Something went wrong on our side" in text
    assert "trying again" not in text and "usually works" not in text
    assert "not in anything you did" in text
    # The traceback is for whoever runs the site: under DEBUG only.
    assert ("RuntimeError: a deliberate failure" in text) is debug


def test_permission_denied_is_the_sites_page(client, debug):
    text = _site_page(client.get("/forbidden/"), 403)
    assert "Not allowed" in text and "Log in" in text


def test_a_form_without_its_csrf_token_gets_the_sites_page(debug):
    client = Client(enforce_csrf_checks=True)
    text = _site_page(client.post("/accounts/login/", {"login": "x", "password": "y"}), 403)
    assert "This form could not be accepted" in text and "Nothing was saved" in text
