from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

REPO = Path(__file__).resolve().parent.parent
# The upstream files the project ships (data/, copied byte for byte with their LICENSE).
DATA = Path(os.getenv("KERNELINDEX_DATA", REPO / "data"))
LIGER_CSV = DATA / "liger" / "all_benchmark_data.csv"
LIGER_CI = DATA / "liger-ci"
KERNELBENCH = DATA / "kernelbench"
EXAMPLE_EXTERNAL_ID = (
    "llama4_rope/forward/huggingface/nvidia-h100-80gb-hbm3/"
    "hidden8192-kv_heads8-q_heads32-seq4096-bf16/2025-08-07-21-42-12"
)


def _redis_of_this_worker() -> None:
    """Under pytest-xdist (`-n 2`) each worker is a process of its own with its own test
    database (pytest-django adds `_gw0`, `_gw1`, ... to its name), but REDIS_URL names one Redis
    database for all of them: worker gwN takes the database N + 1 after REDIS_URL's (in CI,
    REDIS_URL ends in /0, so gw0 uses /1 and gw1 /2), so one worker's cached pages, counters
    and queues are never another's. Settings are loaded before this file, so the cache, the
    broker and the environment its subprocesses inherit (gunicorn, a Celery worker) are pointed
    at it here, before any test touches them."""
    from urllib.parse import urlsplit, urlunsplit

    from django.conf import settings
    from django.core.cache import caches

    worker = os.getenv("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not settings.REDIS_URL:
        return
    url = urlsplit(settings.REDIS_URL)
    base = int(url.path.strip("/") or 0)
    own = urlunsplit(url._replace(path=f"/{(base + 1 + int(worker[2:])) % 16}"))
    settings.REDIS_URL = own
    settings.CELERY_BROKER_URL = own
    settings.CACHES = {
        alias: {**config, "LOCATION": own} if "redis" in config["BACKEND"].lower() else config
        for alias, config in settings.CACHES.items()
    }
    caches.__dict__.pop("settings", None)  # read CACHES again on first use
    os.environ["REDIS_URL"] = own


_redis_of_this_worker()


def _fast_password_hashing() -> None:
    """Django's default hasher takes a million PBKDF2 rounds by design (about 0.5 s a hash on
    this project's 2-CPU host), and every user a fixture makes and every login a test posts
    pays it: tests hash with MD5, as Django's testing docs advise. Nothing here tests the
    hasher; the servers tests start in subprocesses (gunicorn, the quick start) keep the
    production one."""
    from django.conf import settings
    from django.contrib.auth import hashers

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    hashers.get_hashers.cache_clear()
    hashers.get_hashers_by_algorithm.cache_clear()


_fast_password_hashing()

# The test modules that take longest, longest first. With pytest-xdist's `--dist loadfile
# --no-loadscope-reorder` (the README's command) files go to the workers in collection order,
# so these start first and the many short files fill in behind them, instead of a six-minute
# module starting last. A name missing here only runs in its usual place.
SLOW_FIRST = (
    "test_shipped_walk.py",  # on SQLite it loads the demo for DEMO_DATABASE_FILES (WALK)
    "test_crawl.py",  # with the demo database's build (DEMO_DATABASE_FILES)
    "test_rerun_demo_data.py",
    "test_reproduce_install.py",
    "test_every_page.py",
    "test_cli.py",
    "test_every_url.py",
    "test_accounts.py",
    "test_measured_upload.py",
    "test_run_page.py",
    "test_schemathesis.py",
    "test_phone_pages.py",
    "test_benchmark_page_coverage.py",
    "test_reproduce_job.py",
)


# The files whose tests read the demo database (`demo_db`). pytest-xdist sends them to one
# worker as one unit, so the database is built once in a run, not once per worker.
DEMO_DATABASE_FILES = ("tests/site/test_crawl.py", "tests/reruns/test_rerun_demo_data.py")

# The newcomer's walk, whose quick start loads the same demo (`manage.py demo`, on SQLite, from
# the files git tracks). In a run on SQLite (the README's test command with nothing set) it
# joins the demo database's unit and runs first in it, and the demo database is a copy of what
# its quick start loaded (quick_start_loaded), not a second load of the same data (the load
# took 296 s of a 1,017 s run on a 2-CPU host, the copy 7 s of a 793 s run: README). On
# PostgreSQL (CI) the demo database is built there and the walk, on SQLite as ever, runs
# beside it on the other worker.
WALK = "tests/site/test_shipped_walk.py"
QUICK_START_DATABASE = pytest.StashKey[Path]()


def _on_sqlite() -> bool:
    from django.conf import settings

    return settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"


# The module-scoped fixtures whose rows stay for the rest of their module once written
# (rows_for_the_module). A module's tests that ask for none of them run first, on an empty
# database, as they would alone.
MODULE_ROWS = ("_liger_bench_ingested", "_ci_ingested", "_every_source_ingested")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    files = {path: i for i, path in enumerate(dict.fromkeys(item.path for item in items))}

    def order(item):
        later = bool(set(MODULE_ROWS) & set(getattr(item, "fixturenames", ())))
        return rank.get(item.path.name, len(rank)), files[item.path], later

    items.sort(key=order)
    elsewhere = [
        item.nodeid
        for item in items
        if "demo_db" in getattr(item, "fixturenames", ())
        and item.nodeid.split("::", 1)[0] not in DEMO_DATABASE_FILES
    ]
    if elsewhere:
        raise pytest.UsageError(f"demo_db outside DEMO_DATABASE_FILES: {elsewhere}")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which a plain run may lack
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (pyproject.toml), with DEMO_DATABASE_FILES one unit of work (and
    WALK, first, on SQLite)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    together = DEMO_DATABASE_FILES + ((WALK,) if _on_sqlite() else ())

    class DemoFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "demo database" if path in together else path

    return DemoFilesTogether(config, log)


@pytest.fixture(autouse=True)
def _fresh_page_cache():
    """Test databases roll back but the cache does not: start every test on a new data
    fingerprint, so no page cached by an earlier test can be served (no flush: in CI the cache
    shares Redis with the broker)."""
    from runs.read import freshness

    freshness.reset()
    yield


@pytest.fixture(scope="session", autouse=True)
def _no_rate_counts_of_an_earlier_run():
    """Per-account limits (community writes, allauth's) are counted under the user's primary
    key, and each run's test database numbers its users from 1 again: in a Redis that outlives
    the run (CI's, whose counters live an hour) an earlier run's counts would fall on this
    run's users. Each worker starts with none in its own Redis database."""
    from django.conf import settings

    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2)
        try:
            for pattern in ("*community-rl:*", "*allauth:rl:*"):
                for key in client.scan_iter(match=pattern):
                    client.delete(key)
        except redis.RedisError:
            pass  # no Redis to clean: the tests that need it skip or fail on their own
    yield


