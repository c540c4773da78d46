"""The run page's rerun panel shows the clocks, power and throttle reasons sampled while the
result was timed (kirunner/power.py), from the real signed 2026-12-01 results."""

from __future__ import annotations

from reruns.models import ResultReceipt
from tests.runs.claims.test_claims_pages import _committed, loaded  # noqa: F401  (both H200 batches)


def test_rerun_panel_shows_the_timed_windows(loaded, client):  # noqa: F811
    receipt = next(
        r
        for r in ResultReceipt.objects.select_related("job__run").order_by("id")
        if r.payload.get("measurement", {}).get("power", {}).get("doBench", {}).get("powerCapped")
    )
    window = receipt.payload["measurement"]["power"]["doBench"]
    page = client.get(receipt.job.run.get_absolute_url()).content.decode()
    assert "During the do_bench timing" in page and "During the device time timing" in page
    assert f"SM clock {window['smMHz']['min']}–{window['smMHz']['max']} MHz" in page
    assert "software power cap in" in page and "power-capped" in page
