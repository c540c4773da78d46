"""The run page: every section and figure of the reference page, in its order, plus the
evidence badge, cell history and physical floor; HTTP caching; constant query counts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import Evidence, Run
from runs.pages import run_sections
from runs.pages.units import scale
from runs.read import catalogue, freshness
from tests.factories import (
    BenchmarkFactory,
    GpuFactory,
    PublicationFactory,
    RunFactory,
    SourceFactory,
    workload_for,
)
from tests.factories_reruns import job_for
from tests.pages import grow, queries, text_of

SECTIONS = [
    "Primary measurement",
    "Identity",
    "Correctness",
    "Evidence",
    "Workload",
    "Measurements",
    "Protocol",
    "Environment",
    "Artifacts",
    "Replications and notes",
    "Canonical manifest",
    "Cite this record (permalink, digest, access date)",
    "Report an issue with this run",
]


def test_example_page_carries_every_section_and_figure(client, example_run):
    response = client.get(f"/runs/{example_run.public_id}/")
    assert response.status_code == 200
    html = response.content.decode()
    text = text_of(response)
    assert f"<title>Run {example_run.public_id} · KernelIndex</title>" in html

    headings = [
        unescape(re.sub(r"<[^>]+>", "", h)) for h in re.findall(r"<h2[^>]*>(.*?)</h2>", html)
    ]
    assert headings == SECTIONS

    assert "385.5µs median" in text
    assert "Rank 2 in its comparison group · source-native comparison · observed 2025-08-07" in text
    assert "Compare with #1 →" in text
    # Upstream's own figures in the page's units; the exact values are the manifest's.
    assert "p20 384.7 µs · median 385.5 µs · p80 386.2 µs (as upstream wrote them" in text
    for figure in [
        "implementation Transformers",
        "project Hugging Face Transformers",
        "revision unknown",
        "workload seq = 4096 · hidden = 8192 · q_heads = 32 · kv_heads = 8 · bf16",
        # The example's run digest and comparison key hash a workload and implementation spec
        # this index spells differently; the page shows this index's own, truncated the same way.
        f"comparison key {example_run.group.key[:23]}…",
        "source Liger-Kernel benchmarks",
        f"external id {example_run.external_id}",
        f"digest {example_run.digest[:30]}…",
        "Marked passed by the source; the correctness policy was not published.",
        "seq 4096 hidden 8192 q_heads 32 kv_heads 8",
        "k bf16 [1, 4096, 8, 256] q bf16 [1, 4096, 32, 256]",
        "definition comparator not_asserted",
        "latency · median 385.5 µs",
        "latency · p20 384.7 µs",
        "latency · p80 386.2 µs",
        "harness Liger-Kernel benchmark scripts",
        "timer cuda_events",
        "primaryStatistic median",
        "comparabilityFamily liger_kernel_bench",
        "gpu NVIDIA H100 (sm_90)",
        "sha256:a79eaf4df66c97c6adc1fb2d09df78682155d1ea86652ae0b70199875bde7747",
        "sha256:2750ae381d6de582f1eb6b9008e0987463d19ede8af127d97d76c5ae09121393",
        "No artifacts published with this run.",
        "No attestations yet.",
        "Community attestations. They never change the evidence level; only a "
        "KernelIndex-controlled rerun does.",
        "Add a reproduction or note",
        "Show manifest",
        "Published 2026-08-20 · Liger-Kernel benchmarks · BSD-2-Clause · "
        "All results for Llama 4 rotary position embedding → · JSON",
        "Evidence: Reported",
        "Controlled reruns",
    ]:
        assert figure in text, figure
    # Links the page promises.
    assert f'href="/runs/{example_run.public_id}/attest/"' in html
    assert f'href="/runs/{example_run.public_id}/report/"' in html
    assert f'href="/runs/{example_run.public_id}.json"' in html
    assert 'href="/benchmarks/llama4_rope/"' in html
    assert (
        f'<link rel="canonical" href="http://localhost:8000/runs/{example_run.public_id}/">' in html
    )
    # The manifest is on the page, collapsed, and names the digests it pins.
    assert '<details class="manifest">' in html
    assert "&quot;protocolDigest&quot;: &quot;sha256:a79eaf4d" in html


def test_compare_link_targets_the_leader(client, example_run):
    leader = Run.objects.public().get(group=example_run.group, rank=1)
    html = client.get(f"/runs/{example_run.public_id}/").content.decode()
    assert (
        f'href="/runs/{example_run.public_id}/compare/{leader.public_id}/">Compare with #1 →'
        in html
    )


def test_rank_one_has_no_compare_link(client, example_run):
    leader = Run.objects.public().get(group=example_run.group, rank=1)
    assert "Compare with #1" not in client.get(f"/runs/{leader.public_id}/").content.decode()


def test_physical_floor_counts_inputs_read_and_outputs_written_once(client, example_run):
    text = text_of(client.get(f"/runs/{example_run.public_id}/"))
    # q [1,4096,32,256] + k [1,4096,8,256] in bf16 = 80 MiB read, the same written.
    assert "read its inputs once (80.0 MiB) and write its outputs once (80.0 MiB)" in text
    assert (
        "160.0 MiB at the NVIDIA H100's datasheet peak of 3350 GB/s takes at least 50.08 µs" in text
    )
    assert "The median is 7.7× this floor." in text
    assert "Implausible" not in text


@pytest.mark.django_db
def test_median_below_the_floor_is_flagged(client):
    run = RunFactory(median=20_000, rank=1)  # 20 µs for 160 MiB on H100: below the floor
    text = text_of(client.get(f"/runs/{run.public_id}/"))
    assert "Implausible: the median is below this floor (0.40× of it)." in text


@pytest.mark.django_db
def test_floor_is_not_known_for_backward_and_unknown_tensors(client):
    backward = RunFactory(timed_pass="backward")
    assert "not known: only the forward pass" in text_of(client.get(f"/runs/{backward.public_id}/"))
    moe = BenchmarkFactory(slug="fused_moe")
    odd = RunFactory(benchmark=moe, workload=workload_for(moe, seq=128, dtype="bf16"))
    text = text_of(client.get(f"/runs/{odd.public_id}/"))
    assert "not known: this kernel's tensors are not known here" in text
    assert "tensors not known" in text


@pytest.mark.django_db
def test_cell_history_across_publications_is_plotted(client):
    ci = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI benchmarks")
    runs = [
        RunFactory(
            source=ci,
            publication=PublicationFactory(source=ci, slug=f"commit{i}", sequence=i),
            median=100_000 + 10_000 * i,
            rank=1,
        )
        for i in range(1, 4)
    ]
    html = client.get(f"/runs/{runs[1].public_id}/").content.decode()
    svg = re.search(r'<svg[^>]*class="chart history-chart".*?</svg>', html, re.S).group(0)
    assert "<title" in svg and "in 3 publications, oldest first; axis from 0 to" in svg
    assert "values from 110 to 130" in svg and "Latency median (µs)" in svg
    assert svg.count('<circle class="point"') == 3
    assert "commit2: 120.0 µs (this run)" in text_of(client.get(f"/runs/{runs[1].public_id}/"))


def test_evidence_badge_explains_itself(client, example_run):
    Run.objects.filter(pk=example_run.pk).update(evidence=Evidence.REPRODUCED)
    html = client.get(f"/runs/{example_run.public_id}/").content.decode()
    assert 'class="badge evidence evidence-reproduced"' in html
    assert "reproduced the median within tolerance" in html


@pytest.mark.django_db
@pytest.mark.parametrize("bad", ["zz", "0123456789", "ABCDEF12", "../etc"])
def test_malformed_or_unknown_ids_are_404(client, bad):
    assert client.get(f"/runs/{bad}/").status_code == 404
    assert client.get("/runs/deadbeef/").status_code == 404


def test_manifest_json_and_citations(client, example_run):
    pid = example_run.public_id
    manifest = client.get(f"/runs/{pid}.json")
    assert manifest["Content-Type"] == "application/json"
    assert manifest.json()["protocol"]["spec"]["comparability"]["family"] == "liger_kernel_bench"
    bib = client.get(f"/runs/{pid}/cite.bib")
    assert bib["Content-Type"].startswith("application/x-bibtex")
    body = bib.content.decode()
    assert f"@misc{{kernelindex-{pid}," in body and example_run.digest in body and "urldate" in body
    csl = client.get(f"/runs/{pid}/cite.csl.json")
    assert csl["Content-Type"].startswith("application/vnd.citationstyles.csl+json")
    item = csl.json()[0]
    assert item["URL"].endswith(f"/runs/{pid}/") and example_run.digest in item["note"]
    assert "accessed" in item and item["issued"] == {"date-parts": [[2025, 8, 7]]}
    assert client.get(f"/runs/{pid}/cite.txt").status_code == 404


@pytest.mark.parametrize("fmt", ["bib", "csl.json"])
def test_citations_are_served_from_the_page_cache(client, example_run, settings, fmt):
    settings.PAGE_CACHE_SECONDS = 300
    url = f"/runs/{example_run.public_id}/cite.{fmt}"
    first = client.get(url)
    assert first["X-Page-Cache"] == "miss" and first["ETag"]
    again = client.get(url)
    assert again["X-Page-Cache"] == "hit" and again.content == first.content
    assert again["Content-Disposition"] == first["Content-Disposition"]
    assert again["Content-Type"] == first["Content-Type"]


def test_etag_last_modified_and_page_cache(client, example_run, settings):
    settings.PAGE_CACHE_SECONDS = 300
    url = f"/runs/{example_run.public_id}/"
    first = client.get(url)
    assert first["X-Page-Cache"] == "miss"
    assert "public" in first["Cache-Control"] and "Cookie" in first["Vary"]
    assert first["Last-Modified"]
    second = client.get(url)
    assert second["X-Page-Cache"] == "hit" and second.content == first.content
    assert second["ETag"] == first["ETag"]
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    # An evidence change retires the cached page and its ETag.
    example_run.evidence = Evidence.CHECKED
    example_run.save()
    third = client.get(url)
    assert third["ETag"] != first["ETag"] and third["X-Page-Cache"] == "miss"
    assert b"evidence-checked" in third.content


def test_logged_in_readers_bypass_the_shared_cache(client, example_run, alice):
    client.force_login(alice)
    response = client.get(f"/runs/{example_run.public_id}/")
    assert response.status_code == 200 and "X-Page-Cache" not in response
    assert "private" in response["Cache-Control"] and "no-cache" in response["Cache-Control"]
    # Their page also shows their own rows (a watch) that no version covers: its ETag is the
    # content's, so a page that changed is never answered 304.
    from attestations.watching.services import watch_start

    watch_start(
        user=alice, target="source", source=example_run.source, events={"publications": True}
    )
    again = client.get(
        f"/runs/{example_run.public_id}/", HTTP_IF_NONE_MATCH=response.get("ETag", "")
    )
    assert again.status_code == 200 and again.content != response.content


def test_gzip_when_asked(client, example_run):
    response = client.get(f"/runs/{example_run.public_id}/", HTTP_ACCEPT_ENCODING="gzip")
    assert response["Content-Encoding"] == "gzip"


@pytest.mark.django_db
def test_run_page_query_count_does_notgrow(client, settings, django_assert_max_num_queries):
    settings.PAGE_CACHE_SECONDS = 0
    leader = RunFactory(provider="liger", rank=1, median=100_000)
    run = RunFactory(provider="huggingface", rank=2, median=200_000)
    assert leader.group_id == run.group_id
    RunFactory.create_batch(18)
    small = queries(client, f"/runs/{run.public_id}/")
    grow(400)
    assert Run.objects.count() >= 420
    large = queries(client, f"/runs/{run.public_id}/")
    assert small == large
    # Cold by design, not by keeping parts per data change: the versions (1), the run with its
    # workload, group and leader, with whether the group has judged claims (1), its five
    # catalogue rows (5, kept for the next run page that shares them), its cell's history
    # window by history key with the count per source (1; and the rows of its other sources
    # where a cell spans several), the changes among the points shown and the cell's status
    # (2, none for a cell too short for the rule), each on an index; nothing for panels of a
    # run nothing was written about.
    freshness.reset()
    with django_assert_max_num_queries(10):
        client.get(f"/runs/{run.public_id}/")


@pytest.mark.django_db
def test_a_run_page_read_first_asks_for_its_own_rows_only(client, settings):
    """A reader arriving from a link: nothing of this run is kept, but the catalogue rows it
    shares with a run whose page was read are, so it asks for none of them."""
    settings.PAGE_CACHE_SECONDS = 0
    source = SourceFactory()
    shared = {"source": source, "publication": PublicationFactory(source=source),
              "benchmark": BenchmarkFactory(), "gpu": GpuFactory()}  # fmt: skip
    RunFactory(provider="liger", rank=1, **shared)
    run, other = RunFactory.create_batch(2, provider="huggingface", rank=2, **shared)
    assert run.history_key == other.history_key
    freshness.reset()
    client.get(f"/runs/{other.public_id}/")
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(f"/runs/{run.public_id}/").status_code == 200
    tables = [re.findall(r'FROM "(\w+)"', q["sql"])[-1] for q in ctx.captured_queries]
    # The versions, the run with its leader (and whether the group has claims: none), its
    # cell's two points with their count per source, and, since the change rule judges from
    # the second publication, the cell's changes and status in one query.
    assert tables == ["runs_version", "runs_run", "runs_run", "runs_cellseries"]


@pytest.mark.django_db
def test_the_run_pages_read_names_the_leader_of_a_run_ranked_below_it():
    """The run page's one query for the run also names rank 1 of its group, and only for a
    run ranked below it: the leader and an unranked run have no "Compare with #1"."""
    leader = RunFactory(provider="liger", rank=1, median=100_000)
    run = RunFactory(provider="huggingface", rank=2, median=200_000)
    alone = RunFactory(rank=None)
    assert leader.group_id == run.group_id
    assert Run.objects.run_page_or_404(run.public_id)[1:] == (leader.public_id, False)
    assert Run.objects.run_page_or_404(leader.public_id)[1:] == (None, False)
    assert Run.objects.run_page_or_404(alone.public_id)[1:] == (None, False)
    Run.objects.filter(pk=leader.pk).update(is_current=False)  # revised away: no rank 1 now
    assert Run.objects.run_page_or_404(run.public_id)[1:] == (None, False)


@pytest.mark.django_db
def test_the_history_window_counts_every_point_of_each_source():
    """The window's count per source is of the whole cell, in every source, however few of its
    points the window shows."""
    shared = {"benchmark": BenchmarkFactory(), "gpu": GpuFactory(), "provider": "liger"}
    sources = [SourceFactory(), SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI")]
    runs = [
        RunFactory(source=source, **shared)
        for source, n in zip(sources, (30, 3), strict=True)
        for _ in range(n)
    ]
    assert len({r.history_key for r in runs}) == 1
    for run in (runs[0], runs[15], runs[-1]):
        run = Run.objects.for_run_page().get(pk=run.pk)
        catalogue.attach([run])
        window = Run.objects.history_window(run, run_sections.HISTORY_SHOWN)
        assert window.per_source == {sources[0].pk: 30, sources[1].pk: 3}
        assert len(window.before) + len(window.after) < 33
        part = run_sections.history(run)
        assert part["total"] == 33 and [n for *_, n in part["sources"]] in ([30, 3], [3, 30])


@pytest.mark.django_db
def test_panels_of_a_run_nothing_was_written_about_ask_nothing(client, settings):
    settings.PAGE_CACHE_SECONDS = 0
    run = RunFactory()

    def panel_queries():
        freshness.reset()
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/runs/{run.public_id}/").status_code == 200
        apps = ("attestations_", "reruns_")
        return [q["sql"] for q in ctx.captured_queries if any(f'"{a}' in q["sql"] for a in apps)]

    assert panel_queries() == []
    job_for(run)  # a rerun job names the run: its page now asks its panels
    assert panel_queries()


@pytest.mark.django_db
def test_a_long_history_is_bounded_on_the_run_page_and_paged_on_its_own(client):
    ci = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI benchmarks")
    runs = [
        RunFactory(
            source=ci,
            publication=PublicationFactory(source=ci, slug=f"commit{i:03}", sequence=i),
            median=100_000 + 1_000 * i,
            observed_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=i),
            rank=1,
        )
        for i in range(130)
    ]

    def shown_on(run):
        html = client.get(f"/runs/{run.public_id}/").content.decode()
        return re.findall(
            r"commit(\d{3})", re.search(r'<ol class="history-list">.*?</ol>', html, re.S).group(0)
        )

    text = text_of(client.get(f"/runs/{runs[60].public_id}/"))
    shown = shown_on(runs[60])
    assert len(shown) == 24 and shown == sorted(shown)
    assert "commit060: 160.0 µs (this run)" in text
    assert shown[0] == "048" and shown[-1] == "071"  # 12 before it, 11 after it
    assert "24 of its 130 publications" in text and "All 130 publications of this cell" in text
    # The newest run fills its window from further back.
    newest = shown_on(runs[-1])
    assert newest[0] == "106" and newest[-1] == "129"
    history = client.get(f"/runs/{runs[60].public_id}/history/")
    assert history.status_code == 200
    rows = re.findall(r"commit(\d{3})", history.content.decode())
    assert rows == [f"{i:03}" for i in range(100)]
    second = client.get(f"/runs/{runs[60].public_id}/history/?page=2").content.decode()
    assert re.findall(r"commit(\d{3})", second) == [f"{i:03}" for i in range(100, 130)]


@pytest.mark.django_db
def test_a_data_change_shows_at_once_on_an_uncached_run_page(client, settings):
    """The page's data sections are cached per data change: a new point in the cell's history
    or a new evidence level is on the next page, not an hour later."""
    settings.PAGE_CACHE_SECONDS = 0
    ci = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI benchmarks")
    first = RunFactory(
        source=ci, publication=PublicationFactory(source=ci, slug="c1", sequence=1), rank=1
    )
    url = f"/runs/{first.public_id}/"
    assert "No history" in text_of(client.get(url))
    RunFactory(source=ci, publication=PublicationFactory(source=ci, slug="c2", sequence=2), rank=1)
    Run.objects.filter(pk=first.pk).update(evidence="checked")  # no signal: the trigger
    text = text_of(client.get(url))
    assert "No history" not in text and "c1: " in text and " c2" in text
    assert "checked" in text.lower()


def test_cached_pages_are_stored_compressed_for_gzip_clients(client, example_run, settings):
    import gzip

    settings.PAGE_CACHE_SECONDS = 300
    url = f"/runs/{example_run.public_id}/"
    plain = client.get(url)
    first = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    second = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert first["Content-Encoding"] == second["Content-Encoding"] == "gzip"
    assert second["X-Page-Cache"] == "hit" and first["ETag"] != plain["ETag"]
    assert gzip.decompress(second.content) == plain.content
    assert "Accept-Encoding" in second["Vary"]


def test_pages_with_a_session_or_messages_are_not_shared(client, example_run, settings):
    """A one-off notice carried by a cookie must never be stored in the shared page cache."""
    settings.PAGE_CACHE_SECONDS = 300
    url = f"/runs/{example_run.public_id}/"
    client.cookies["messages"] = "anything"
    client.get(url)
    second = client.get(url)
    assert second.get("X-Page-Cache") != "hit"
    del client.cookies["messages"]
    client.get(url)
    assert client.get(url)["X-Page-Cache"] == "hit"


@pytest.mark.django_db
def test_a_new_point_of_the_cell_retires_the_cached_run_page(client, settings):
    """Page cache on: the stored page is served until the cell gets a new publication (an
    ingest: the run data's version), then the next request renders the new point; a write
    about another run leaves the page stored."""
    settings.PAGE_CACHE_SECONDS = 300
    ci = SourceFactory(slug="liger-kernel-ci", name="Liger-Kernel CI benchmarks")
    first = RunFactory(
        source=ci, publication=PublicationFactory(source=ci, slug="c1", sequence=1), rank=1
    )
    other = RunFactory(provider="liger")
    url = f"/runs/{first.public_id}/"
    assert client.get(url)["X-Page-Cache"] == "miss"
    assert client.get(url)["X-Page-Cache"] == "hit"
    from tests.factories_reruns import job_for

    job_for(other)  # a rerun job about another run: not what this page reads
    assert client.get(url)["X-Page-Cache"] == "hit"
    RunFactory(source=ci, publication=PublicationFactory(source=ci, slug="c2", sequence=2), rank=1)
    response = client.get(url)
    assert response["X-Page-Cache"] == "miss" and " c2" in text_of(response)


@pytest.mark.django_db
def test_a_level_that_a_later_rerun_did_not_move_says_which_rerun_it_rests_on(client):
    """A reproduced run whose later process could only check: the badge says reproduced, and
    the page shows the rerun that found it before the one that did not move it."""
    from runs.evidence import Outcome, evidence_apply

    run = RunFactory()
    apply = evidence_apply
    apply(run=run, controlled_run=None, cause="c1",
          outcome=Outcome("reproduced", {"why": "within the 5% tolerance, 1.2% off"}))  # fmt: skip
    page = text_of(client.get(f"/runs/{run.public_id}/"))
    assert "rests on" not in page  # the newest rerun is the one the level rests on
    apply(run=run, controlled_run=None, cause="c2",
          outcome=Outcome("checked", {"why": "host-bound on our runner"}))  # fmt: skip
    page = text_of(client.get(f"/runs/{run.public_id}/"))
    assert "evidence-reproduced" in client.get(f"/runs/{run.public_id}/").content.decode()
    basis = page.index("The level rests on the rerun of")
    found, later = page.index("within the 5% tolerance"), page.index("host-bound on our runner")
    assert basis < found < later
    assert "found checked, which does not move a settled level" in page


@pytest.mark.django_db
def test_a_run_page_asked_for_before_asks_only_its_versions(
    client, settings, django_assert_num_queries
):
    """The run and the page's sections that read the run data only are kept under its version:
    a later reader asks for the versions alone and gets the same bytes (the manifest too); a
    write to the run data shows on the next request; a write about the run (a rerun job) shows
    in its panels and leaves the sections kept."""
    settings.PAGE_CACHE_SECONDS = 0
    RunFactory(provider="liger", rank=1, median=100_000)
    run = RunFactory(provider="huggingface", rank=2, median=200_000)
    url = f"/runs/{run.public_id}/"
    first = client.get(url)
    assert first.status_code == 200
    with django_assert_num_queries(1):
        again = client.get(url)
    assert again.content == first.content
    with django_assert_num_queries(1):
        manifest = client.get(f"/runs/{run.public_id}.json")
    assert manifest.json()["run"]["metadata"]["name"] == run.name

    Run.objects.filter(pk=run.pk).update(median=600_000)
    assert scale(600_000, run.unit, "") in text_of(client.get(url))

    before = client.get(url).content
    job_for(run)
    with CaptureQueriesContext(connection) as ctx:
        after = client.get(url).content
    assert after != before
    run_queries = [q["sql"] for q in ctx.captured_queries if 'FROM "runs_run"' in q["sql"]]
    assert not any('"runs_run"."public_id" =' in sql for sql in run_queries)


@pytest.mark.django_db
def test_an_id_that_names_no_run_is_never_kept(client, settings):
    settings.PAGE_CACHE_SECONDS = 0
    for _ in range(2):
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/runs/0000abcd/").status_code == 404
        assert sum('"runs_run"' in q["sql"] for q in ctx.captured_queries) == 1
    with CaptureQueriesContext(connection) as ctx:
        response = client.get("/runs/not-an-id/")
    assert response.status_code == 404
    assert "8 hexadecimal characters" in response.content.decode()
    assert not any('"runs_run"' in q["sql"] for q in ctx.captured_queries)


@pytest.mark.django_db
def test_the_run_pages_sql_read_gives_the_orms_instances(client):
    """RunQuerySet.run_page_or_404 writes current_or_404() of for_run_page() as SQL: the run,
    its workload and its group as the ORM loads them (every field, JSON and dates with their
    types), the group and workload cached on the run, and the same 404s."""
    from django.http import Http404

    old = RunFactory(median=123_456.5)
    Run.objects.filter(pk=old.pk).update(is_current=False)  # revised: revision 2 is current
    new = RunFactory(public_id=old.public_id, revision=2, median=99.25, workload=old.workload)
    for run in (new, RunFactory(), RunFactory(labels={"nested": {"a": [1, 2.5, None]}})):
        orm = Run.objects.for_run_page().current_or_404(run.public_id)
        with CaptureQueriesContext(connection) as ctx:
            sql, leader, _ = Run.objects.run_page_or_404(run.public_id)
            related = (sql.workload, sql.group)
        assert len(ctx.captured_queries) == 1
        assert leader is None  # each run is alone in its group
        for a, b in ((orm, sql), (orm.workload, related[0]), (orm.group, related[1])):
            fields = [f.attname for f in type(a)._meta.concrete_fields]
            assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
            assert [type(getattr(a, f)) for f in fields] == [type(getattr(b, f)) for f in fields]
            assert b._state.db == a._state.db and not b._state.adding
    assert sql.labels == {"nested": {"a": [1, 2.5, None]}}
    assert Run.objects.run_page_or_404(old.public_id).run.revision == 2
    for missing in ("0000000f", "not-an-id"):
        with pytest.raises(Http404):
            Run.objects.run_page_or_404(missing)


def test_page_urls_are_reversed_once_per_process(monkeypatch):
    """Model.get_absolute_url of the catalogue and runs: reverse()'s answer, asked once."""
    from django.urls import reverse

    from runs import models

    models.page_url.cache_clear()
    calls = []

    def counted(name, args):
        calls.append(name)
        return reverse(name, args=args)

    monkeypatch.setattr(models, "reverse", counted)
    for _ in range(3):
        assert models.page_url("runs:detail", "01a0202b") == reverse(
            "runs:detail", args=["01a0202b"]
        )
        assert models.page_url("runs:gpu", "nvidia-h100") == reverse(
            "runs:gpu", args=["nvidia-h100"]
        )
    assert calls == ["runs:detail", "runs:gpu"]
    models.page_url.cache_clear()
