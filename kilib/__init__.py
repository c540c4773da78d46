"""What the apps share and no app owns: the origin of absolute links, JSON read within bounds,
the API's JSON parser and schema hooks, the site's error pages and its site-wide request rules.

It imports no app (tests/kilib/test_imports.py holds it to that), so every app may import it
and it sits below them all; the project package (kernelindex/) composes the apps on top.
"""
