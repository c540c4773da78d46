"""Watching: a signed-in user follows a benchmark, a cell or a source and hears about new
publications, detected regressions or improvements, evidence-level changes and new approved
attestations, by email (one per user per sync) and in Atom feeds (runs/pages/feeds.py serves
the public ones). runs announces what happened through runs.signals; nothing in runs knows
this package."""
