from __future__ import annotations

from django.conf import settings


def test_html_pages_carry_the_policy(client, run):
    for url in ("/accounts/login/", f"/runs/{run.public_id}/", "/users/nobody/"):
        response = client.get(url)
        assert response["Content-Security-Policy"] == settings.CONTENT_SECURITY_POLICY, url
    policy = settings.CONTENT_SECURITY_POLICY
    for directive in (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "frame-ancestors 'none'",
        "form-action 'self'",
        "base-uri 'self'",
        "object-src 'none'",
    ):
        assert directive in policy


def test_json_is_left_alone(client, run):
    response = client.get(f"/runs/{run.public_id}.json")
    assert response.status_code == 200
    assert "Content-Security-Policy" not in response
