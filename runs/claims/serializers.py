from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.claims.models import JudgedClaim


class ClaimSideSerializer(serializers.Serializer):
    run = serializers.CharField(help_text="public id of the published run")
    implementation = serializers.CharField()
    published_median = serializers.IntegerField(help_text="the run's median, run units")
    controlled_run = serializers.CharField(help_text="public id of its controlled rerun")
    controlled_median = serializers.IntegerField(help_text="the controlled rerun's median")


class JudgedClaimSerializer(serializers.ModelSerializer):
    benchmark = serializers.CharField(source="group.benchmark.slug")
    workload = serializers.CharField(source="group.workload.slug")
    gpu = serializers.CharField(source="group.environment.gpu.product")
    timed_pass = serializers.CharField(source="group.timed_pass")
    metric = serializers.CharField(source="group.metric")
    group = serializers.CharField(source="group.key")
    better = serializers.SerializerMethodField()
    other = serializers.SerializerMethodField()

    class Meta:
        model = JudgedClaim
        fields = [
            "verdict",
            "published_ratio",
            "controlled_ratio",
            "device_ratio",
            "tolerance",
            "basis",
            "why",
            "benchmark",
            "workload",
            "gpu",
            "timed_pass",
            "metric",
            "group",
            "better",
            "other",
            "process",
            "judged_at",
        ]

    def _side(self, run, controlled) -> dict:
        return {
            "run": run.public_id,
            "implementation": run.implementation.display_name,
            "published_median": run.median,
            "controlled_run": controlled.public_id,
            "controlled_median": controlled.median,
        }

    @extend_schema_field(ClaimSideSerializer)
    def get_better(self, claim) -> dict:
        return self._side(claim.better, claim.better_controlled)

    @extend_schema_field(ClaimSideSerializer)
    def get_other(self, claim) -> dict:
        return self._side(claim.other, claim.other_controlled)
