# An earlier release told listening processes of each version move (LISTEN/NOTIFY, 2026-12-03 to
# 2026-12-06); none listen now. Its triggers were made after migrate, not by a migration.
from django.db import migrations


def drop_notify(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    table = apps.get_model("runs", "Version")._meta.db_table
    for suffix in ("_row", "_reset"):
        schema_editor.execute(f"DROP TRIGGER IF EXISTS ki_version_notify{suffix} ON {table}")
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {table}_notify()")


class Migration(migrations.Migration):
    dependencies = [("runs", "0019_workload_publication_index")]

    operations = [migrations.RunPython(drop_notify, migrations.RunPython.noop)]
