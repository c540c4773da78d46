"""Each run's history key (its comparison cell and its provider), written with the row from now
on and filled here for the runs already there, one UPDATE joined to the groups and the
implementations; then the index a run page's cell history reads instead of one probe per
comparison group. run_group_rank loses the history's columns: the history no longer reads it.
Reversible: going back drops the index and the column and restores the old run_group_rank."""

from django.db import migrations, models

FILL = {
    # A join on PostgreSQL (one pass over each table), a subquery per row elsewhere (SQLite).
    "postgresql": (
        "UPDATE runs_run AS r SET history_key = g.cell_key || '/' || i.provider_key "
        "FROM runs_comparisongroup AS g, runs_implementation AS i "
        "WHERE g.id = r.group_id AND i.id = r.implementation_id"
    ),
    "other": (
        "UPDATE runs_run SET history_key = "
        "(SELECT cell_key FROM runs_comparisongroup WHERE id = runs_run.group_id) || '/' || "
        "(SELECT provider_key FROM runs_implementation WHERE id = runs_run.implementation_id)"
    ),
}


def fill(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute(FILL.get(connection.vendor, FILL["other"]))


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0010_history_index_only"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="run",
            name="run_group_rank",
        ),
        # ALTER TABLE ... ADD COLUMN, on SQLite too: Django's AddField would rebuild runs_run
        # there, which the version triggers of the tables that name a run refuse.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE runs_run ADD COLUMN history_key varchar(136) DEFAULT '' NOT NULL",
                    "ALTER TABLE runs_run DROP COLUMN history_key",
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="run",
                    name="history_key",
                    field=models.CharField(default="", editable=False, max_length=136),
                ),
            ],
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["group", "rank"], name="run_group_rank"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("is_current", True)),
                fields=["history_key", "observed_at"],
                include=("median", "public_id", "publication", "source", "id"),
                name="run_history",
            ),
        ),
    ]
