"""The change rule's transient kind (docs/changes.md): a level that came back within a few
publications, stored once at its first publication with its last one in `until`."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0012_tallies"),
    ]

    operations = [
        migrations.AddField(
            model_name="cellchange",
            name="until",
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="runs.publication"),
        ),
        migrations.AlterField(
            model_name="cellchange",
            name="after",
            field=models.FloatField(help_text="Median of the new level, in the run's unit"),
        ),
        migrations.AlterField(
            model_name="cellchange",
            name="kind",
            field=models.CharField(choices=[("step", "step"), ("transient", "transient, back within a few publications"), ("outlier", "outlier, reverted at the next publication"), ("pending", "pending the next publication")], max_length=9),
        ),
    ]
