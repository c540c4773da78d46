"""gunicorn's settings for KernelIndex, read from the working directory (`gunicorn
kernelindex.wsgi` run from the repository, as the README says).

gunicorn sets a request's scheme from X-Forwarded-Proto when the request comes from
`forwarded_allow_ips`, by default 127.0.0.1 whatever the site's own setting says, so with
TRUSTED_PROXY_COUNT=0 anything on the same host could make a plain-HTTP request look secure.
Here the one setting decides for both: no proxy configured, no address is believed; a proxy
configured, the addresses in FORWARDED_ALLOW_IPS (default the loopback, where a reverse proxy
on the same host connects from).
"""

import os


def _proxies() -> int:
    try:
        return int(os.getenv("TRUSTED_PROXY_COUNT", "0") or "0")
    except ValueError:
        return 0  # kernelindex/settings.py refuses the value with a message at import


forwarded_allow_ips = os.getenv("FORWARDED_ALLOW_IPS", "127.0.0.1,::1") if _proxies() > 0 else ""
