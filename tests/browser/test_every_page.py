"""Every kind of page in headless Chromium, at a desktop (1280 px) and a phone (390 px) width.

A page fails when the document is wider than the viewport, a plotted point lies outside its
axes, text that looks like template syntax is visible, the console shows an error (a CSP
violation is one), or a same-site link on it answers 4xx/5xx. Screenshots of every page at
both widths go to test-artifacts/screenshots/ for a reviewer.

The data is small and real: the Liger benchmark CSV, one CI run, two signed H200 rerun results
(a controlled run, a run checked by it, a reproduced one), a run checked by the CPU test
double, a contributor with an approved and a pending item, and a maintainer with TOTP.
"""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from django.core.management import call_command
from django.test import Client

from attestations.models import Attestation
from runs.models import Run
from tests.browser.conftest import ARTIFACTS
from tests.conftest import LIGER_CI, LIGER_CSV
from tests.factories_attestations import AttestationFactory, login_staff, make_staff, verify_email

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = ARTIFACTS / "screenshots"
RERUN_FIXTURE = Path(__file__).resolve().parents[1] / "data" / "reruns" / "h200-2026-11-29"
WIDTHS = (1280, 390)
LINK_BUDGET = 400  # same-site links checked in one test, at most
TEMPLATE_SYNTAX = re.compile(r"\{#|#\}|\{%|%\}|\{\{|\}\}")
# Links that change state or leave the site's pages; never followed.
SKIP_LINKS = re.compile(r"^/(accounts/logout|admin/logout)|/cite\.|/export\.|\.atom$")

# Runs in the browser: every plotted point's centre inside its plot area (or its SVG).
POINTS_OUTSIDE = """() => {
  const bad = [];
  for (const svg of document.querySelectorAll('svg.chart')) {
    const area = (svg.querySelector('.plot-area') || svg).getBoundingClientRect();
    for (const p of svg.querySelectorAll('.point')) {
      const r = p.getBoundingClientRect();
      const x = r.left + r.width / 2, y = r.top + r.height / 2;
      if (x < area.left - 0.5 || x > area.right + 0.5 || y < area.top - 0.5 || y > area.bottom + 0.5)
        bad.push((svg.querySelector('title') || {}).textContent + ' @ ' + x.toFixed(0) + ',' + y.toFixed(0));
    }
  }
  return bad;
}"""

# The innermost elements that reach past the viewport's right edge outside any scrolling box,
# or whose own content is wider than they are without scrolling: what to fix.
WIDE_ELEMENTS = """() => {
  const w = window.innerWidth, out = [];
  const scrolls = e => { for (let a = e.parentElement; a && a !== document.body; a = a.parentElement)
    if (getComputedStyle(a).overflowX !== 'visible') return true; return false; };
  const name = e => e.tagName.toLowerCase() + (typeof e.className === 'string' && e.className.trim()
    ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
  for (const e of document.querySelectorAll('body *')) {
    if (scrolls(e)) continue;
    const r = e.getBoundingClientRect();
    if (r.right > w + 1 && ![...e.children].some(c => c.getBoundingClientRect().right > w + 1))
      out.push(name(e) + '(' + Math.round(r.right) + ')');
    else if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible'
             && e.clientWidth > 0 && e.scrollWidth > w)
      out.push(name(e) + ' content ' + e.scrollWidth);
  }
  return out.slice(0, 5).join(', ');
}"""


