"""The synth itself: settings validated, cdk-nag enforced, offline, and `make synth`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from infra.stack import ConversationMemoryStack
from memory_core.rules import InvalidRules
from memory_core.settings import InvalidSettings
from tests.infra.conftest import of_type, synthesise

ROOT = Path(__file__).resolve().parents[2]


def test_a_window_below_twice_the_fold_in_context_fails_the_synth_with_the_reason():
    with pytest.raises(InvalidSettings, match=r"HISTORY_WINDOW_MAX_TOKENS \(4000\) must be >= 2x"):
        synthesise({"MEMORY_FOLD_MIN_TOKENS": "4000"})


def test_a_window_below_twice_the_fold_in_the_environment_fails_the_synth(monkeypatch):
    monkeypatch.setenv("HISTORY_WINDOW_MAX_TOKENS", "3000")
    with pytest.raises(InvalidSettings, match="MEMORY_FOLD_MIN_TOKENS"):
        synthesise()


def test_bad_initial_rules_fail_the_synth(tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"tenants": {"acme": {"historyDays": 0}}}))
    with pytest.raises(InvalidRules, match="tenant 'acme', field historyDays"):
        synthesise({"rulesFile": str(rules)})


@pytest.mark.parametrize(
    ("content", "key"),
    [
        ('{"tenants": {"acme": {"historyDays": 14}}, "tenants": {}}', "tenants"),
        ('{"tenants": {"acme": {"historyDays": 7, "historyDays": 30}}}', "historyDays"),
    ],
    ids=["top", "tenant-field"],
)
def test_a_key_given_twice_in_the_initial_rules_fails_the_synth_naming_it(tmp_path, content, key):
    json.loads(content)  # Python's own parser lets it through, keeping the last
    rules = tmp_path / "rules.json"
    rules.write_text(content)
    with pytest.raises(InvalidRules) as refused:
        synthesise({"rulesFile": str(rules)})
    assert str(refused.value) == f"{rules}: duplicate key {key!r}"


def test_a_dev_stage_may_drop_deletion_protection_and_retention():
    _, template = synthesise({"stage": "dev"})
    (table,) = of_type(template.to_json()["Resources"], "AWS::DynamoDB::GlobalTable").values()
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] is False


def test_settings_from_context_reach_the_functions():
    _, template = synthesise(
        {"HISTORY_WINDOW_MAX_TOKENS": "6000", "MEMORY_FOLD_MIN_TOKENS": "3000"}
    )
    functions = of_type(template.to_json()["Resources"], "AWS::Lambda::Function")
    for f in functions.values():
        variables = f["Properties"]["Environment"]["Variables"]
        assert variables["HISTORY_WINDOW_MAX_TOKENS"] == "6000"
        assert variables["MEMORY_FOLD_MIN_TOKENS"] == "3000"


def test_cdk_nag_fails_the_synth_on_an_unacknowledged_finding(monkeypatch):
    monkeypatch.setattr(ConversationMemoryStack, "_acknowledge_findings", lambda self: None)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        synthesise()


def test_make_synth_writes_cdk_out_offline_without_credentials(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_EC2_METADATA_DISABLED": "true", "CDK_DISABLE_CLI_TELEMETRY": "true"})
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        ["make", "--no-print-directory", "synth", f"SYNTH_OUTDIR={out}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    template = json.loads((out / "ConversationMemory.template.json").read_text())
    assert "AWS::Lambda::Function" in {r["Type"] for r in template["Resources"].values()}
    report = json.loads((out / "validation-report.json").read_text())
    assert all(
        r.get("summary", {}).get("status") != "failure" for r in report.get("pluginReports", [])
    )


def test_the_cdk_cli_refuses_a_misconfigured_window_before_anything_reaches_aws(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "synth",
            f"SYNTH_OUTDIR={tmp_path / 'out'}",
            "SYNTH_ARGS=-c MEMORY_FOLD_MIN_TOKENS=4000",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode != 0
    assert "HISTORY_WINDOW_MAX_TOKENS (4000) must be >= 2x MEMORY_FOLD_MIN_TOKENS (4000)" in (
        result.stdout + result.stderr
    )
