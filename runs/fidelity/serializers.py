from __future__ import annotations

from rest_framework import serializers


class RatioSerializer(serializers.Serializer):
    median = serializers.FloatField(help_text="median of runner/script over the observations")
    min = serializers.FloatField()
    max = serializers.FloatField()
    cells = serializers.IntegerField(help_text="workload cells compared")
    observations = serializers.IntegerField(help_text="runner results compared (processes)")


class MemorySerializer(RatioSerializer):
    maxDiffMiB = serializers.FloatField(help_text="largest runner - script difference, MiB")
    scriptRepeatMiB = serializers.FloatField(
        required=False,
        help_text="how far apart upstream's own function read a cell when called twice in a "
        "row in one process, at most, MiB (bench/fidelity/script_cells.py)",
    )
    scriptRepeatCells = serializers.IntegerField(
        required=False, help_text="cells upstream's own function was called twice on"
    )
    scriptRepeatSameRequest = serializers.IntegerField(
        required=False, help_text="of those, cells whose two calls requested the same bytes"
    )


class FidelityRowSerializer(serializers.Serializer):
    kernel = serializers.CharField()
    provider = serializers.CharField()
    timed_pass = serializers.CharField(source="pass")
    metric = serializers.CharField()
    anchor = serializers.CharField(help_text="the row's id on the page")
    url = serializers.CharField(help_text="the row on the source's fidelity page")
    status = serializers.ChoiceField(choices=["established", "not-established", "not-measured"])
    reason = serializers.CharField()
    gpu = serializers.CharField(required=False, help_text="the GPU product both ran on")
    date = serializers.CharField(required=False)
    calls = serializers.ListField(child=serializers.CharField(), required=False)
    upstream_commits = serializers.ListField(
        source="upstreamCommits",
        child=serializers.CharField(),
        help_text="the upstream commits of the script it was measured beside",
    )
    device_bound = RatioSerializer(
        source="deviceBound", required=False, allow_null=True, help_text="device-bound latency"
    )
    host_bound = RatioSerializer(
        source="hostBound", required=False, allow_null=True, help_text="host-bound latency"
    )
    memory = MemorySerializer(required=False, allow_null=True, help_text="peak memory")


class FidelityTableSerializer(serializers.Serializer):
    source = serializers.CharField()
    measured = serializers.BooleanField(help_text="whether a fidelity table is committed")
    batch = serializers.CharField(required=False, help_text="the outputs it was computed from")
    generated_by = serializers.CharField(source="generatedBy", required=False)
    upstream_commit = serializers.CharField(source="upstreamCommit", required=False)
    host = serializers.CharField(required=False)
    criteria = serializers.DictField(child=serializers.CharField(), required=False)
    rows = FidelityRowSerializer(many=True)
    script_changes = serializers.DictField(
        source="scriptChanges",
        child=serializers.DictField(child=serializers.CharField()),
        required=False,
        help_text=(
            "kernel -> {script, why}: scripts that measure otherwise at one upstream commit "
            "than at another; a row measured at the other commit only is not measured for a run"
        ),
    )