@pytest.fixture
def site(transactional_db, settings):
    from reruns.services import result_record
    from runs.sources.pipeline import ingest
    from tests.factories_reruns import TEST_KEYS, double_result, job_for, sign

    settings.KERNELINDEX_WORKER_KEYS = TEST_KEYS
    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])
    ingest(source_slug="liger-kernel-ci", locations=[str(LIGER_CI / "02bac05")])
    call_command("rerun", "load-demo", str(RERUN_FIXTURE), stdout=StringIO(), stderr=StringIO())
    runs = Run.objects.public()
    example = runs.get(public_id="8827e3bb")  # checked by the H200 rerun
    controlled = runs.get(source__slug="kernelindex", benchmark__slug="llama4_rope")
    leader = runs.get(group=example.group, rank=1)
    plain = runs.filter(source__slug="liger-kernel-ci", benchmark__slug="rms_norm").first()
    # A run checked by the CPU test double: a rerun result recorded, no controlled run.
    host_checked = runs.filter(benchmark__slug="swiglu", rank=1).first()
    result_record(envelope=sign(double_result(job_for(host_checked))))

    alice = verify_email_user("alice")
    AttestationFactory(run=example, author=alice, state="approved", body=GFM_NOTE, kind="note")
    AttestationFactory(run=example, author=alice, state="pending")
    staff = make_staff("maintainer")
    return {
        "example": example,
        "controlled": controlled,
        "leader": leader,
        "plain": plain,
        "host_checked": host_checked,
        "alice": alice,
        "staff": staff,
    }


GFM_NOTE = (
    "## Setup\n\n| GPU | median |\n|---|---:|\n| H100 | 385.5 µs |\n\n```\npython bench.py\n```\n"
)


def verify_email_user(name: str):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(name, f"{name}@example.org", f"{name}-password-1")
    verify_email(user)
    return user


def _logged_in(browser, live_server, user, width: int):
    client = Client()
    # Staff powers need a session that passed the second factor (force_login alone does not).
    if user.is_staff:
        login_staff(client, user)
    else:
        client.force_login(user)
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return context


def _page_problems(page, url: str, expect_status: int) -> list[str]:
    problems = []
    response = page.goto(url)
    page.wait_for_load_state("load")
    if response is None or response.status != expect_status:
        problems.append(f"answered {response and response.status}, expected {expect_status}")
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    if width[0] > width[1]:
        culprits = page.evaluate(WIDE_ELEMENTS)
        problems.append(
            f"document is {width[0]} px wide in a {width[1]} px viewport; widest: {culprits}"
        )
    for point in page.evaluate(POINTS_OUTSIDE):
        problems.append(f"point outside its axes: {point}")
    text = page.evaluate("() => document.body ? document.body.innerText : ''")
    for match in TEMPLATE_SYNTAX.finditer(text):
        snippet = text[max(0, match.start() - 30) : match.end() + 30].replace("\n", " ")
        problems.append(f"template syntax visible: …{snippet}…")
        break
    return problems


def _links(page, base: str) -> list[str]:
    hrefs = page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
    out = []
    for href in hrefs:
        absolute = urljoin(base, href).split("#")[0]
        parts = urlsplit(absolute)
        if parts.netloc != urlsplit(base).netloc or SKIP_LINKS.search(parts.path):
            continue
        out.append(absolute)
    return out


