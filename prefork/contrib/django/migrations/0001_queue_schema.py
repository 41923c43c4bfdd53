"""`manage.py migrate` creates the queue's tables: prefork's own migrator (the
packaged schema/*.sql, each version once) run on the database being migrated."""
from typing import Any

from django.db import migrations  # type: ignore[import-untyped, import-not-found, unused-ignore]


def apply_queue_schema(apps: Any, schema_editor: Any) -> None:
    from prefork.contrib.django.runner import migrate_database
    migrate_database(schema_editor.connection)


class Migration(migrations.Migration):  # type: ignore[misc]
    # prefork's migrator writes on a connection of its own: Django's must hold no
    # transaction meanwhile (on SQLite it would lock the file against it).
    atomic = False
    dependencies: list[tuple[str, str]] = []
    operations = [migrations.RunPython(apply_queue_schema, migrations.RunPython.noop,
                                       elidable=False)]
