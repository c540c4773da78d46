"""Print the diagnostics of a few result files, one line each (used to check a device run)."""

import json
import sys

for path in sys.argv[1:]:
    p = json.load(open(path))["payload"]
    m = p.get("measurement") or {}
    d = m.get("diagnostics") or {}
    c = d.get("classification") or {}
    dev = d.get("device") or {}
    print(
        path.split("/")[-1][:48],
        p["status"],
        f"doBench={m.get('median')}",
        f"device={dev.get('median')} ({dev.get('method')}, range {dev.get('relativeRange')})",
        f"host={(d.get('hostEnqueue') or {}).get('median')}",
        f"flush={(d.get('flush') or {}).get('median')}",
        c.get("kind"),
        d.get("throttled"),
        dev.get("graphRefused") or d.get("error") or "",
        (p.get("error") or "")[:200],
    )
