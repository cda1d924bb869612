"""Where the tenants' rules come from, and how a new version replaces the old (SPEC 3, Reload).

Locally the rules are the file named by `RULES_FILE`, re-read on SIGHUP. In
AWS they are an AppConfig configuration fetched through Powertools Parameters,
whose cache age bounds how long a new deployment takes to apply, with no
redeploy. Both sources keep one promise: invalid rules at start fail the
start, and an invalid reload keeps the last good rules.

Nothing is logged or counted here. The handler owns the Powertools Logger and
Metrics, so a refused reload is handed to its `on_rejected` callback with a
reason naming the source, the tenant and the field, and the handler logs the
error and emits the metric.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Protocol

from memory_core.rules import InvalidRules, RulesDocument, load_rules_json, parse_rules

RejectionHandler = Callable[[str], None]
"""Receives why new rules were refused, while the last good rules keep being served."""

AppConfigFetch = Callable[[], bytes | str]
"""Returns the current configuration document as AppConfig holds it: JSON text, not yet parsed.

Not parsed, so that our strict reading sees it: Python's `json.loads` (which
Powertools' `transform="json"` uses) keeps the last of two equal keys.
"""


class RulesSource(Protocol):
    def current(self) -> RulesDocument:
        """The rules to apply to the request being served."""
        ...


class RulesUnavailable(RuntimeError):
    """No valid rules have ever been fetched, so there is nothing to serve with."""


class FileRulesSource:
    """The rules in a local file: read at start, re-read by `reload()` (or on SIGHUP).

    The constructor raises InvalidRules, naming the file and the reason (for
    invalid rules, each tenant and field), so a bad file fails the start.
    """

    def __init__(
        self, path: Path | str, turn_retention_days: int, on_rejected: RejectionHandler
    ) -> None:
        self._path = Path(path)
        self._turn_retention_days = turn_retention_days
        self._on_rejected = on_rejected
        self._rules = self._read()

    def current(self) -> RulesDocument:
        return self._rules

    def reload(self) -> bool:
        """Re-read the file: True when its rules now apply, False when they were refused.

        A refused file leaves the last good rules in place, and its reason goes
        to `on_rejected`.
        """
        try:
            rules = self._read()
        except InvalidRules as refusal:
            self._on_rejected(str(refusal))
            return False
        # One reference swap: a reader sees the old rules or the new, never a mix.
        self._rules = rules
        return True

    def install_sighup_reload(self, on_reloaded: Callable[[], None] | None = None) -> None:
        """Reload the file whenever the process receives SIGHUP; `on_reloaded` after a success.

        Call it from the main thread: Python installs signal handlers only
        there (`signal.signal` raises ValueError elsewhere) and runs them there,
        between two bytecodes, so `on_rejected` and `on_reloaded` are then
        called on the main thread too. It replaces any SIGHUP handler already
        installed.
        """

        def reload_on_signal(signum: int, frame: FrameType | None) -> None:
            if self.reload() and on_reloaded is not None:
                on_reloaded()

        signal.signal(signal.SIGHUP, reload_on_signal)

    def _read(self) -> RulesDocument:
        try:
            raw = self._path.read_bytes()
        except OSError as error:
            raise InvalidRules(f"{self._path}: cannot be read: {error.strerror or error}") from None
        try:
            return parse_rules(load_rules_json(raw), self._turn_retention_days)
        except InvalidRules as refusal:  # not UTF-8, not JSON, a key twice, or bad rules
            raise InvalidRules(f"{self._path}: {refusal}") from None


@dataclass(frozen=True, slots=True)
class _Fetched:
    """The last document fetched, and what came of it: its rules, or why it was refused."""

    document: bytes | str
    outcome: RulesDocument | str


class AppConfigRulesSource:
    """The rules deployed to AWS AppConfig, through Powertools Parameters.

    Powertools caches the document for `max_age_seconds`, so a new AppConfig
    deployment applies within that age, without a redeploy. The document is
    fetched as the bytes AppConfig holds, not through Powertools' JSON
    transform, and read by `load_rules_json`, which refuses a key given
    twice. It is parsed only when it differs from the last one fetched
    (Powertools hands back the same bytes object while cached, and equal
    bytes when nothing was deployed since), so the hot path costs an
    identity check.

    When a fetch fails or a new document is invalid, the last good rules keep
    being served and `on_rejected` gets the reason: once per refused document,
    and once per failed fetch. After a failed fetch the next attempt waits
    `max_age_seconds`, so an AppConfig outage does not add a failing call to
    every request. Before any good document there is nothing to serve:
    `current()` raises RulesUnavailable with the reason (and tries again on
    the next call). The handler calls `current()` once at cold start so that
    unusable rules fail the start.
    """

    def __init__(
        self,
        application: str,
        environment: str,
        profile: str,
        turn_retention_days: int,
        on_rejected: RejectionHandler,
        *,
        max_age_seconds: int = 45,
        fetch: AppConfigFetch | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._where = f"AppConfig {application}/{environment}/{profile}"
        self._application = application
        self._environment = environment
        self._profile = profile
        self._fetch: AppConfigFetch = fetch or self._get_app_config
        self._turn_retention_days = turn_retention_days
        self._on_rejected = on_rejected
        self._max_age_seconds = max_age_seconds
        self._clock = clock
        self._last_good: RulesDocument | None = None
        self._last_fetched: _Fetched | None = None
        self._next_attempt_after_failure = float("-inf")

    def current(self) -> RulesDocument:
        if self._last_good is not None and self._clock() < self._next_attempt_after_failure:
            return self._last_good
        try:
            document = self._fetch()
        except Exception as error:  # any failure of Powertools or boto3: keep what works
            self._next_attempt_after_failure = self._clock() + self._max_age_seconds
            return self._last_good_instead(
                f"{self._where}: cannot be fetched: {type(error).__name__}: {error}", report=True
            )
        last = self._last_fetched
        if last is not None and (document is last.document or document == last.document):
            if isinstance(last.outcome, RulesDocument):
                return last.outcome
            return self._last_good_instead(last.outcome, report=False)  # reported when first seen
        try:
            rules = parse_rules(load_rules_json(document), self._turn_retention_days)
        except InvalidRules as refusal:  # not UTF-8, not JSON, a key twice, or bad rules
            reason = f"{self._where}: {refusal}"
            self._last_fetched = _Fetched(document, reason)
            return self._last_good_instead(reason, report=True)
        self._last_fetched = _Fetched(document, rules)
        self._last_good = rules
        return rules

    def renew(self) -> None:
        """Start again after a SnapStart restore, and fetch the rules deployed now.

        The snapshot may be days old: its AppConfig session token has a 24-hour
        life, its connection is closed, and the monotonic clock a failed fetch's
        wait was set by belongs to the environment that took the snapshot. So
        Powertools' providers (their sessions and cached documents) are
        dropped and the wait forgotten. The fetch keeps the usual promise: when
        it fails, the last good rules are served and the reason reported.
        """
        from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 (see _get_app_config)

        parameters.clear_caches()  # type: ignore[no-untyped-call]  # Powertools leaves it untyped
        self._next_attempt_after_failure = float("-inf")
        self.current()

    def _get_app_config(self) -> bytes | str:
        """The configuration's bytes, from Powertools' cache, untransformed (see AppConfigFetch)."""
        # Imported here, not at the top: rules read from a file (the local runner) never
        # need Powertools Parameters and its providers, and a cold start should not load them.
        from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415

        document = parameters.get_app_config(
            name=self._profile,
            environment=self._environment,
            application=self._application,
            max_age=self._max_age_seconds,
        )
        if not isinstance(document, bytes | str):  # Powertools' AppConfigProvider returns bytes
            raise TypeError(f"expected the configuration's bytes, got {type(document).__name__}")
        return document

    def _last_good_instead(self, reason: str, *, report: bool) -> RulesDocument:
        if self._last_good is None:
            raise RulesUnavailable(reason)
        if report:
            self._on_rejected(reason)
        return self._last_good
