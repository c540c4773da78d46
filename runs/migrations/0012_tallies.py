"""The tallies behind the home page's counts (runs/read/tallies.py). Their triggers are installed,
and every tally counted, after migrate; going back drops the triggers before the table."""

from django.db import migrations, models


def triggers_drop(apps, schema_editor):
    from runs.read import tallies

    tallies.uninstall(apps, schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0011_run_history_key"),
    ]

    operations = [
        migrations.CreateModel(
            name="Tally",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),  # noqa: E501
                ("benchmark_id", models.BigIntegerField()),
                ("environment_id", models.BigIntegerField()),
                ("source_id", models.BigIntegerField()),
                ("runs", models.BigIntegerField(default=0)),
                ("groups", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("benchmark_id", "environment_id", "source_id"),
                        name="tally_unique_cell",
                    )
                ],
            },
        ),
        # Forwards the triggers come with post_migrate (tallies.install); backwards they go first.
        migrations.RunPython(migrations.RunPython.noop, triggers_drop, elidable=False),
    ]
