"""Changes across a source's publications: where a cell's median moved beyond what its own
history explains (docs/changes.md has the rule and its measured false-alarm behaviour)."""
