"""Which key verifies a worker result on the server.

Signing and verifying are kirunner.sign's, the one implementation the runner and the server
share (key rule, algorithm, RFC 8785 bytes). The server differs only in where its keys come
from: KERNELINDEX_WORKER_KEYS ({"keyId": "secret", ...}), while a worker signs with its own
KERNELINDEX_WORKER_KEY[_ID] (kirunner.sign.key_from_env).
"""

from __future__ import annotations

from django.conf import settings

from kirunner.sign import parse_key


def server_key(key_id: str) -> bytes | None:
    secret = settings.KERNELINDEX_WORKER_KEYS.get(key_id)
    return None if secret is None else parse_key(secret)
