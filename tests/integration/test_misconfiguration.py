"""Misconfiguration: every setting and every rule field, with bad values, refused by name.

The full tables run in-process through the validators the handlers call at
import (`load_settings`, `load_environment`, `load_compactor_environment`,
`parse_rules`); a representative handful is then imported for real, in
subprocesses started side by side, to show that the cold start fails,
non-zero, with the field named in stderr. Bad rules arriving on a reload
(the file's SIGHUP, an AppConfig deployment) never replace the last good ones.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from compactor.environment import load_compactor_environment

from adapters.rules_source import AppConfigRulesSource, FileRulesSource
from converse_history.environment import load_environment
from memory_core.rules import InvalidRules, parse_rules
from memory_core.settings import COUNTS, FIELDS, InvalidSettings, load_settings
from tests.support.reliability import tally

ROOT = Path(__file__).resolve().parents[2]
RETENTION = 30
GOOD_RULES: dict[str, Any] = {
    "tenants": {
        "acme": {
            "historyDays": 30,
            "idleResetHours": 24,
            "maxTurnsPerConversation": 25,
            "rateLimit": {"messages": 20, "perSeconds": 60},
            "callers": ["arn:aws:iam::123456789012:role/acme-agent"],
        }
    }
}
GOOD_ENVIRONMENT = {
    "TABLE_NAME": "conversation-memory",
    "COMPACTION_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/compaction",
}

NOT_POSITIVE_INTEGERS = ["0", "-1", "1.5", "1e3", "0x10", "abc", "", " ", "true", "٣"]
"""What an operator might type where a positive integer belongs."""


def refusal(validate: Callable[[], object], error: type[Exception]) -> str:
    with pytest.raises(error) as refused:
        validate()
    return str(refused.value)


# --- service settings -----------------------------------------------------------------

CROSS_FIELD = [
    (
        {"HISTORY_WINDOW_FLOOR_MESSAGES": "26"},
        ["HISTORY_WINDOW_FLOOR_MESSAGES (26)", "HISTORY_WINDOW_MAX_MESSAGES (25)"],
    ),
    (
        {"HISTORY_WINDOW_MAX_TOKENS": "3999"},
        ["HISTORY_WINDOW_MAX_TOKENS (3999)", "MEMORY_FOLD_MIN_TOKENS (2000)"],
    ),
    (
        {"MEMORY_FOLD_MIN_TOKENS": "4000"},
        ["HISTORY_WINDOW_MAX_TOKENS (4000)", "MEMORY_FOLD_MIN_TOKENS (4000)"],
    ),
    (
        {"MEMORY_SUMMARY_MAX_TOKENS": "4001"},
        ["MEMORY_SUMMARY_MAX_TOKENS (4001)", "HISTORY_WINDOW_MAX_TOKENS (4000)"],
    ),
    (
        # Every problem at once, not the first only.
        {
            "HISTORY_WINDOW_MAX_MESSAGES": "5",
            "HISTORY_WINDOW_MAX_TOKENS": "1000",
            "MEMORY_SUMMARY_MAX_TOKENS": "1001",
        },
        [
            "HISTORY_WINDOW_FLOOR_MESSAGES (10)",
            "2x MEMORY_FOLD_MIN_TOKENS",
            "MEMORY_SUMMARY_MAX_TOKENS (1001)",
        ],
    ),
]


def test_every_setting_with_every_bad_value_is_refused_naming_the_variable():
    failures = []
    for name in COUNTS:
        variable = name.upper()
        for bad in NOT_POSITIVE_INTEGERS:
            try:
                load_settings({variable: bad})
            except InvalidSettings as refused:
                if f"{variable}: must be a positive integer (got {bad!r})" not in str(refused):
                    failures.append(f"{variable}={bad!r}: {refused}")
            else:
                failures.append(f"{variable}={bad!r}: accepted")
    assert not failures, "\n".join(failures)
    assert len(COUNTS) == 8  # a new number joins this table by itself
    tally("Misconfiguration", inputs_tried=len(COUNTS) * len(NOT_POSITIVE_INTEGERS))


NOT_TENANT_LISTS = ["acme,", ",acme", "acme,,globex", "acme globex", "acme;globex", "-acme"]
"""What an operator might type where comma-separated tenant ids belong."""


def test_every_bad_tenant_list_is_refused_naming_the_variable():
    failures = []
    for bad in [*NOT_TENANT_LISTS, "acme,acme", "a" * 65]:
        try:
            load_settings({"TENANT_USAGE_METRICS": bad})
        except InvalidSettings as refused:
            if "TENANT_USAGE_METRICS: comma-separated tenant ids expected: " not in str(refused):
                failures.append(f"{bad!r}: {refused}")
        else:
            failures.append(f"{bad!r}: accepted")
    assert not failures, "\n".join(failures)
    assert [name for name in FIELDS if name not in COUNTS] == ["tenant_usage_metrics"]
    tally("Misconfiguration", inputs_tried=len(NOT_TENANT_LISTS) + 2)


@pytest.mark.parametrize(("environ", "named"), CROSS_FIELD)
def test_settings_that_disagree_are_refused_naming_every_field_involved(environ, named):
    reason = refusal(lambda: load_settings(environ), InvalidSettings)
    for part in named:
        assert part in reason
    tally("Misconfiguration", inputs_tried=1)


def test_several_bad_settings_are_all_reported_at_once():
    environ = {name.upper(): "0" for name in COUNTS} | {"TENANT_USAGE_METRICS": "acme,"}
    reason = refusal(lambda: load_settings(environ), InvalidSettings)
    assert all(name.upper() in reason for name in FIELDS)
    tally("Misconfiguration", inputs_tried=1)


# --- resources: the converse Lambda's and the compactor's environment -----------------

ENVIRONMENT_ROWS: list[tuple[dict[str, str | None], str]] = [
    ({"TABLE_NAME": None}, "TABLE_NAME"),
    ({"TABLE_NAME": ""}, "TABLE_NAME"),
    ({"TABLE_NAME": "ab"}, "TABLE_NAME"),
    ({"TABLE_NAME": "t" * 256}, "TABLE_NAME"),
    ({"COMPACTION_QUEUE_URL": None}, "COMPACTION_QUEUE_URL"),
    ({"COMPACTION_QUEUE_URL": ""}, "COMPACTION_QUEUE_URL"),
    ({"RULES_SOURCE": "s3"}, "RULES_SOURCE"),
    ({"RULES_SOURCE": "APPCONFIG"}, "RULES_SOURCE"),
    ({"RULES_SOURCE": "appconfig"}, "APPCONFIG_APPLICATION"),
    (
        {"RULES_SOURCE": "appconfig", "APPCONFIG_APPLICATION": "memory"},
        "APPCONFIG_ENVIRONMENT, APPCONFIG_PROFILE",
    ),
    (
        {
            "RULES_SOURCE": "appconfig",
            "APPCONFIG_APPLICATION": "memory",
            "APPCONFIG_ENVIRONMENT": "prod",
            "APPCONFIG_PROFILE": "",
        },
        "APPCONFIG_PROFILE",
    ),
    ({"RULES_MAX_AGE_SECONDS": "0"}, "RULES_MAX_AGE_SECONDS"),
    ({"RULES_MAX_AGE_SECONDS": "soon"}, "RULES_MAX_AGE_SECONDS"),
    ({"CALLER_IDENTITY": "none"}, "CALLER_IDENTITY"),
    ({"CALLER_IDENTITY": ""}, "CALLER_IDENTITY"),
]

COMPACTOR_ROWS: list[tuple[dict[str, str | None], str]] = [
    ({"TABLE_NAME": None}, "TABLE_NAME"),
    ({"TABLE_NAME": ""}, "TABLE_NAME"),
    ({"TABLE_NAME": "ab"}, "TABLE_NAME"),
    ({"TABLE_NAME": "my table"}, "TABLE_NAME"),
    ({"TABLE_NAME": "memory/turns"}, "TABLE_NAME"),
    ({"SUMMARISER": "bedrock"}, "BEDROCK_MODEL_ID"),
    ({"SUMMARISER": "bedrock", "BEDROCK_MODEL_ID": ""}, "BEDROCK_MODEL_ID"),
    ({"SUMMARISER": "openai"}, "SUMMARISER"),
    ({"SUMMARISER": ""}, "SUMMARISER"),
]


def _with(base: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    merged: dict[str, str | None] = {**base, **changes}
    return {name: value for name, value in merged.items() if value is not None}


def test_every_bad_resource_setting_of_the_converse_lambda_is_refused_by_name():
    load_environment(GOOD_ENVIRONMENT)
    for changes, named in ENVIRONMENT_ROWS:
        environ = _with(GOOD_ENVIRONMENT, changes)
        assert named in refusal(functools.partial(load_environment, environ), InvalidSettings), (
            changes
        )
    tally("Misconfiguration", inputs_tried=len(ENVIRONMENT_ROWS))


def test_every_bad_resource_setting_of_the_compactor_is_refused_by_name():
    good = {"TABLE_NAME": "conversation-memory"}
    load_compactor_environment(good)
    load_compactor_environment({**good, "SUMMARISER": "bedrock", "BEDROCK_MODEL_ID": "m"})
    for changes, named in COMPACTOR_ROWS:
        environ = _with(good, changes)
        reason = refusal(functools.partial(load_compactor_environment, environ), InvalidSettings)
        assert named in reason, changes
    tally("Misconfiguration", inputs_tried=len(COMPACTOR_ROWS))


def test_a_table_name_dynamodb_would_refuse_fails_the_converse_lambdas_start():
    environ = {**GOOD_ENVIRONMENT, "TABLE_NAME": "my table"}
    assert "TABLE_NAME" in refusal(lambda: load_environment(environ), InvalidSettings)


# --- tenant rules -----------------------------------------------------------------------


def _tenant(**fields: Any) -> dict[str, Any]:
    return {"tenants": {"acme": fields}}


NOT_POSITIVE_WHOLE_NUMBERS: list[Any] = [0, -1, 1.5, 1.0, "30", True, None, [], {}]

RULE_ROWS: list[tuple[Any, str]] = [
    *[
        (_tenant(**{name: bad}), f"tenant 'acme', field {name}: must be a positive integer")
        for name in ("historyDays", "idleResetHours", "maxTurnsPerConversation")
        for bad in NOT_POSITIVE_WHOLE_NUMBERS
    ],
    (_tenant(historyDays=RETENTION + 1), "field historyDays: must be <= TURN_RETENTION_DAYS (30)"),
    *[
        (
            _tenant(rateLimit={"messages": 5, "perSeconds": 60, name: bad}),
            f"tenant 'acme', field rateLimit.{name}: must be a positive integer",
        )
        for name in ("messages", "perSeconds")
        for bad in NOT_POSITIVE_WHOLE_NUMBERS
    ],
    (_tenant(rateLimit=None), "tenant 'acme', field rateLimit: must be an object"),
    (_tenant(rateLimit=20), "tenant 'acme', field rateLimit"),
    (_tenant(rateLimit={}), "tenant 'acme', field rateLimit.messages: required"),
    (_tenant(rateLimit={"messages": 5}), "tenant 'acme', field rateLimit.perSeconds: required"),
    (
        _tenant(rateLimit={"messages": 5, "perSeconds": 60, "burst": 2}),
        "tenant 'acme', field rateLimit.burst: unknown field",
    ),
    (_tenant(callers="arn:aws:iam::123456789012:role/a"), "tenant 'acme', field callers"),
    (_tenant(callers=[5]), "tenant 'acme', field callers.0"),
    (_tenant(callers=["acme-agent"]), "tenant 'acme', field callers.0"),
    (_tenant(callers=["arn:aws:iam::12345678901:role/a"]), "tenant 'acme', field callers.0"),
    (_tenant(callers=["arn:aws:s3:::bucket"]), "tenant 'acme', field callers.0"),
    (_tenant(callers=["arn:aws:iam::123456789012:role/a b"]), "tenant 'acme', field callers.0"),
    (_tenant(historyDayz=7), "tenant 'acme', field historyDayz: unknown field"),
    (_tenant(HistoryDays=7), "tenant 'acme', field HistoryDays: unknown field"),
    (_tenant(maxTurns=7), "tenant 'acme', field maxTurns: unknown field"),
    (_tenant(idle_reset_hours=7), "tenant 'acme', field idle_reset_hours: unknown field"),
    *[
        ({"tenants": {bad: {}}}, "tenant id must match")
        for bad in ["", "a b", "-acme", "_acme", "t" * 65, "ac.me", "acmé", "ac/me"]
    ],
    ({"tenants": {"acme": 5}}, "tenant 'acme'"),
    ({"tenants": {"acme": []}}, "tenant 'acme'"),
    ({"tenants": {"acme": None}}, "tenant 'acme'"),
    ({}, "field tenants: required"),
    ({"tenants": []}, "field tenants"),
    ({"tenants": {}, "defaults": {}}, "field defaults: unknown field"),
    ([], "document"),
    ("acme", "document"),
    (None, "document"),
    (
        {"tenants": {"acme": {"historyDays": 0}, "globex": {"maxTurnsPerConversation": -2}}},
        "tenant 'globex', field maxTurnsPerConversation",
    ),
]


def test_every_bad_rule_is_refused_naming_tenant_and_field():
    parse_rules(GOOD_RULES, RETENTION)
    failures = []
    for document, named in RULE_ROWS:
        try:
            parse_rules(document, RETENTION)
        except InvalidRules as refused:
            if named not in str(refused):
                failures.append(f"{document!r}: {refused} (expected {named!r})")
        else:
            failures.append(f"{document!r}: accepted")
    assert not failures, "\n".join(failures)
    tally("Misconfiguration", inputs_tried=len(RULE_ROWS))


def test_history_days_are_held_to_the_retention_whatever_it_is():
    assert parse_rules(_tenant(historyDays=7), 7)
    reason = refusal(lambda: parse_rules(_tenant(historyDays=8), 7), InvalidRules)
    assert "field historyDays: must be <= TURN_RETENTION_DAYS (7)" in reason
    # The default (30) is held to it too: a short retention needs historyDays written.
    reason = refusal(lambda: parse_rules(_tenant(), 7), InvalidRules)
    assert "field historyDays" in reason
    tally("Misconfiguration", inputs_tried=3)


def test_every_bad_rule_on_a_file_reload_keeps_the_last_good_rules(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(GOOD_RULES))
    rejected: list[str] = []
    source = FileRulesSource(path, RETENTION, rejected.append)
    good = source.current()
    for document, named in RULE_ROWS:
        path.write_text(json.dumps(document))
        assert source.reload() is False, document
        assert source.current() is good
        assert rejected[-1].startswith(f"{path}: invalid rules: ")
        assert named in rejected[-1]
    assert len(rejected) == len(RULE_ROWS)
    # Not JSON, not UTF-8, or gone: refused the same way.
    for raw in [b'{"tenants": {', b'{"tenants": {"\xff": {}}}']:
        path.write_bytes(raw)
        assert source.reload() is False
    path.unlink()
    assert source.reload() is False
    assert source.current() is good
    path.write_text(json.dumps(_tenant(historyDays=3)))
    assert source.reload() is True
    assert source.current().tenants["acme"].history_days == 3
    tally("Misconfiguration", inputs_tried=len(RULE_ROWS) + 3)


def test_every_bad_rule_deployed_to_appconfig_keeps_the_last_good_rules():
    deployed: list[Any] = [GOOD_RULES]
    rejected: list[str] = []
    source = AppConfigRulesSource(
        "memory",
        "prod",
        "tenant-rules",
        RETENTION,
        rejected.append,
        fetch=lambda: json.dumps(deployed[0]).encode(),  # the configuration's bytes
    )
    good = source.current()
    for document, named in RULE_ROWS:
        deployed[0] = document
        assert source.current() is good
        assert named in rejected[-1], document
    assert len(rejected) == len(RULE_ROWS)
    tally("Misconfiguration", inputs_tried=len(RULE_ROWS))


# --- the cold start, for real: a handful of imports in subprocesses -------------------


def _rules_file(tmp: Path, name: str, document: Any) -> str:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(document))
    return str(path)


def _import(module: str, env: Mapping[str, str | None]) -> subprocess.CompletedProcess[str]:
    base = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'functions'}{os.pathsep}{ROOT}",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "RULES_FILE": str(ROOT / "rules.example.json"),
        **GOOD_ENVIRONMENT,
    }
    for name in [*FIELDS, "SUMMARISER", "BEDROCK_MODEL_ID", "RULES_SOURCE"]:
        base.pop(name.upper(), None)
    environment = _with(base, env)
    return subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


CONVERSE = "converse_history.handler"
COMPACTOR = "compactor.handler"


@pytest.fixture(scope="module")
def cold_starts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every import below, two at a time (the machine has two cores); results by label."""
    tmp = tmp_path_factory.mktemp("cold-starts")
    rows: dict[str, tuple[str, dict[str, str | None]]] = {
        "converse, good": (CONVERSE, {}),
        "converse, max messages 0": (CONVERSE, {"HISTORY_WINDOW_MAX_MESSAGES": "0"}),
        "converse, tenant usage metrics": (CONVERSE, {"TENANT_USAGE_METRICS": "acme,"}),
        "converse, rate limit": (
            CONVERSE,
            {
                "RULES_FILE": _rules_file(
                    tmp, "rate", _tenant(rateLimit={"messages": 5, "perSeconds": 0})
                )
            },
        ),
        "converse, history above retention": (
            CONVERSE,
            {
                "TURN_RETENTION_DAYS": "10",
                "RULES_FILE": _rules_file(tmp, "days", _tenant(historyDays=20)),
            },
        ),
        "compactor, good": (COMPACTOR, {"TABLE_NAME": "conversation-memory"}),
        "compactor, bedrock without model": (COMPACTOR, {"SUMMARISER": "bedrock"}),
        "compactor, table name": (COMPACTOR, {"TABLE_NAME": "my table"}),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(rows, pool.map(lambda row: _import(*row), rows.values()), strict=True))


