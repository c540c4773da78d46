"""Per-user and per-IP limits on community writes, counted in the default cache.

With REDIS_URL set the cache is Redis, so every web process shares the counters. Fixed
windows: simple, and the worst case (twice the limit across a window edge) is acceptable here.
"""

from __future__ import annotations

from functools import wraps

from allauth.account.adapter import get_adapter
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str:
    # allauth's view of the client address (honours ALLAUTH_TRUSTED_PROXY_COUNT), so login
    # throttling and these limits agree on who the client is.
    return get_adapter(request).get_client_ip(request) or "unknown"


def _bump(key: str, window: int) -> int:
    if cache.add(key, 1, window):
        return 1
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, window)
        return 1


def consume(request: HttpRequest, kind: str) -> bool:
    """Count one write of `kind`; False when over a limit.

    A signed-in user is limited per account, and the address only by the far higher limit for
    all accounts behind it, so one person cannot use up a shared address's writes for everyone
    else. A request without an account is limited per address.
    """
    limit, window = settings.COMMUNITY_RATE_LIMITS[kind]
    ip = client_ip(request)
    if request.user.is_authenticated:
        ip_limit, ip_window = settings.COMMUNITY_IP_RATE_LIMITS[kind]
        checks = [
            (f"community-rl:{kind}:user:{request.user.pk}", limit, window),
            (_address_key(kind, "ip-accounts", ip), ip_limit, ip_window),
        ]
    else:
        checks = [(_address_key(kind, "ip", ip), limit, window)]
    # Count against every bucket, so a refused write still counts where it was refused.
    counts = [(_bump(key, seconds), most) for key, most, seconds in checks]
    return all(count <= most for count, most in counts)


def _address_key(kind: str, bucket: str, ip: str) -> str:
    return f"community-rl:{kind}:{bucket}:{ip}"


def address_keys(ip: str) -> list[str]:
    """Every counter kept for one address: its writes without an account, and all its
    accounts' writes together, of every kind."""
    kinds = settings.COMMUNITY_RATE_LIMITS
    return [_address_key(kind, bucket, ip) for kind in kinds for bucket in ("ip", "ip-accounts")]


def token_failures_key(address: str) -> str:
    return f"token-failures:ip:{address}"


def token_failures_exceeded(request: HttpRequest) -> bool:
    """True when this address has failed bearer authentication API_TOKEN_FAILURES times in
    the window: it is refused before any token it sends is looked up."""
    limit, _ = settings.API_TOKEN_FAILURES
    return (cache.get(token_failures_key(client_ip(request))) or 0) >= limit


def token_failure(request: HttpRequest) -> None:
    """Count one failed bearer authentication against the address."""
    _bump(token_failures_key(client_ip(request)), settings.API_TOKEN_FAILURES[1])


def message(kind: str) -> str:
    limit, window = settings.COMMUNITY_RATE_LIMITS[kind]
    minutes = max(1, window // 60)
    return (
        f"Too many requests: at most {limit} of these per {minutes} minutes from one account "
        "or address. Please wait and try again."
    )


def ratelimited(kind: str):
    """Limit POSTs to a view; over the limit it answers 429 with a page that says why."""

    def decorator(view):
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs):
            if request.method == "POST" and not consume(request, kind):
                return render(
                    request, "attestations/429.html", {"message": message(kind)}, status=429
                )
            return view(request, *args, **kwargs)

        return wrapper

    return decorator
