"""The embedded AWS emulation: a moto server on a free loopback port of its own.

moto's DynamoDB backend checks a transaction's conditions and applies its
writes without a lock, so two requests served at once can both pass a
condition that only one of them should (a lost update DynamoDB itself never
allows). This server answers one request at a time, which gives the
emulation DynamoDB's per-item atomicity; the clients still race each other
between their reads and their conditional writes, which is what the
optimistic locking is there for.
"""

from __future__ import annotations

import threading
import urllib.request

from moto.server import (  # type: ignore[attr-defined]
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

from local import moto_dynamodb


class Emulator:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        moto_dynamodb.install()
        self._server: BaseWSGIServer = make_server(
            host,
            port,
            DomainDispatcherApplication(create_backend_app),
            threaded=False,
            request_handler=MotoRequestHandler,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="aws-emulator", daemon=True
        )

    @property
    def endpoint_url(self) -> str:
        return f"http://{self._server.host}:{self.port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> Emulator:
        self._thread.start()
        return self

    def reset(self) -> None:
        """Forget every resource (moto's state lives in the process, across servers)."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
