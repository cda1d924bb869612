"""SPEC 3: `python -m rules_cli validate FILE`, the operators' check before a deployment."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rules_cli
from memory_core.settings import FIELDS

REPO_ROOT = Path(__file__).resolve().parents[2]
SETTINGS = [name.upper() for name in FIELDS]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    """The check reads the settings from the environment: none leak in from the shell."""
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)


def _write(tmp_path: Path, document: Any, name: str = "rules.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _validate(path: Path) -> int:
    return rules_cli.main(["validate", str(path)])


def test_a_valid_file_exits_0_and_names_its_tenants(tmp_path, capsys):
    path = _write(tmp_path, {"tenants": {"globex": {}, "acme": {"historyDays": 14}}})
    assert _validate(path) == 0
    out, err = capsys.readouterr()
    assert out.strip() == f"{path}: valid, 2 tenant(s): acme, globex"
    assert err == ""


def test_the_example_file_is_valid(capsys):
    assert _validate(REPO_ROOT / "rules.example.json") == 0
    out, _ = capsys.readouterr()
    assert "3 tenant(s): acme-legal, campus-advisers, demo" in out


def test_an_invalid_file_exits_1_naming_the_tenant_and_the_field(tmp_path, capsys):
    path = _write(tmp_path, {"tenants": {"acme": {}, "globex": {"idleResetHours": 1.5}}})
    assert _validate(path) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert str(path) in err
    assert "tenant 'globex'" in err
    assert "field idleResetHours" in err
    assert "acme" not in err


def test_every_error_is_reported(tmp_path, capsys):
    document = {
        "tenants": {"acme": {"historydays": 30}, "globex": {"rateLimit": {"messages": 0}}},
        "version": 1,
    }
    assert _validate(_write(tmp_path, document)) == 1
    err = capsys.readouterr().err
    assert "tenant 'acme', field historydays: unknown field" in err
    assert "tenant 'globex', field rateLimit.messages: must be a positive integer" in err
    assert "tenant 'globex', field rateLimit.perSeconds: required" in err
    assert "field version: unknown field" in err


def test_a_file_without_tenants_exits_1(tmp_path, capsys):
    assert _validate(_write(tmp_path, {"tenant": {"acme": {}}})) == 1
    assert "field tenants: required" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content",
    ["{not json", "", '{"tenants": {}', "tenants: {}"],
    ids=["broken", "empty", "cut", "yaml"],
)
def test_a_file_that_is_not_json_exits_2(tmp_path, capsys, content):
    path = tmp_path / "rules.json"
    path.write_text(content, encoding="utf-8")
    assert _validate(path) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"{path}: is not JSON: ")


def test_a_file_that_is_not_utf8_exits_2(tmp_path, capsys):
    path = tmp_path / "rules.json"
    path.write_bytes(b'{"tenants": {"\xff": {}}}')
    assert _validate(path) == 2
    assert capsys.readouterr().err.startswith(f"{path}: is not UTF-8 text: ")


@pytest.mark.parametrize(
    ("content", "key"),
    [
        ('{"tenants": {"acme": {"historyDays": 14}}, "tenants": {}}', "tenants"),
        ('{"tenants": {"acme": {"historyDays": 7}, "acme": {}}}', "acme"),
        ('{"tenants": {"acme": {"historyDays": 7, "historyDays": 30}}}', "historyDays"),
        (
            '{"tenants": {"acme": {"rateLimit": {"messages": 5, "perSeconds": 9, "messages": 6}}}}',
            "messages",
        ),
    ],
    ids=["top", "tenant", "field", "nested"],
)
def test_a_key_given_twice_exits_2_naming_the_file_and_the_key(tmp_path, capsys, content, key):
    json.loads(content)  # Python's own parser lets it through, keeping the last
    path = tmp_path / "rules.json"
    path.write_text(content, encoding="utf-8")
    assert _validate(path) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == f"{path}: duplicate key {key!r}"


def test_numbers_python_would_take_exit_2(tmp_path, capsys):
    path = tmp_path / "rules.json"
    path.write_text('{"tenants": {"acme": {"historyDays": NaN}}}', encoding="utf-8")
    assert _validate(path) == 2
    assert capsys.readouterr().err.strip() == f"{path}: is not JSON: NaN and Infinity are not JSON"


def test_a_missing_file_exits_2(tmp_path, capsys):
    path = tmp_path / "absent.json"
    assert _validate(path) == 2
    err = capsys.readouterr().err
    assert f"{path}: cannot be read as JSON" in err
    assert "No such file" in err


def test_a_directory_exits_2(tmp_path, capsys):
    assert _validate(tmp_path) == 2
    assert "cannot be read as JSON" in capsys.readouterr().err


def test_a_shorter_retention_in_the_environment_makes_30_history_days_invalid(
    tmp_path, capsys, monkeypatch
):
    path = _write(tmp_path, {"tenants": {"acme": {"historyDays": 30}}})
    assert _validate(path) == 0
    capsys.readouterr()

    monkeypatch.setenv("TURN_RETENTION_DAYS", "7")
    assert _validate(path) == 1
    err = capsys.readouterr().err
    assert "tenant 'acme'" in err
    assert "field historyDays" in err
    assert "TURN_RETENTION_DAYS (7)" in err


def test_a_longer_retention_in_the_environment_allows_more_history_days(
    tmp_path, capsys, monkeypatch
):
    path = _write(tmp_path, {"tenants": {"acme": {"historyDays": 90}}})
    assert _validate(path) == 1
    capsys.readouterr()
    monkeypatch.setenv("TURN_RETENTION_DAYS", "90")
    assert _validate(path) == 0


def test_bad_settings_in_the_environment_exit_1_naming_the_setting(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TURN_RETENTION_DAYS", "0")
    assert _validate(_write(tmp_path, {"tenants": {"acme": {}}})) == 1
    assert "TURN_RETENTION_DAYS" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["validate"], ["check", "rules.json"]], ids=repr)
def test_a_wrong_command_line_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        rules_cli.main(argv)
    assert exited.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_the_module_runs_as_a_command_on_the_example_file():
    env = {key: value for key, value in os.environ.items() if key not in SETTINGS}
    env["PYTHONPATH"] = "functions"
    checked = subprocess.run(
        [sys.executable, "-m", "rules_cli", "validate", "rules.example.json"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == (
        "rules.example.json: valid, 3 tenant(s): acme-legal, campus-advisers, demo"
    )


def test_the_module_exits_1_as_a_command_on_an_invalid_file(tmp_path):
    path = _write(tmp_path, {"tenants": {"acme": {"historyDays": 0}}})
    env = {key: value for key, value in os.environ.items() if key not in SETTINGS}
    env["PYTHONPATH"] = str(REPO_ROOT / "functions")
    checked = subprocess.run(
        [sys.executable, "-m", "rules_cli", "validate", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 1
    assert "tenant 'acme', field historyDays" in checked.stderr
