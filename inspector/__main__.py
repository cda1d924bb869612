"""`python -m inspector --api-url URL`: the inspector's page on loopback, against a deployed
stack, its reads signed with the usual AWS credentials (see `inspector.server`)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLIENT_SOURCE = REPO_ROOT / "client" / "src"
EXIT_REFUSED_TO_START = 2


def ensure_client_importable() -> None:
    """The client package from this checkout, unless it is installed: `python -m inspector`
    then works from the repository root with nothing but the runtime requirements."""
    if importlib.util.find_spec("conversation_memory_client") is None:
        sys.path.insert(0, str(CLIENT_SOURCE))


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m inspector",
        description="Serve the conversation-memory inspector on loopback, reading a deployed "
        "stack's API with SigV4-signed GETs.",
    )
    parser.add_argument(
        "--api-url", required=True, help="the stack's ApiUrl output, stage included"
    )
    parser.add_argument("--port", type=int, default=8100, help="default: %(default)s")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="a loopback address to listen on: 127.0.0.1 (the default), ::1 or localhost",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = arguments(argv)
    ensure_client_importable()
    from conversation_memory_client import NotConfigured  # noqa: PLC0415 (after the path)
    from inspector.server import (  # noqa: PLC0415
        InspectorServer,
        NotLoopback,
        loopback_address,
        signed_transport,
    )

    try:
        host = loopback_address(options.host)  # before anything reads the AWS configuration
        server = InspectorServer((host, options.port), signed_transport(options.api_url))
    except (NotLoopback, NotConfigured) as refusal:
        print(f"inspector: cannot start: {refusal}", file=sys.stderr, flush=True)
        return EXIT_REFUSED_TO_START
    except OSError as error:
        print(
            f"inspector: cannot listen on {options.host}:{options.port}: {error.strerror or error}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_REFUSED_TO_START
    print(f"inspector on {server.url}/inspect, reading {options.api_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopping", flush=True)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
