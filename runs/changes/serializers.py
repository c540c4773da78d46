"""The detected changes as the API shows them (runs/changes/api.py)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from kilib.origin import site_root
from runs.changes.models import CellChange


class ChangeSerializer(serializers.ModelSerializer):
    run = serializers.CharField(source="run.public_id", help_text="The run at the publication")
    url = serializers.SerializerMethodField(help_text="The run page, its history section")
    source = serializers.CharField(source="source.slug")
    benchmark = serializers.CharField(source="benchmark.slug")
    implementation = serializers.CharField(source="provider_key", help_text="Provider key")
    timed_pass = serializers.CharField(source="run.timed_pass")
    metric = serializers.CharField(source="run.metric")
    workload = serializers.CharField(source="run.workload.slug")
    gpu = serializers.CharField(source="run.environment.gpu.slug")
    publication = serializers.CharField(source="publication.slug")
    upstream_commit = serializers.CharField(source="publication.upstream_commit")
    previous = serializers.CharField(
        source="previous.slug", help_text="The cell's publication before this one"
    )
    until = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, help_text="A transient's last publication off its level"
    )
    commits_url = serializers.CharField(
        help_text="Upstream's commits from the previous publication to this one (GitHub's "
        "compare page); empty where the source has no repository or both are of one commit"
    )
    unit = serializers.CharField(source="run.unit", help_text="ns (latency) or B (memory)")
    shift = serializers.FloatField(help_text="(after - before) / before")

    class Meta:
        model = CellChange
        extra_kwargs = {
            "published_at": {"help_text": "The publication's time, upstream's"},
            "review": {"help_text": "acknowledged or dismissed by a maintainer; empty if neither"},
        }
        fields = [
            "run", "url", "source", "benchmark", "implementation", "timed_pass", "metric",
            "workload", "gpu", "publication", "published_at", "upstream_commit", "previous", "commits_url", "kind",
            "until", "direction", "before", "after", "unit", "shift", "threshold", "grouped", "review",
        ]  # fmt: skip

    @extend_schema_field(serializers.URLField())
    def get_url(self, change: CellChange) -> str:
        return f"{site_root()}{change.run.get_absolute_url()}#history"
