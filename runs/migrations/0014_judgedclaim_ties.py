"""Claims judged on the basis they were published (docs/evidence.md, "Claims re-judged"): tie
verdicts, and the device-time ratio beside the wall-clock one."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0013_cellchange_transient"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgedclaim",
            name="device_ratio",
            field=models.FloatField(
                blank=True,
                help_text="latency: other / better by the cold device times",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="judgedclaim",
            name="controlled_ratio",
            field=models.FloatField(help_text="other / better on the claim's own basis"),
        ),
        migrations.AlterField(
            model_name="judgedclaim",
            name="severity",
            field=models.PositiveSmallIntegerField(
                help_text="0 reversed, 1 overstated, 2 tie broken, 3 understated, 4 holds, "
                "5 tie confirmed"
            ),
        ),
        migrations.AlterField(
            model_name="judgedclaim",
            name="verdict",
            field=models.CharField(
                choices=[
                    ("holds", "Holds"),
                    ("overstated", "Overstated"),
                    ("understated", "Understated"),
                    ("reversed", "Reversed"),
                    ("tie-confirmed", "Tie confirmed"),
                    ("tie-broken", "Tie broken"),
                ],
                max_length=16,
            ),
        ),
    ]
