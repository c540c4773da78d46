"""Changes across a source's publications: where a cell's median moved beyond what its own
history explains (docs/changes.md has the rule and its measured false-alarm behaviour).

The whole concern lives here: the rule (detect.py), what it found (models.py) and the reads of
it (querysets.py), the writes (services.py), the parts pages show (pages.py), the source's
changes page (views.py), the Atom feeds (feeds.py), the API list (api.py, serializers.py) and
their URLs (urls.py)."""
