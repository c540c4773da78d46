"""Bearer tokens for the API. Its own module: DRF imports authentication classes while it loads
its settings, before the API views (and their imports) can be."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from attestations import ratelimit, services, staffmfa


class TokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer ki_…` with a token from /me/tokens/."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        # Tokens are too long to guess, but an address that keeps sending wrong ones is told to
        # stop before another is looked up (defence in depth, counted per address).
        if ratelimit.token_failures_exceeded(request):
            limit, window = settings.API_TOKEN_FAILURES
            raise exceptions.Throttled(
                wait=window,
                detail=f"Too many failed token authentications from this address ({limit} in "
                f"{window // 60} minutes). Please wait and try again.",
            )
        if len(header) != 2:
            ratelimit.token_failure(request)
            raise exceptions.AuthenticationFailed("Expected 'Authorization: Bearer <token>'.")
        user = services.token_authenticate(header[1].decode("ascii", errors="replace"))
        if user is None:
            ratelimit.token_failure(request)
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        # A bearer token is a password-strength credential: it never acts as staff.
        if user.is_staff or user.is_superuser:
            staffmfa.demote(user)
        return (user, None)

    def authenticate_header(self, request) -> str:
        return self.keyword


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Describes the bearer token in the OpenAPI schema."""

    target_class = "attestations.authentication.TokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A token created at /me/tokens/ (starts with ki_).",
        }