@pytest.fixture(autouse=True)
def _no_token_failures_counted():
    """Failed bearer authentications and community writes are counted per address in the
    shared cache (not flushed: in CI it is the broker's Redis): the test client's address
    (the live server's too) starts each test with none, so one test's wrong tokens cannot
    lock out the next test's right one, nor a worker's earlier tests' writes (all accounts
    of an address: 200 an hour) refuse a later test's first."""
    from django.core.cache import cache

    from attestations.ratelimit import address_keys, token_failures_key

    cache.delete_many([token_failures_key("127.0.0.1"), *address_keys("127.0.0.1")])
    yield


@pytest.fixture(autouse=True)
def _fidelity_gate_off(request, monkeypatch):
    """Rules 1-5 of the evidence rule are tested on synthetic runs of sources whose fidelity no
    committed table measures, where the fidelity gate (rule 6) would make every timing and
    memory verdict `checked`. Tests of the gate are marked `fidelity_gate` and see the
    committed tables (tests/runs/test_fidelity_gate.py)."""
    if request.node.get_closest_marker("fidelity_gate") is None:
        from runs import evidence

        monkeypatch.setattr(evidence, "_fidelity_gate", lambda run, meas, impl, outcome: outcome)
    yield


@pytest.fixture
def alice(db):
    """The owner in owner/other/stranger tests."""
    return get_user_model().objects.create_user("alice", "alice@example.org", "alice-password-1")


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob", "bob@example.org", "bob-password-1")


@pytest.fixture
def charlie(db):
    return get_user_model().objects.create_user(
        "charlie", "charlie@example.org", "charlie-password-1"
    )


@pytest.fixture
def run(db):
    """One synthetic run with its quantiles: the page the attestation tests write on and the CSP
    test reads (tests/attestations, tests/kilib/test_csp.py)."""
    from tests.factories import RunFactory

    return RunFactory(median=385_536, p20=384_685, p80=386_240)


@contextmanager
def rows_for_the_module(request, django_db_blocker, write):
    """For a module-scoped fixture whose rows every test of its module reads (an ingest of a
    real file takes about a second, and dozens of tests each paid it): `write()` runs once, in
    a transaction that stays open while the module's tests run and is rolled back after the
    last. Each test's own transaction (pytest-django's `db`) is a savepoint inside it, so every
    test starts from those rows and nothing a test writes reaches the next; the module's
    tests that do not ask for the fixture run before it (MODULE_ROWS). A test with
    `transaction=True` (a live server, a second connection) cannot see rows no transaction
    committed: it writes them itself, and this refuses it."""
    from django.db import transaction

    if request.fixturename not in MODULE_ROWS:  # the order of the module's tests depends on it
        raise pytest.UsageError(f"{request.fixturename} is not in MODULE_ROWS")
    committing = [
        item.nodeid
        for item in request.session.items
        if item.module is request.module
        and request.fixturename in getattr(item, "fixturenames", ())
        and {"transactional_db", "live_server"} & set(item.fixturenames)
    ]
    if committing:
        raise pytest.UsageError(f"{request.fixturename} for committing tests: {committing}")
    atomic = transaction.atomic()
    with django_db_blocker.unblock():
        atomic.__enter__()
        try:
            written = write()
        except BaseException:
            atomic.__exit__(*sys.exc_info())
            raise
    try:
        yield written
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


