"""Ranks inside comparison groups, computed by the database."""

from __future__ import annotations

from django.db import connection

from runs.models import ComparisonGroup, Publication, Run


def rank_publication(publication: Publication) -> None:
    """Rank every current run of a publication inside its comparison group, in the database.

    RANK() gives tied medians the same rank. Both PostgreSQL and SQLite (3.33+) take
    UPDATE ... FROM with a window function in the subquery. Only a run whose rank changes (and
    a group whose size changes) is written: rewriting a wide run row costs an entry in each of
    its indexes, and the ingest inserts new runs already ranked, so usually nothing changes.
    """
    run_table = Run._meta.db_table
    group_table = ComparisonGroup._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {run_table} SET rank = ranked.r
            FROM (
                SELECT id, RANK() OVER (PARTITION BY group_id ORDER BY median) AS r
                FROM {run_table} WHERE publication_id = %s AND is_current
            ) AS ranked
            WHERE {run_table}.id = ranked.id
              AND ({run_table}.rank IS NULL OR {run_table}.rank <> ranked.r)
            """,
            [publication.pk],
        )
        cursor.execute(
            f"""
            UPDATE {group_table} SET size = counted.n
            FROM (
                SELECT group_id, COUNT(*) AS n FROM {run_table}
                WHERE publication_id = %s AND is_current
                GROUP BY group_id
            ) AS counted
            WHERE {group_table}.id = counted.group_id AND {group_table}.size <> counted.n
            """,
            [publication.pk],
        )
