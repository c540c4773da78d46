"""KernelIndex settings.

One module, read from the environment. With nothing set it runs on a laptop: SQLite in the
project folder, no broker (rerun jobs wait as queued), email to the console, DEBUG on.
Production sets DEBUG=0 and SECRET_KEY, DATABASE_URL, REDIS_URL, ALLOWED_HOSTS, and the rest.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str) -> bool:
    return os.getenv(name, default).strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: str) -> int:
    return int(os.getenv(name, default))


def envlist(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.getenv(name, default).split(",") if item.strip()]


DEBUG = envbool("DEBUG", "1")
# The fallback key is only good for a laptop; production refuses to start without a real one.
SECRET_KEY = os.getenv("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise RuntimeError("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = "dev-only-insecure-key-" + "x" * 40

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS")
# The one origin every absolute link is built from (citations, the feed, emails, API links):
# never the request's Host header. Production sets it (a deploy check says so when it is
# unset); under DEBUG without it, links follow the request (kilib/origin.py).
SITE_ROOT = os.getenv("SITE_ROOT", "http://localhost:8000").rstrip("/")
SITE_ROOT_CONFIGURED = bool(os.getenv("SITE_ROOT"))
SITE_NAME = "KernelIndex"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "kernelindex",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "runs",
    "reruns",
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "attestations",
]

MIDDLEWARE = [
    "kilib.middleware.RejectNulBytesMiddleware",
    "attestations.middleware.RequestSizeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "kilib.origin.SiteOriginMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.http.ConditionalGetMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "kilib.middleware.AdminSelectionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "attestations.middleware.StaffMfaRequiredMiddleware",
    "kilib.middleware.ContentSecurityPolicyMiddleware",
    # Innermost, so the pages it puts in place of Django's technical ones get the CSP.
    "kilib.errors.ErrorPagesMiddleware",
]

ROOT_URLCONF = "kernelindex.urls"
WSGI_APPLICATION = "kernelindex.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "runs.extensions.site_slots",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.getenv("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'kernelindex.sqlite3'}",
        conn_max_age=envint("DB_CONN_MAX_AGE", "60"),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and envbool(
    "DB_PREPARED_STATEMENTS", "1"
):
    # Parameters bound by the server let psycopg prepare a query once its connection has run
    # it a few times: a page's handful of queries is then parsed and planned once per
    # connection, not on every request (planning was a sixth of a cold run page at a million
    # runs). Turn off behind a pooler that cannot keep prepared statements (PgBouncer in
    # transaction mode before 1.21).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=True,
        prepare_threshold=5,  # psycopg's own default threshold
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.getenv("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {
            # Redis, falling back to process memory (logged) while Redis is unreachable.
            "BACKEND": "kernelindex.cache.FallbackRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.getenv("CACHE_PREFIX", "ki"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(os.getenv("STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Security: production values switch on with DEBUG off; a reverse proxy terminates TLS.
# X-Forwarded-Proto is believed only when a proxy is configured (TRUSTED_PROXY_COUNT > 0):
# without one, any client could send it and pass as HTTPS.
if envint("TRUSTED_PROXY_COUNT", "0") > 0:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "0" if DEBUG else "1")
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "0" if DEBUG else "31536000")
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if os.getenv("EMAIL_HOST")
    else "django.core.mail.backends.console.EmailBackend"
)
EMAIL_HOST = os.getenv("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", "587")
EMAIL_HOST_USER = os.getenv("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.getenv("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "1")
DEFAULT_FROM_EMAIL = os.getenv("DEFAULT_FROM_EMAIL", "KernelIndex <noreply@localhost>")

REST_FRAMEWORK = {
    # Session for the browser, hashed bearer tokens for scripts.
    # Token first, so an unauthenticated call is answered 401 with WWW-Authenticate: Bearer.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "attestations.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # JSON read within bounds (depth, finite numbers, no NUL: kilib/jsonbounds.py).
    "DEFAULT_PARSER_CLASSES": [
        "kilib.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "KernelIndex API",
    "DESCRIPTION": "GPU-kernel benchmark results with provenance.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Every operation documents the error answers it can give (schemathesis checks this).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "kilib.schema.add_error_responses",
    ],
    # The choices are listed as an enum already; the generated markdown bullet list repeats
    # them in a form the docs page would print raw.
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    # Two serializers have a field named "kind" (an attestation's, a detected change's): name
    # one enum so neither gets a hash suffix.
    "ENUM_NAME_OVERRIDES": {"AttestationKindEnum": "attestations.models.Kind"},
}

# Public pages: anonymous GETs of public pages are cached for PAGE_CACHE_SECONDS (0 turns the page
# cache off), keyed by the versions each page reads (runs/read/freshness.py).
PAGE_CACHE_SECONDS = envint("PAGE_CACHE_SECONDS", "300")

# A streamed export part stops after this many seconds and ends with a trailer naming the next
# part (runs.read.exports): keep it well below the server's worker timeout (gunicorn's --timeout,
# 30 s by default), or the worker is killed mid-stream and the client gets a cut-short file.
EXPORT_STREAM_SECONDS = float(os.getenv("EXPORT_STREAM_SECONDS", "20"))

# Celery. With no REDIS_URL there is no broker: jobs wait as queued and are never run in the
# web process (so no CELERY_TASK_ALWAYS_EAGER here).
CELERY_BROKER_URL = REDIS_URL or None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# Accounts (django-allauth), second factor, rate limits, Content-Security-Policy.
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "/"
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
# Confirming the address (in the browser that signed up) signs the person in: the link is
# the proof the password alone was waiting for.
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_UNIQUE_EMAIL = True
# Answers never reveal whether an address has an account (sign-up and password reset).
ACCOUNT_PREVENT_ENUMERATION = True
# ... and take the same time: both sign-up paths hash the password (attestations/forms.py).
ACCOUNT_FORMS = {"signup": "attestations.forms.SignupForm"}
ACCOUNT_ADAPTER = "attestations.accounts.AccountAdapter"
ACCOUNT_LOGOUT_ON_GET = False
# Land on an uncached page: the "signed out" message must not end up in a page cached for
# every anonymous reader.
ACCOUNT_LOGOUT_REDIRECT_URL = "/accounts/login/"
ACCOUNT_EMAIL_SUBJECT_PREFIX = "[KernelIndex] "
ACCOUNT_DEFAULT_HTTP_PROTOCOL = "http" if DEBUG else "https"
# allauth counts attempts in the default cache, so with REDIS_URL every web process shares them.
ACCOUNT_RATE_LIMITS = {
    "login": "30/m/ip",
    "login_failed": "10/m/ip,5/5m/key",
    "reset_password": "20/m/ip,5/m/key",
    "signup": "20/m/ip",
}
# Proxies in front of the app that append to X-Forwarded-For; 0 trusts only REMOTE_ADDR.
ALLAUTH_TRUSTED_PROXY_COUNT = envint("TRUSTED_PROXY_COUNT", "0")
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_TOTP_ISSUER = "KernelIndex"
# Writes by contributors: (count, seconds) per signed-in account, or per client IP for a request
# without one, for each kind of write.
COMMUNITY_RATE_LIMITS = {
    "attestation": (10, 3600),
    "report": (10, 3600),
    "token": (5, 3600),
}
# All accounts behind one address together (an office, a university NAT): far above one
# person's use, a bound on abuse by many accounts from one place.
COMMUNITY_IP_RATE_LIMITS = {
    "attestation": (200, 3600),
    "report": (200, 3600),
    "token": (100, 3600),
}
# Failed bearer-token authentications per address (count, window in seconds): past it the
# address is answered 429 before any token it sends is looked up.
API_TOKEN_FAILURES = (20, 600)
COMMUNITY_MAX_BODY_CHARS = 20_000
# A runner's result file (attestations/measured.py): a real one is tens of kB (every sample
# included); anything past this is refused before it is read.
COMMUNITY_RESULT_FILE_MAX_BYTES = 2 * 2**20
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'"
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.getenv("LOG_LEVEL", "INFO")},
}


# Controlled reruns.
# Celery settings above stay; this block adds safe delivery. The job row is the truth, the
# message only carries its pk: acknowledged late, requeued when a worker dies, one message
# prefetched, and the hard time limit below the broker's visibility timeout so that Redis
# never hands a still-running job to a second worker.
RERUN_HARD_TIME_LIMIT = envint("KERNELINDEX_RERUN_HARD_LIMIT", "3600")  # seconds
RERUN_SOFT_TIME_LIMIT = RERUN_HARD_TIME_LIMIT - max(30, RERUN_HARD_TIME_LIMIT // 10)
# A running job beats this often; one silent for RERUN_HEARTBEAT_TIMEOUT lost its worker and the
# sweeper (every minute) requeues it: a whole worker SIGKILLed costs minutes, not the broker's
# visibility timeout.
RERUN_HEARTBEAT_EVERY = envint("KERNELINDEX_RERUN_HEARTBEAT_EVERY", "30")  # seconds
RERUN_HEARTBEAT_TIMEOUT = envint("KERNELINDEX_RERUN_HEARTBEAT_TIMEOUT", "180")  # seconds
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": RERUN_HARD_TIME_LIMIT + 1800}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_RESULT_SERIALIZER = "json"
CELERY_EVENT_SERIALIZER = "json"
CELERY_TASK_IGNORE_RESULT = True  # the job row holds the outcome
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "rerun-sweep": {
        "task": "reruns.tasks.rerun_sweep",
        "schedule": float(envint("KERNELINDEX_RERUN_SWEEP_EVERY", "60")),
    }
}


def sync_schedule(config: dict) -> dict:
    """Beat entries of the scheduled upstream syncs: one per source with a location."""
    return {
        f"source-sync-{slug}": {
            "task": "runs.tasks.source_sync",
            "schedule": float(conf.get("every", 6 * 3600)),
            "args": [slug],
        }
        for slug, conf in config.items()
        if conf.get("locations")
    }


# Scheduled upstream sync, per source (none by default), e.g.
# {"kernelbench": {"locations": ["https://raw.githubusercontent.com/.../<commit>/...json"],
#  "every": 21600, "timeout": 60}}: fetched by runs.tasks.source_sync, recorded in the ledger.
SOURCE_SYNC = json.loads(os.getenv("KERNELINDEX_SOURCE_SYNC", "{}") or "{}")
# A sync holds its source's lock at most this long (a crashed worker's lock then expires).
SOURCE_SYNC_LOCK_SECONDS = envint("KERNELINDEX_SOURCE_SYNC_LOCK", "3600")
CELERY_BEAT_SCHEDULE.update(sync_schedule(SOURCE_SYNC))
RERUN_QUEUE_PREFIX = os.getenv("KERNELINDEX_QUEUE_PREFIX", "")
RERUN_MAX_ATTEMPTS = envint("KERNELINDEX_RERUN_MAX_ATTEMPTS", "3")
RERUN_RETRY_BACKOFF = envint("KERNELINDEX_RERUN_RETRY_BACKOFF", "60")  # seconds, doubled each try
# A queued job sent this long ago and still unclaimed is re-sent by the sweeper.
RERUN_REDISPATCH_AFTER = envint("KERNELINDEX_RERUN_REDISPATCH_AFTER", "900")
# A result must finish after its job was issued and within this many seconds of it.
RERUN_RESULT_MAX_AGE = envint("KERNELINDEX_RERUN_RESULT_MAX_AGE", str(14 * 86400))
RERUN_CLOCK_SKEW = envint("KERNELINDEX_RERUN_CLOCK_SKEW", "300")
# Verification keys, {"keyId": "secret"}; a secret of 32+ hex digits is read as hex.
KERNELINDEX_WORKER_KEYS = json.loads(os.getenv("KERNELINDEX_WORKER_KEYS", "{}") or "{}")
# What a worker runs for a job: this + [JOB.json, "--out", RESULT.json].
KERNELINDEX_RUNNER_COMMAND = shlex.split(
    os.getenv("KERNELINDEX_RUNNER_COMMAND", f"{sys.executable} -m kirunner")
)
