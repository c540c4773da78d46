from __future__ import annotations

from html.parser import HTMLParser

import pytest

from attestations.markdown import render_markdown


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict]]:
    parser = _Collector()
    parser.feed(str(html))
    return parser.tags


PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="#" onclick="alert(1)">x</a>',
    "<svg onload=alert(1)><circle/></svg>",
    '<iframe src="https://evil.example"></iframe>',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD4=)",
    "[click](vbscript:msgbox(1))",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "![x](javascript:alert(1))",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_leaves_no_active_markup(payload):
    tags = _tags(render_markdown(payload))
    names = {name for name, _ in tags}
    assert not names & {"script", "img", "svg", "iframe", "style", "math", "div", "object"}
    for _, attrs in tags:
        assert not any(key.startswith("on") for key in attrs)
        assert "style" not in attrs
        href = (attrs.get("href") or "").strip().lower()
        assert not href or href.startswith(("http:", "https:", "mailto:"))


def test_safe_links_keep_their_target_and_get_rel():
    tags = _tags(render_markdown("[docs](https://example.org/a) and [mail](mailto:a@example.org)"))
    links = [attrs for name, attrs in tags if name == "a"]
    assert [a["href"] for a in links] == ["https://example.org/a", "mailto:a@example.org"]
    assert all(a["rel"] == "nofollow noopener ugc" for a in links)


def test_ordinary_markdown_renders():
    html = str(render_markdown("**bold** and `code`\n\n- one\n- two"))
    assert "<strong>bold</strong>" in html
    assert "<code>code</code>" in html
    assert html.count("<li>") == 2


def test_raw_html_shows_as_text():
    html = str(render_markdown("<b>hi</b>"))
    assert "&lt;b&gt;hi&lt;/b&gt;" in html
    assert "<b>" not in html


def test_github_flavoured_subset_renders():
    """Tables, headings, fenced code and strikethrough as people paste them from GitHub."""
    html = str(
        render_markdown(
            "## Setup\n\n"
            "| GPU | median |\n|-----|-------:|\n| H100 | 385.5 µs |\n\n"
            "```python\nprint('x')\n```\n\n"
            "~~old~~ new\n"
        )
    )
    tags = [name for name, _ in _tags(html)]
    assert "<h4>Setup</h4>" in html  # below the page's own h1 and h2
    assert {"table", "thead", "tbody", "tr", "th", "td"} <= set(tags)
    assert "| GPU" not in html and "|---" not in html
    assert '<pre><code class="language-python">' in html
    assert "<s>old</s>" in html or "<del>old</del>" in html
    # Alignment would need a style attribute, which neither the sanitiser nor the CSP allows.
    assert "style" not in html