def _visit_all(browser, live_server, pages, *, user=None, name: str) -> list[str]:
    """Visit every (label, path, status) at both widths; returns the problems found."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    checked: set[str] = set()
    for width in WIDTHS:
        if user is not None:
            context = _logged_in(browser, live_server, user, width)
        else:
            context = browser.new_context(viewport={"width": width, "height": 900})
        context.add_init_script(
            "document.addEventListener('securitypolicyviolation', e => console.error("
            "'CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
        )
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m, errors=errors: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        for label, path, status in pages:
            errors.clear()
            found = _page_problems(page, live_server.url + path, status)
            # A 404 page's own status shows in the console as a failed resource load.
            found += [f"console: {e}" for e in errors if not (status >= 400 and str(status) in e)]
            page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}-{width}.png"), full_page=True)
            problems += [f"{label} ({path}) at {width} px: {p}" for p in found]
            if width == WIDTHS[0]:
                for link in _links(page, live_server.url):
                    if link in checked or len(checked) >= LINK_BUDGET:
                        continue
                    checked.add(link)
                    answer = context.request.get(link, max_redirects=5)
                    if answer.status >= 400:
                        problems.append(f"{label}: link {link} answers {answer.status}")
        context.close()
    return problems


def test_every_public_page_at_desktop_and_phone_width(chromium_browser, live_server, site):
    example, controlled = site["example"], site["controlled"]
    pages = [
        ("home", "/", 200),
        ("run-plain", site["plain"].get_absolute_url(), 200),
        ("run-checked-by-h200", example.get_absolute_url(), 200),
        ("run-controlled", controlled.get_absolute_url(), 200),
        ("run-host-checked", site["host_checked"].get_absolute_url(), 200),
        ("manifest", f"/runs/{example.public_id}.json", 200),
        ("benchmark", "/benchmarks/llama4_rope/", 200),
        ("benchmark-backward-speedup",
         "/benchmarks/llama4_rope/?gpu=nvidia-h100-80gb-hbm3&pass=backward&plot=speedup", 200),
        ("benchmark-controlled-h200", "/benchmarks/llama4_rope/?source=kernelindex", 200),
        ("group", f"/groups/{example.group.key.removeprefix('sha256:')[:16]}/", 200),
        ("compare", f"/runs/{example.public_id}/compare/{site['leader'].public_id}/", 200),
        ("browse", "/runs/?benchmark=llama4_rope&timed_pass=forward&gpu=nvidia-h100-80gb-hbm3", 200),
        ("gpu", "/gpus/nvidia-h100-80gb-hbm3/", 200),
        ("source", "/sources/liger-kernel-ci/", 200),
        ("profile", "/users/alice/", 200),
        ("api-root", "/api/v1/", 200),
        ("api-docs", "/api/v1/docs/", 200),
        ("feed", "/feeds/runs.atom", 200),
        ("not-found", "/runs/deadbeef/", 404),
        ("login", "/accounts/login/", 200),
        ("signup", "/accounts/signup/", 200),
    ]  # fmt: skip
    problems = _visit_all(chromium_browser, live_server, pages, name="public")
    assert problems == [], "\n".join(problems)


def test_forms_admin_and_moderation_queue_at_both_widths(chromium_browser, live_server, site):
    example = site["example"]
    contributor = [
        ("attest-form", f"/runs/{example.public_id}/attest/", 200),
        ("report-form", f"/runs/{example.public_id}/report/", 200),
        ("tokens", "/me/tokens/", 200),
        ("my-reports", "/me/reports/", 200),
        ("run-logged-in", example.get_absolute_url(), 200),
    ]
    problems = _visit_all(
        chromium_browser, live_server, contributor, user=site["alice"], name="contributor"
    )
    staff = [
        ("admin-index", "/admin/", 200),
        ("moderation-queue", "/admin/attestations/attestation/?state__exact=pending", 200),
    ]
    problems += _visit_all(chromium_browser, live_server, staff, user=site["staff"], name="staff")
    assert problems == [], "\n".join(problems)
    assert Attestation.objects.filter(state="pending").count() == 1  # nothing was changed


def test_header_is_one_line_and_note_hides_measurement_fields(chromium_browser, live_server, site):
    context = _logged_in(chromium_browser, live_server, site["alice"], 1280)
    page = context.new_page()
    page.goto(f"{live_server.url}/runs/{site['example'].public_id}/attest/")
    brand = page.locator(".site-header .brand").bounding_box()
    logout = page.get_by_role("button", name="Log out").bounding_box()
    assert abs(logout["y"] - brand["y"]) < brand["height"], (brand, logout)  # same line
    assert page.locator("#id_median").is_visible()
    page.select_option("select[name=kind]", "note")
    assert not page.locator("#id_median").is_visible()
    assert not page.locator("#id_gpu").is_visible()
    assert page.locator("#id_body").is_visible()
    # The textarea's label sits above it, not at its bottom-left.
    label = page.locator("label[for=id_body]").bounding_box()
    body = page.locator("#id_body").bounding_box()
    assert label["y"] + label["height"] <= body["y"] + 1
    page.screenshot(path=str(SCREENSHOTS / "contributor-attest-note-1280.png"), full_page=True)
    context.close()
