"""After a SnapStart restore: randomness re-seeded, connections dropped, caches renewed."""

from __future__ import annotations

import random

from snapshot_restore_py import get_after_restore, get_before_snapshot

from converse_history.snapstart import prepare_snapshot, register_renewal, renew_after_restore


class Connection:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def close(self) -> None:
        self.log.append(f"close {self.name}")


class Cache:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def renew(self) -> None:
        self.log.append(f"renew {self.name}")


def test_every_restored_environment_draws_its_own_random_numbers():
    random.seed(20_261_202)
    snapshot = random.getstate()
    as_in_the_snapshot = [random.random() for _ in range(4)]
    random.setstate(snapshot)  # a second environment restored from the same snapshot
    renew_after_restore([], [])
    assert [random.random() for _ in range(4)] != as_in_the_snapshot


def test_each_connection_is_closed_and_each_cache_renewed_once():
    log: list[str] = []
    renew_after_restore(
        [Connection(log, "dynamodb"), Connection(log, "sqs")], [Cache(log, "rules")]
    )
    assert log == ["close dynamodb", "close sqs", "renew rules"]


def test_the_renewal_is_registered_as_lambda_runs_it_after_a_restore():
    log: list[str] = []
    before = len(get_after_restore())
    register_renewal(connections=[Connection(log, "dynamodb")], caches=[Cache(log, "rules")])
    registered = get_after_restore()[before:]
    assert len(registered) == 1
    for hook, args, kwargs in registered:  # as the runtime calls them
        hook(*args, **kwargs)
    assert log == ["close dynamodb", "renew rules"]
    del get_after_restore()[before:]


def test_what_waits_for_first_use_is_loaded_before_the_snapshot():
    loaded: list[str] = []
    before = len(get_before_snapshot())
    prepare_snapshot(lambda: loaded.append("protocol"), lambda: loaded.append("document"))
    registered = get_before_snapshot()[before:]
    for hook, args, kwargs in registered:
        hook(*args, **kwargs)
    assert sorted(loaded) == ["document", "protocol"]
    del get_before_snapshot()[before:]
