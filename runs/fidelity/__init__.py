"""How faithfully the runner measures what a source's own benchmark script measures: the
fidelity table per source (data/fidelity/<source>.json, written by bench/fidelity/compare.py
from the runner and upstream's script run on one machine), its page and API, and the lookup
the evidence rule asks before it gives a timing or memory verdict (runs/evidence.py)."""
