"""Redis stopped and restarted under the running site: logins and community writes go on.

The test starts a Redis of its own (so it can stop it without touching anyone else's), points
the cache at it, and asserts the outcome of each write with Redis up, down and back.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import redis
from django.core.cache import caches

from tests.factories_attestations import verify_email

pytestmark = pytest.mark.services

FORM = {"kind": "reproduction", "median": "390.5", "input_unit": "us", "gpu": ""}


def _free_port() -> int:
    # 6400-6409 first (kept free for this test on shared machines), else any free port.
    for port in [*range(6400, 6410), 0]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free port")


class OwnRedis:
    def __init__(self) -> None:
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="ki-redis-")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.ping()
                return
            except redis.RedisError:
                time.sleep(0.05)
        pytest.fail("own redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture
def own_redis(services, settings):
    server = OwnRedis()
    server.start()
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            "BACKEND": "kernelindex.cache.FallbackRedisCache",
            "LOCATION": server.url,
            "KEY_PREFIX": "fault",
        },
    }
    yield server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


def _writes(client, run, alice, tag: str) -> list[int]:
    """Sign in, add a reproduction from the form, raise a report through the API."""
    client.logout()
    login = client.post("/accounts/login/", {"login": "alice", "password": "alice-password-1"})
    attest = client.post(f"/runs/{run.public_id}/attest/", FORM)
    report = client.post(
        "/api/v1/reports/",
        {"run": run.public_id, "category": "other", "text": f"report {tag}"},
        content_type="application/json",
    )
    return [login.status_code, attest.status_code, report.status_code]


class _Clock:
    """The cache's clock, movable: the retry window is stepped over, not slept through."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


def test_logins_and_writes_survive_a_redis_outage(
    own_redis, client, alice, settings, caplog, monkeypatch
):
    from django.core.cache.backends.redis import RedisCache

    import kernelindex.cache
    from tests.factories import RunFactory

    clock = _Clock()
    monkeypatch.setattr(kernelindex.cache, "time", clock)
    # Every call that goes to Redis (rather than to the process-memory fallback) is counted.
    reached: list[str] = []
    for name in ("add", "get", "set", "touch", "delete", "get_many", "has_key", "incr",
                 "set_many", "delete_many"):  # fmt: skip
        real = getattr(RedisCache, name)

        def counting(self, *args, _real=real, _name=name, **kwargs):
            reached.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(RedisCache, name, counting)

    verify_email(alice)
    alice.set_password("alice-password-1")
    alice.save()
    run = RunFactory()
    client.raise_request_exception = False  # a 500 must show as a status, not a traceback

    assert _writes(client, run, alice, "up") == [302, 302, 201]
    keys = redis.Redis.from_url(own_redis.url).keys("fault:*community-rl*")
    assert keys, "with Redis up the write limits count in Redis"

    own_redis.stop()
    reached.clear()
    assert _writes(client, run, alice, "down") == [302, 302, 201]
    # A dead Redis is tried once; every later call within the retry window goes straight to
    # memory instead of waiting on a dead socket per request.
    assert len(reached) == 1, reached
    assert caches["default"].degraded()
    assert "cache unavailable" in caplog.text

    own_redis.start()
    clock.offset += kernelindex.cache.RETRY_AFTER  # past the window: the next call tries Redis
    reached.clear()
    assert _writes(client, run, alice, "back") == [302, 302, 201]
    assert len(reached) > 1, "with Redis back, calls reach it again"
    assert not caches["default"].degraded()


def test_a_full_redis_that_refuses_writes_takes_no_page_or_write_down(
    own_redis, client, alice, settings, caplog
):
    """A Redis at its memory limit (noeviction) answers reads and refuses every write with an
    error, not a dead socket: the page cache's puts and the rate limits' counts fall back too."""
    from tests.factories import RunFactory

    settings.PAGE_CACHE_SECONDS = 300
    verify_email(alice)
    alice.set_password("alice-password-1")
    alice.save()
    run = RunFactory()
    client.raise_request_exception = False
    redis.Redis.from_url(own_redis.url).config_set("maxmemory", 1)
    assert client.get(f"/runs/{run.public_id}/").status_code == 200
    assert "maxmemory" in caplog.text and "cache unavailable" in caplog.text
    assert _writes(client, run, alice, "full") == [302, 302, 201]