@pytest.fixture(scope="module")
def _liger_bench_ingested(request, django_db_setup, django_db_blocker):
    from runs.sources.pipeline import ingest

    def write():
        return ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])

    with rows_for_the_module(request, django_db_blocker, write) as written:
        yield written


@pytest.fixture
def liger_bench(_liger_bench_ingested, db):
    """The real Liger benchmark CSV, ingested (once for the module: rows_for_the_module)."""
    return _liger_bench_ingested


@pytest.fixture
def example_run(liger_bench):
    from runs.models import Run

    return Run.objects.public().with_related().get(external_id=EXAMPLE_EXTERNAL_ID)


def _required(name: str) -> bool:
    return os.getenv(name) == "1"


@contextmanager
def _connected_to(database: dict):
    """The default connection on another database for a while. The one it had is kept aside,
    not closed: closing an in-memory SQLite test database would delete it."""
    from django.db import connections

    connection = connections["default"]
    kept_settings, kept = dict(connection.settings_dict), connection.connection
    connection.connection = None  # the next query connects with the new settings
    connection.settings_dict.update(database)  # in place: Django reads this very dict
    try:
        yield
    finally:
        if connection.connection is not None:
            connection.connection.close()
        connection.connection = kept
        connection.settings_dict.clear()
        connection.settings_dict.update(kept_settings)


def quick_start_loaded(request, tmp_path_factory, database: Path) -> None:
    """The walk's quick start has loaded the demo into `database` (SQLite) and serves it: keep a
    copy, taken before the walk writes anything, for `_demo_database` on this worker, where
    the demo database's readers run after the walk (a run on SQLite: WALK)."""
    readers = any("demo_db" in getattr(i, "fixturenames", ()) for i in request.session.items)
    if not (_on_sqlite() and readers):
        return
    import sqlite3

    copy = tmp_path_factory.mktemp("quick-start") / "demo.sqlite3"
    source = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    target = sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    request.config.stash[QUICK_START_DATABASE] = copy


@pytest.fixture(scope="session")
def _demo_database(request, django_db_setup, django_db_blocker, tmp_path_factory):
    """What `manage.py demo --no-serve` loads (every shipped source and every rerun batch of
    data/reruns), in a database of its own next to the test database, built once per test
    process: the crawl and the demo batches' checks read the same build. On PostgreSQL it
    starts as a copy of the migrated test database; on SQLite it is a file the command
    migrates, or the copy of what the walk's quick start loaded where the walk ran first
    (quick_start_loaded)."""
    from django.core.management import call_command
    from django.db import connection

    loaded = None
    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            connection.creation.clone_test_db(suffix="demo", verbosity=0)
            database = connection.creation.get_test_db_clone_settings("demo")
        else:
            database = {**connection.settings_dict}
            loaded = request.config.stash.get(QUICK_START_DATABASE, None)
            database["NAME"] = str(loaded or tmp_path_factory.mktemp("demo") / "demo.sqlite3")
        if loaded is None:
            with _connected_to(database):
                call_command("demo", "--no-serve", stdout=StringIO(), stderr=StringIO())
        yield database
        if connection.vendor == "postgresql":
            connection.creation.destroy_test_db(suffix="demo", verbosity=0)


@pytest.fixture
def demo_db(_demo_database, django_db_blocker):
    """The demo database (`_demo_database`) for one test, in place of `db`: what the test
    writes is rolled back at its end, so every test reads the data as the demo loads it."""
    from django.db import transaction

    with django_db_blocker.unblock(), _connected_to(_demo_database), transaction.atomic():
        yield
        transaction.set_rollback(True)


@pytest.fixture
def services(db):
    """The real PostgreSQL and Redis. Skipped on a laptop without them; a failure in CI, where
    KERNELINDEX_REQUIRE_SERVICES=1 says they must be there."""
    return require_services()


def require_services() -> str:
    """Skip (or in CI fail) unless PostgreSQL and Redis are there; for fixtures wider than a
    test, which cannot ask for `services`."""
    import redis
    from django.conf import settings
    from django.db import connection

    problems = []
    if connection.vendor != "postgresql":
        problems.append("DATABASE_URL is not PostgreSQL")
    if not settings.REDIS_URL:
        problems.append("REDIS_URL is not set")
    else:
        try:
            redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2).ping()
        except redis.RedisError as exc:
            problems.append(f"Redis does not answer: {exc}")
    if problems:
        message = "needs services: " + "; ".join(problems)
        if _required("KERNELINDEX_REQUIRE_SERVICES"):
            pytest.fail(message)
        pytest.skip(message)
    return settings.REDIS_URL
