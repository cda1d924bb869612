"""A bad setting fails the cold start; the logs carry the events and never the bodies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tests.integration.conftest import log_lines, minutes_ago

ROOT = Path(__file__).resolve().parents[2]


def import_handler(
    code: str = "import converse_history.handler", **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'functions'}{os.pathsep}{ROOT}",
        "TABLE_NAME": "conversation-memory",
        "COMPACTION_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/compaction",
        "RULES_FILE": str(ROOT / "rules.example.json"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_handler_imports_with_good_settings():
    result = import_handler()
    assert result.returncode == 0, result.stderr


def test_the_handler_imports_no_xray_recorder():
    # Lambda's active tracing records each invocation; the X-Ray SDK's recorder at
    # import cost a fifth of the cold start (docs/performance.md).
    result = import_handler(
        "import sys, converse_history.handler; print(sorted(m for m in sys.modules "
        "if m.startswith('aws_xray_sdk')))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_window_below_twice_the_fold_fails_the_cold_start_with_the_reason():
    result = import_handler(MEMORY_FOLD_MIN_TOKENS="4000")
    assert result.returncode != 0
    assert "InvalidSettings" in result.stderr
    assert "HISTORY_WINDOW_MAX_TOKENS (4000) must be >= 2x MEMORY_FOLD_MIN_TOKENS (4000)" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"TABLE_NAME": ""}, "TABLE_NAME"),
        ({"RULES_SOURCE": "appconfig"}, "APPCONFIG_APPLICATION"),
        ({"HISTORY_WINDOW_FLOOR_MESSAGES": "30"}, "HISTORY_WINDOW_FLOOR_MESSAGES"),
    ],
)
def test_a_bad_environment_fails_the_cold_start_naming_the_variable(env, named):
    result = import_handler(**env)
    assert result.returncode != 0
    assert named in result.stderr


def test_bad_rules_fail_the_cold_start_naming_the_tenant_and_field(tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"tenants": {"acme": {"historyDays": 0}}}))
    result = import_handler(RULES_FILE=str(rules))
    assert result.returncode != 0
    assert "tenant 'acme', field historyDays" in result.stderr


def test_a_bounded_window_is_logged_with_its_figures_and_no_message_text(api, logs, capsys):
    start = minutes_ago(80)
    secret = "the client's privileged instructions"
    for n in range(30):
        api.converse(f"{secret} {n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n))
        api.reply(
            f"{secret} reply {n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n + 1)
        )
    logs.seek(0)
    logs.truncate()
    capsys.readouterr()
    _, body = api.converse(f"{secret}, again", tenant="roomy")
    output = logs.getvalue() + capsys.readouterr().out
    bounded = [
        r for r in log_lines(output) if r.get("message") == "converse_history_window_bounded"
    ]
    assert len(bounded) == 1
    assert bounded[0]["kept"] == body["window"]["kept"] == 24
    assert bounded[0]["dropped"] == body["window"]["dropped"] == 36
    assert bounded[0]["estimatedTokens"] == body["window"]["estimatedTokens"]
    assert bounded[0]["level"] == "INFO"
    assert secret not in output
    metrics = [r for r in log_lines(output) if "_aws" in r]
    assert metrics[-1]["HistoryMessagesDropped"] == [36.0]


def test_a_turn_held_by_neither_fold_nor_window_is_logged_as_a_coverage_gap(api, logs, capsys):
    start = minutes_ago(80)
    for n in range(30):
        api.converse(f"q{n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n))
        api.reply(f"a{n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n + 1))
    logs.seek(0)
    logs.truncate()
    capsys.readouterr()
    api.converse("no compactor has run", tenant="roomy")
    records = log_lines(logs.getvalue() + capsys.readouterr().out)
    gaps = [r for r in records if r.get("message") == "converse_history_coverage_gap"]
    assert len(gaps) == 1
    assert gaps[0]["missingTurns"] >= 1
    assert any(r.get("CoverageGaps") == [1.0] for r in records if "_aws" in r)


def test_the_handler_makes_no_sqs_client_until_a_compaction_is_requested(make_api):
    api = make_api()
    queue = api.handler.SERVICE._queue

    def client_made() -> bool:
        return queue._client is not None

    assert not client_made()
    api.converse("hello")
    assert not client_made()  # nothing to fold yet: no client
    for n in range(14):  # past the fold's turn trigger
        api.converse(f"message {n}")
    assert client_made()
    assert api.queued()
