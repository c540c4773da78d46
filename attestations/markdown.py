"""The one place user markdown becomes HTML.

markdown-it renders with raw HTML disabled, and nh3 then cleans the result against a short
allow-list, so neither a renderer quirk nor a sanitizer gap alone lets markup through.
"""

from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

# The GitHub-flavoured subset people paste from issues and READMEs: tables and strikethrough
# on top of CommonMark (which already has headings and fenced code).
_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)
# A user's "# Title" sits inside a page that has its own h1 and h2: headings move down two
# levels (h1 -> h3, ..., h4 and deeper -> h6), so they stay headings and below the page's.
_HEADING_SHIFT = 2


def _heading(renderer, tokens, idx, options, env):
    token = tokens[idx]
    level = min(int(token.tag[1]) + _HEADING_SHIFT, 6)
    token.tag = f"h{level}"
    return renderer.renderToken(tokens, idx, options, env)


_md.add_render_rule("heading_open", _heading)
_md.add_render_rule("heading_close", _heading)

ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p",
    "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
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
