"""What a SnapStart restore must renew before the first call it serves.

With SnapStart, Lambda runs the module's import once, when a version is
published, and starts every later execution environment from a snapshot of
it, perhaps days later and many at once. What the import made that must be
unique, or that time wears out, is renewed here, in Lambda's after-restore
hook (the `snapshot_restore_py` library, part of the Python runtimes):

- Python's `random` state: every environment restored from one snapshot
  would draw the same numbers, so their retry jitter (botocore's and the
  commit's backoff) would collide instead of spreading.
- Connections: a pooled connection in the snapshot points at a peer that
  closed it long ago. Each client's pool is emptied; the next call opens a
  fresh one. (Credentials need nothing: under SnapStart Lambda serves them
  from its container endpoint, and botocore refreshes them as they expire.)
- The rules' cache: its AppConfig session token may have expired, and the
  clock its retry wait reads is not the snapshot's (see `renew()`).

Before the snapshot, what the import left for first use is loaded, so that
no restored environment pays for it. Without SnapStart neither hook is
called, and registering them costs nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol

from snapshot_restore_py import register_after_restore, register_before_snapshot


class Closable(Protocol):
    def close(self) -> None:
        """Drop pooled connections; the next request opens a new one."""


class Renewable(Protocol):
    def renew(self) -> None:
        """Start again after a restore: fresh sessions, fresh clocks."""


def renew_after_restore(connections: Sequence[Closable], caches: Sequence[Renewable]) -> None:
    random.seed()  # from os.urandom, which is unique to each restored environment
    for connection in connections:
        connection.close()
    for cache in caches:
        cache.renew()


def register_renewal(*, connections: Sequence[Closable], caches: Sequence[Renewable] = ()) -> None:
    """Have Lambda renew these after each restore from a snapshot (in registration order)."""
    register_after_restore(renew_after_restore, tuple(connections), tuple(caches))


def prepare_snapshot(*load: Callable[[], object]) -> None:
    """Have Lambda call each of these before it takes the snapshot: what they load is in it."""
    for step in load:
        register_before_snapshot(step)
