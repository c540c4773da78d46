"""The home page's benchmark list: grouped by source and, for KernelBench, by level; the
largest group open and the rest folded; names in natural order (2_ before 26_)."""

from __future__ import annotations

import re

import pytest

from runs.sources.pipeline import ingest
from tests.conftest import KERNELBENCH, LIGER_CSV

pytestmark = pytest.mark.django_db


def test_benchmarks_are_grouped_folded_and_sorted_naturally(client):
    ingest(source_slug="liger-kernel-bench", locations=[str(LIGER_CSV)])
    ingest(source_slug="kernelbench", locations=[str(KERNELBENCH)])
    html = client.get("/").content.decode()
    groups = re.findall(
        r'<details class="benchmark-group"( open)?><summary>([^<]+) <span class="muted">· '
        r"(\d+) benchmarks?",
        html,
    )
    assert [(bool(o), t, int(n)) for o, t, n in groups] == [
        (True, "Liger-Kernel benchmarks", 35),  # the CSV's benchmarks
        (False, "KernelBench L1", 100),
        (False, "KernelBench L2", 100),
        (False, "KernelBench L3", 50),
    ]
    level1 = html[html.index("KernelBench L1 <span") : html.index("KernelBench L2 <span")]
    names = re.findall(r'<a href="/benchmarks/[^"]+/">([^<]+)</a>', level1)
    numbers = [int(n.split("_")[0]) for n in names]
    assert numbers == sorted(numbers) == list(range(1, 101))
