"""KernelBench, the third upstream source: 500 timings of 250 problems on an H100 (Modal)."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from runs.models import ComparisonGroup, ImportRecord, Run
from runs.sources import kernelbench
from runs.sources.base import IngestError
from runs.sources.pipeline import ingest
from tests.conftest import KERNELBENCH

pytestmark = pytest.mark.django_db


@pytest.fixture
def kb(db):
    return ingest(source_slug="kernelbench", locations=[str(KERNELBENCH)])


def test_imports_500_runs_ranked_in_pairs(kb):
    assert [(r.publication, r.rows, r.created) for r in kb] == [
        ("H100_Modal", 250, 250),
        ("H100_Modal", 250, 250),
    ]
    runs = Run.objects.filter(source__slug="kernelbench")
    assert runs.count() == 500
    groups = ComparisonGroup.objects.filter(runs__source__slug="kernelbench").distinct()
    # Eager and torch.compile of one problem rank together, and nothing else with them.
    assert groups.count() == 250
    assert set(groups.values_list("size", flat=True)) == {2}
    assert set(groups.values_list("family", flat=True)) == {"kernelbench"}
    matmul = runs.filter(benchmark__slug="kernelbench-l1-1-square-matrix-multiplication")
    by_impl = {r.implementation.provider_key: r for r in matmul}
    assert by_impl["torch"].median == 2_660_000  # 2.66 ms, the mean
    assert sorted(r.rank for r in matmul) == [1, 2]
    eager = by_impl["torch"]
    assert eager.spec["timing"] == {"latencyNs": {"mean": 2_660_000}, "primaryStatistic": "mean"}
    assert {m["statistic"]: m["value"] for m in eager.spec["measurements"]} == {
        "std": 19_900,
        "min": 2_650_000,
        "max": 2_860_000,
    }
    assert eager.protocol.primary_statistic == "mean" and eager.workload.tensors == []
    assert eager.workload.spec["definition"]["path"] == (
        "KernelBench/level1/1_Square_matrix_multiplication_.py"
    )
    # The ledger names the upstream commit and blob SOURCE.md gives for each file.
    blobs = set(ImportRecord.objects.values_list("upstream_blob", flat=True))
    assert blobs == {
        "14a3f7bd2f9c3f3c839a10b175e1b43739579e2e",
        "f2d2486ab351e2bc611f27eff370ac277dcb8cf2",
    }


def test_never_ranked_with_liger_rows(kb, tmp_path):
    # A Liger row on the same GPU, benchmark name and pass shares no group with KernelBench.
    header = (
        "kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,"
        "x_label,x_value,y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,"
        "timestamp,liger_version\n"
    )
    row = (
        "kernelbench-l1-1-square-matrix-multiplication,torch,forward,speed,ms,N,n,4096,1.0,"
        '0.9,1.1,"{}",NVIDIA H100 80GB HBM3,2025-01-01 00:00:00,0.6.0\n'
    )
    path = tmp_path / "all_benchmark_data.csv"
    path.write_text(header + row)
    ingest(source_slug="liger-kernel-bench", locations=[str(path)])
    liger = Run.objects.get(source__slug="liger-kernel-bench")
    assert liger.group.size == 1 and liger.rank == 1
    assert not Run.objects.filter(group=liger.group, source__slug="kernelbench").exists()


def test_second_ingest_changes_nothing(kb, capsys):
    before = list(Run.objects.order_by("pk").values_list("pk", "digest", "rank"))
    call_command("ingest", "kernelbench", str(KERNELBENCH), "--no-progress")
    assert "0 created, 0 revised, 500 unchanged (nothing changed)" in capsys.readouterr().out
    assert list(Run.objects.order_by("pk").values_list("pk", "digest", "rank")) == before


def test_run_page_labels_the_statistic_and_shows_the_spread(kb, client):
    run = Run.objects.get(
        benchmark__slug="kernelbench-l1-1-square-matrix-multiplication",
        implementation__provider_key="torch",
    )
    page = client.get(run.get_absolute_url()).content.decode()
    assert '<span class="stat">mean</span>' in page
    assert "latency · mean</dt><dd>2.660 ms ± 19.90 µs (std)" in page
    assert "latency · min</dt><dd>2.650 ms" in page and "latency · max</dt><dd>2.860 ms" in page
    assert "100 trials each timed with CUDA events after clearing the L2" in page


def test_listed_by_home_browse_api_and_export(kb, client):
    assert "KernelBench reference timings" in client.get("/").content.decode()
    assert client.get("/runs/?source=kernelbench").status_code == 200
    api = client.get("/api/v1/runs/?source=kernelbench").json()
    assert api["results"] and {r["statistic"] for r in api["results"]} == {"mean"}
    lines = client.get("/api/v1/runs/export.jsonl?source=kernelbench").getvalue().splitlines()
    assert len(lines) == 501 and json.loads(lines[0])["statistic"] == "mean"
    assert json.loads(lines[-1])["rows"] == 500


def test_bad_files_are_refused_with_their_entry(tmp_path):
    folder = tmp_path / "H100_Modal"
    folder.mkdir()
    path = folder / "baseline_time_torch.json"
    bad = {
        "level1": {
            "1_A.py": {"mean": 0, "hardware": "NVIDIA H100 80GB HBM3"},
            "2_B.py": {"mean": "fast", "hardware": "NVIDIA H100 80GB HBM3"},
            "../etc.py": {"mean": 1.0, "hardware": "NVIDIA H100 80GB HBM3"},
        },
        "levelX": {},
    }
    path.write_text(json.dumps(bad))
    with pytest.raises(IngestError) as exc:
        ingest(source_slug="kernelbench", locations=[str(path)])
    text = str(exc.value)
    assert "levelX" in text and "2_B.py: mean is not a number" in text and "../etc.py" in text
    path.write_text(
        json.dumps({"level1": {"1_A.py": {"mean": 0, "hardware": "NVIDIA H100 80GB HBM3"}}})
    )
    with pytest.raises(IngestError, match="the mean must be positive"):
        ingest(source_slug="kernelbench", locations=[str(path)])
    assert not Run.objects.exists() and not ImportRecord.objects.exists()


def test_long_problem_names_keep_a_unique_slug():
    long = "x" * 120
    slug = kernelbench.benchmark_slug(3, long)
    assert len(slug) <= 80 and slug != kernelbench.benchmark_slug(3, long + "y")
