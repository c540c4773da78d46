"""Path converters for names that come from upstream.

Upstream kernel names are arbitrary text ("dyt_beta=False", "a/b", "50%", a dot, any script), so
a name cannot be a path segment as it stands. A plain name (letters, digits, `_`, `-`, `=`, and
dots after the first character) is its own segment, which keeps every existing URL; any other
name is `~` followed by the base64url of its UTF-8. The mapping is one-to-one: a plain name never
starts with `~`, and a `~` segment that decodes to a plain name is refused, so each name has
exactly one URL.
"""

from __future__ import annotations

import base64
import binascii
import re

_PLAIN = re.compile(r"[A-Za-z0-9_=-][A-Za-z0-9_=.-]*")
_MAX_SEGMENT = 1024


def name_to_segment(name: str) -> str:
    if _PLAIN.fullmatch(name):
        return name
    return "~" + base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def segment_to_name(segment: str) -> str:
    """The name a segment stands for; ValueError (a 404 to the resolver) for anything else."""
    if len(segment) > _MAX_SEGMENT:
        raise ValueError("segment too long")
    if not segment.startswith("~"):
        if not _PLAIN.fullmatch(segment):
            raise ValueError("not a plain name")
        return segment
    body = segment[1:]
    try:
        name = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError("not an encoded name") from None
    if not name or name_to_segment(name) != segment or "\x00" in name:
        raise ValueError("not the canonical segment of a name")
    return name


class UpstreamNameConverter:
    regex = r"[^/]+"

    def to_python(self, value: str) -> str:
        return segment_to_name(value)

    def to_url(self, value: str) -> str:
        return name_to_segment(str(value))
