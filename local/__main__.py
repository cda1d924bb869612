"""`python -m local`: the local runner (`make run`)."""

from __future__ import annotations

from local.runner import main

if __name__ == "__main__":
    raise SystemExit(main())
