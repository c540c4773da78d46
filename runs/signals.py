"""What runs announces, for the apps built on it (watching, in attestations): runs never
imports them, they connect receivers here (docs/architecture.md, "The extension point").

Each is sent after the write it announces has committed (transaction.on_commit), once per
ingest or sync, never per run, with ids rather than model instances:

- `publications_ingested(source_id, publication_ids, step_ids, trigger)`: files of a source
  created or revised runs in these publications; the change rule then found these new steps
  (CellChange ids, regressions and improvements that were not steps before).
- `evidence_moved(event_id)`: a controlled rerun's verdict moved a run's evidence level.
"""

from __future__ import annotations

from django.dispatch import Signal

publications_ingested = Signal()
evidence_moved = Signal()
