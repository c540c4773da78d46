"""One version per scope of what pages show (runs.read.freshness) instead of one for the whole
site. The old triggers wrote the single data-version row: they go first, with their function."""

from django.db import migrations, models

OLD = "kernelindex_data_changed"


def drop_old_triggers(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP FUNCTION IF EXISTS {OLD}() CASCADE")
        elif connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE %s",
                [f"{OLD}_%"],
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP TRIGGER IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_judged_claims"),
    ]

    operations = [
        migrations.RunPython(drop_old_triggers, migrations.RunPython.noop),
        migrations.DeleteModel(name="DataVersion"),
        migrations.CreateModel(
            name="Version",
            fields=[
                ("scope", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("value", models.BigIntegerField(default=0)),
                ("changed_at", models.DateTimeField(null=True)),
            ],
        ),
    ]