COLD_STARTS = [
    ("converse, max messages 0", "HISTORY_WINDOW_MAX_MESSAGES: must be a positive integer"),
    ("converse, tenant usage metrics", "TENANT_USAGE_METRICS: comma-separated tenant ids"),
    ("converse, rate limit", "tenant 'acme', field rateLimit.perSeconds"),
    ("converse, history above retention", "must be <= TURN_RETENTION_DAYS (10)"),
    ("compactor, bedrock without model", "BEDROCK_MODEL_ID"),
    ("compactor, table name", "TABLE_NAME"),
]


@pytest.mark.parametrize("handler", ["converse", "compactor"])
def test_both_handlers_start_with_good_settings(cold_starts, handler):
    result = cold_starts[f"{handler}, good"]
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("label", "named"), COLD_STARTS, ids=[row[0] for row in COLD_STARTS])
def test_a_bad_setting_or_rule_fails_the_cold_start_naming_the_field(cold_starts, label, named):
    result = cold_starts[label]
    assert result.returncode != 0
    assert named in result.stderr, result.stderr[-2000:]
    # The refusal is what ended the process, not something before it.
    assert re.match(r"^[\w.]+\.(InvalidSettings|InvalidRules): ", result.stderr.splitlines()[-1])
    tally("Misconfiguration", inputs_tried=1)
