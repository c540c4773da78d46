"""The one place user markdown becomes HTML.

markdown-it renders with raw HTML disabled, and nh3 then cleans the result against a short
allow-list, so neither a renderer quirk nor a sanitizer gap alone lets markup through.
"""

from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})

ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "em", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p",
    "pre", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}}
URL_SCHEMES = {"http", "https", "mailto"}
LINK_REL = "nofollow noopener ugc"


def render_markdown(text: str) -> SafeString:
    html = _md.render(text or "")
    cleaned = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel=LINK_REL,
    )
    return mark_safe(cleaned)  # nh3 has sanitised it
