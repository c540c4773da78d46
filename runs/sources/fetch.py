"""Reading upstream bytes from a local path or an http(s) URL, with clear errors."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import http.client
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from runs.sources.parsers import IngestError

DEFAULT_TIMEOUT = 60.0
# An upstream file is a few MB at most; a bigger answer is not a result file.
MAX_BYTES = 256 * 2**20
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# Sources read through read() without knowing who called them; a scheduled sync sets its
# source's timeout here for the files it fetches.
_timeout: contextvars.ContextVar[float] = contextvars.ContextVar("timeout", default=DEFAULT_TIMEOUT)


@contextlib.contextmanager
def timeout(seconds: float):
    token = _timeout.set(seconds)
    try:
        yield
    finally:
        _timeout.reset(token)


def read(location: str) -> tuple[str, bytes]:
    """(name, bytes) of a local path or an http(s) URL; IngestError when it cannot be read
    whole (missing, HTTP error, timeout, or fewer bytes than the server announced)."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme in ("http", "https"):
        return parsed.path, _download(location, _timeout.get())
    if parsed.scheme not in ("", "file"):
        raise IngestError(location, [(0, "only local paths and http(s) URLs can be imported")])
    path = Path(parsed.path if parsed.scheme == "file" else location)
    if not path.is_file():
        raise IngestError(location, [(0, "no such file")])
    try:
        return str(path), path.read_bytes()
    except OSError as exc:
        raise IngestError(location, [(0, f"cannot read: {exc.strerror or exc}")]) from None


def _download(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (scheme checked)
            data = response.read(MAX_BYTES + 1)
            expected = response.headers.get("Content-Length")
    except urllib.error.HTTPError as exc:
        raise IngestError(url, [(0, f"HTTP {exc.code} {exc.reason}")]) from None
    except http.client.IncompleteRead as exc:
        raise IngestError(
            url, [(0, f"truncated download: {len(exc.partial)} bytes, then the connection closed")]
        ) from None
    except TimeoutError:
        raise IngestError(url, [(0, f"timed out after {timeout:g} s")]) from None
    except urllib.error.URLError as exc:
        reason = "timed out" if isinstance(exc.reason, TimeoutError) else str(exc.reason)
        raise IngestError(url, [(0, f"cannot fetch: {reason}")]) from None
    except OSError as exc:
        raise IngestError(url, [(0, f"cannot fetch: {exc}")]) from None
    if len(data) > MAX_BYTES:
        raise IngestError(url, [(0, f"larger than {MAX_BYTES} bytes")])
    if expected is not None and expected.isdigit() and int(expected) != len(data):
        raise IngestError(url, [(0, f"truncated download: {len(data)} of {expected} bytes")])
    return data


def commit_in(location: str) -> str:
    """The upstream commit a URL pins (raw.githubusercontent.com/<owner>/<repo>/<commit>/...)."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme not in ("http", "https"):
        return ""
    return next((part for part in parsed.path.split("/") if _COMMIT.match(part)), "")


def git_blob(data: bytes) -> str:
    """The git blob id of these bytes: what upstream's tree names the file by."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
