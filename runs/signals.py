"""What runs announces, for the apps built on it (watching, in attestations): runs never
imports them, they connect receivers here (docs/architecture.md, "The extension point").

Each is sent after the write it announces has committed (transaction.on_commit), once per
ingest or sync, never per run, with ids rather than model instances:

- `publications_ingested(source_id, publication_ids, step_ids, trigger)`: files of a source
  created or revised runs in these publications; the change rule then found these new steps
  (CellChange ids, regressions and improvements that were not steps before).
- `evidence_moved(event_id)`: a controlled rerun's verdict moved a run's evidence level.

One is sent inside the write's transaction, for a record that must commit with it:

- `change_reviewed(review_id, actor_id, from_state, to_state, reason)`: a maintainer
  acknowledged or dismissed a detected change (runs.changes.services.changes_review); the
  moderation trail (attestations) records it.
"""

from __future__ import annotations

from django.dispatch import Signal

publications_ingested = Signal()
evidence_moved = Signal()
change_reviewed = Signal()
