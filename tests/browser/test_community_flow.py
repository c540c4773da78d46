"""The community flow in a real browser: sign up, verify, post a reproduction, see it pending;
a maintainer with TOTP approves it in the admin; the public run page shows it with its
difference from the published median."""

from __future__ import annotations

import re

import pytest
from django.core import mail

from attestations.models import Attestation
from tests.browser.conftest import ARTIFACTS
from tests.factories import RunFactory
from tests.factories_attestations import make_staff, totp_code

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _submit(page) -> None:
    page.locator("main form button[type=submit], main form input[type=submit]").first.click()


def test_sign_up_post_approve_and_see_it(chromium_browser, live_server, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    run = RunFactory(median=385_536, p20=384_685, p80=386_240)
    make_staff("maintainer")
    base = live_server.url
    # The emailed link is built from the one origin (kilib/origin.py), as in production.
    settings.SITE_ROOT = base
    ARTIFACTS.mkdir(exist_ok=True)

    context = chromium_browser.new_context()
    page = context.new_page()
    csp_errors: list[str] = []
    page.on(
        "console",
        lambda msg: csp_errors.append(msg.text) if "Content Security Policy" in msg.text else None,
    )

    # 1. Sign up and verify the address with the link from the outbox.
    page.goto(f"{base}/accounts/signup/")
    page.fill("input[name=email]", "dana@example.org")
    page.fill("input[name=username]", "dana")
    page.fill("input[name=password1]", "a-long-passphrase-42")
    page.fill("input[name=password2]", "a-long-passphrase-42")
    page.screenshot(path=str(ARTIFACTS / "community-0-signup.png"), full_page=True)
    _submit(page)
    page.wait_for_url(re.compile(r"/accounts/confirm-email/$"))
    link = re.search(r"https?://\S+/accounts/confirm-email/\S+", mail.outbox[-1].body).group(0)
    page.goto(link)
    _submit(page)
    page.goto(f"{base}/accounts/login/")
    if page.locator("input[name=login]").count():
        page.fill("input[name=login]", "dana")
        page.fill("input[name=password]", "a-long-passphrase-42")
        _submit(page)
        page.wait_for_url(re.compile(r"^(?!.*/accounts/login/).*$"))

    # 2. Post a reproduction: 393.632 µs against the published 385.536 µs is +2.1 %.
    page.goto(f"{base}/runs/{run.public_id}/attest/")
    page.select_option("select[name=kind]", "reproduction")
    page.fill("input[name=median]", "393.632")
    page.fill("input[name=p20]", "393.1")
    page.fill("input[name=p80]", "394.2")
    page.select_option("select[name=input_unit]", "us")
    # On the run's own GPU product: only then is a difference from the published median shown.
    page.select_option("select[name=gpu]", str(run.environment.gpu.pk))
    page.fill("input[name=cuda_version]", "12.8")
    page.fill("textarea[name=body]", "Same workload on my **H100**.")
    page.screenshot(path=str(ARTIFACTS / "community-1-attest-form.png"), full_page=True)
    _submit(page)
    page.wait_for_url(re.compile(rf"/runs/{run.public_id}/"))
    section = page.locator("#replications")
    assert "pending" in section.inner_text()
    assert "393.6 µs" in section.inner_text()
    page.screenshot(path=str(ARTIFACTS / "community-2-pending.png"), full_page=True)
    assert Attestation.objects.get().state == "pending"

    # 3. The maintainer logs in with password and TOTP and approves it in the admin.
    page.locator("nav.account-nav button", has_text="Log out").click()
    page.goto(f"{base}/admin/")
    page.wait_for_url(re.compile(r"/accounts/login/"))
    page.fill("input[name=login]", "maintainer")
    page.fill("input[name=password]", "maintainer-password-1")
    _submit(page)
    page.wait_for_url(re.compile(r"/accounts/2fa/authenticate/"))
    page.fill("input[name=code]", totp_code())
    _submit(page)
    page.wait_for_url(re.compile(r"/admin/$"))
    assert "Pending attestations" in page.locator("#moderation-queues").inner_text()
    page.screenshot(path=str(ARTIFACTS / "community-3-admin-index.png"), full_page=True)
    page.locator("#moderation-queues a", has_text="Pending attestations").click()
    page.locator("input[name=_selected_action]").first.check()
    page.select_option("select[name=action]", "approve")
    page.locator("button[name=index]").click()
    page.wait_for_selector("input[name=apply]")
    page.screenshot(path=str(ARTIFACTS / "community-4-approve-reason.png"), full_page=True)
    page.locator("input[name=apply]").click()
    page.wait_for_url(re.compile(r"/admin/attestations/attestation/"))
    assert Attestation.objects.get().state == "approved"

    # 4. Anyone sees it on the public run page, with its difference from the published median.
    public = chromium_browser.new_context().new_page()
    public.goto(f"{base}/runs/{run.public_id}/")
    text = public.locator("#replications").inner_text()
    assert "Replications and notes (1)" in text
    assert "+2.1 % vs published" in text
    assert "dana" in text and "pending" not in text
    public.screenshot(path=str(ARTIFACTS / "community-5-public.png"), full_page=True)
    assert csp_errors == []
    context.close()
