"""runs_run keeps one index per read that uses it (see Run.Meta.indexes): duplicates of a
foreign key's own index, of a unique constraint's leading column, and indexes no query reads are
dropped; each sort gets an index ending in the primary key, for keyset pages."""

import django.db.models.deletion
from django.db import migrations, models

# Indexes Django created for db_index=True and foreign keys, by the names it gave them.
DROPPED = {
    "runs_run_benchmark_id_2bafda13": "benchmark_id",
    "runs_run_digest_58bc5902": "digest",
    "runs_run_digest_58bc5902_like": "digest",
    "runs_run_environment_id_d21696ec": "environment_id",
    "runs_run_evidence_67d327b4": "evidence",
    "runs_run_evidence_67d327b4_like": "evidence",
    "runs_run_group_id_8ff1b68b": "group_id",
    "runs_run_implementation_id_de53e092": "implementation_id",
    "runs_run_protocol_id_ac1d0d9e": "protocol_id",
    "runs_run_public_id_4bb7fe14": "public_id",
    "runs_run_public_id_4bb7fe14_like": "public_id",
    "runs_run_publication_id_ab6d5ad0": "publication_id",
    "runs_run_source_id_b4db6304": "source_id",
    "runs_run_workload_id_0d4d34f0": "workload_id",
}


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0005_data_version"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="run",
            name="run_source_external",
        ),
        migrations.RemoveIndex(
            model_name="run",
            name="run_bench_pass_metric",
        ),
        migrations.RemoveIndex(
            model_name="run",
            name="run_observed",
        ),
        migrations.RemoveIndex(
            model_name="run",
            name="run_created",
        ),
        migrations.RemoveIndex(
            model_name="run",
            name="run_median",
        ),
        migrations.RemoveIndex(
            model_name="run",
            name="run_rank",
        ),
        # Only the state changes through AlterField: on PostgreSQL, AlterField(db_index=False)
        # drops every single-column index it finds on the column, which for public_id includes
        # the run_one_current_revision constraint. The database side drops exactly the indexes
        # Django named when it created them (the same names on every backend; the _like ones
        # exist on PostgreSQL only, and going back does not recreate them: no query reads a
        # prefix pattern of these columns).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="benchmark",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="runs.benchmark",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="digest",
                    field=models.CharField(max_length=71),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="environment",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="runs.environment",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="evidence",
                    field=models.CharField(
                        choices=[
                            ("reported", "Reported"),
                            ("checked", "Checked"),
                            ("reproduced", "Reproduced"),
                            ("not-reproduced", "Not reproduced"),
                            ("incorrect", "Incorrect"),
                            ("controlled", "Controlled"),
                        ],
                        default="reported",
                        max_length=16,
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="group",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="runs.comparisongroup",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="implementation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="runs.implementation",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="protocol",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="runs.protocol",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="public_id",
                    field=models.CharField(max_length=8),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="publication",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="runs.publication",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="source",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="runs.source",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="workload",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="runs.workload",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    [f'DROP INDEX IF EXISTS "{name}"' for name in DROPPED],
                    reverse_sql=[
                        f'CREATE INDEX IF NOT EXISTS "{name}" ON "runs_run" ("{column}")'
                        for name, column in DROPPED.items()
                        if not name.endswith("_like")
                    ],
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["publication"], name="run_publication"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["workload"], name="run_workload"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["evidence"], name="run_evidence"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("is_current", True)),
                fields=["median", "id"],
                name="run_median_id",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("is_current", True)),
                fields=["observed_at", "id"],
                name="run_observed_id",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("is_current", True)),
                fields=["created_at", "id"],
                name="run_created_id",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("is_current", True)), fields=["rank", "id"], name="run_rank_id"
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("is_current", True)),
                fields=["benchmark", "observed_at", "id"],
                name="run_bench_observed",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("is_current", True)),
                fields=["benchmark", "median", "id"],
                name="run_bench_median",
            ),
        ),
    ]
