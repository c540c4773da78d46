"""A local HTTP server standing in for upstream (127.0.0.1 only): each path serves bytes,
a 404, a truncated body, or answers slowly."""

from __future__ import annotations

import http.server
import threading
import time
from contextlib import contextmanager


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, tuple[str, bytes]] = {}

    def do_GET(self):  # noqa: N802 (http.server's name)
        mode, body = self.server.routes.get(self.path, ("404", b""))
        if mode == "404":
            self.send_error(404)
            return
        if mode == "slow":
            time.sleep(1.0)
        self.send_response(200)
        # A truncated download: the server announces more bytes than it sends, then closes.
        self.send_header("Content-Length", str(len(body) + (100 if mode == "truncate" else 0)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the slow case)
        self.close_connection = True

    def log_message(self, *args):
        pass


@contextmanager
def upstream_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.routes = {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
