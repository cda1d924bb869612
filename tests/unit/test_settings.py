"""SPEC 2: the service settings, their refusals, and the cold start they guard."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_core.settings import COUNTS, InvalidSettings, Settings, load_settings
from memory_core.trim import TrimShape
from memory_core.window import WindowLimits

FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"

DEFAULTS = {
    "HISTORY_WINDOW_MAX_TOKENS": 4000,
    "HISTORY_WINDOW_MAX_MESSAGES": 25,
    "HISTORY_WINDOW_FLOOR_MESSAGES": 10,
    "HISTORY_MESSAGE_MAX_TOKENS": 1000,
    "MEMORY_FOLD_MIN_TOKENS": 2000,
    "TURN_RETENTION_DAYS": 30,
    "MEMORY_SUMMARY_MAX_TOKENS": 800,
    "COMPACTION_LEASE_SECONDS": 900,
}
"""The numbers; `TENANT_USAGE_METRICS`, a list of tenants, is tested at the end."""
BAD_VALUES = ["0", "-1", "1.5", "abc", ""]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    """No setting leaks in from the shell that runs the tests."""
    for name in [*DEFAULTS, "TENANT_USAGE_METRICS"]:
        monkeypatch.delenv(name, raising=False)


def _values(settings: Settings) -> dict[str, int]:
    return {name: getattr(settings, name.lower()) for name in DEFAULTS}


def _refusal(environ: dict[str, str]) -> str:
    with pytest.raises(InvalidSettings) as refused:
        load_settings(environ)
    return str(refused.value)


def test_every_setting_has_its_documented_default():
    assert _values(load_settings({})) == DEFAULTS


def test_the_process_environment_without_settings_gives_the_same_defaults():
    assert _values(load_settings()) == DEFAULTS


def test_every_setting_can_be_set():
    environ = {
        "HISTORY_WINDOW_MAX_TOKENS": "9000",
        "HISTORY_WINDOW_MAX_MESSAGES": "40",
        "HISTORY_WINDOW_FLOOR_MESSAGES": "12",
        "HISTORY_MESSAGE_MAX_TOKENS": "700",
        "MEMORY_FOLD_MIN_TOKENS": "3000",
        "TURN_RETENTION_DAYS": "90",
        "MEMORY_SUMMARY_MAX_TOKENS": "1200",
        "COMPACTION_LEASE_SECONDS": "300",
    }
    assert _values(load_settings(environ)) == {name: int(v) for name, v in environ.items()}


@pytest.mark.parametrize("source", ["mapping", "environ"])
@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("name", list(DEFAULTS))
def test_a_setting_that_is_not_a_positive_integer_is_refused_by_name(
    monkeypatch, source, name, value
):
    environ: dict[str, str] | None = {name: value}
    if source == "environ":
        monkeypatch.setenv(name, value)
        environ = None
    with pytest.raises(InvalidSettings) as refused:
        load_settings(environ)
    message = str(refused.value)
    assert name in message
    assert repr(value) in message
    assert "positive integer" in message
    # Only the culprit is named: the other settings are fine.
    assert not [other for other in DEFAULTS if other != name and other in message]


def test_several_bad_settings_are_all_named():
    message = _refusal({"HISTORY_WINDOW_MAX_TOKENS": "abc", "TURN_RETENTION_DAYS": "0"})
    assert "HISTORY_WINDOW_MAX_TOKENS" in message
    assert "TURN_RETENTION_DAYS" in message


def test_a_floor_above_the_message_cap_is_refused_naming_both():
    message = _refusal({"HISTORY_WINDOW_FLOOR_MESSAGES": "26"})
    assert "HISTORY_WINDOW_FLOOR_MESSAGES (26)" in message
    assert "HISTORY_WINDOW_MAX_MESSAGES (25)" in message


def test_a_floor_above_a_lowered_cap_is_refused():
    message = _refusal({"HISTORY_WINDOW_MAX_MESSAGES": "8"})
    assert "HISTORY_WINDOW_FLOOR_MESSAGES (10)" in message
    assert "HISTORY_WINDOW_MAX_MESSAGES (8)" in message


@pytest.mark.parametrize("count", [1, 10, 25, 40])
def test_a_floor_equal_to_the_message_cap_is_accepted(count):
    settings = load_settings(
        {"HISTORY_WINDOW_FLOOR_MESSAGES": str(count), "HISTORY_WINDOW_MAX_MESSAGES": str(count)}
    )
    assert settings.history_window_floor_messages == count
    assert settings.history_window_max_messages == count


def test_a_fold_trigger_equal_to_the_window_is_refused_with_the_reason():
    message = _refusal({"MEMORY_FOLD_MIN_TOKENS": "4000"})
    assert "HISTORY_WINDOW_MAX_TOKENS (4000)" in message
    assert "MEMORY_FOLD_MIN_TOKENS (4000)" in message
    assert "2x" in message
    assert "asynchronous" in message
    assert "held by neither" in message


def test_a_window_of_exactly_twice_the_fold_trigger_is_accepted():
    settings = load_settings(
        {"HISTORY_WINDOW_MAX_TOKENS": "4000", "MEMORY_FOLD_MIN_TOKENS": "2000"}
    )
    assert settings.history_window_max_tokens == 4000
    assert settings.memory_fold_min_tokens == 2000


def test_a_window_one_token_short_of_twice_the_fold_trigger_is_refused():
    message = _refusal({"HISTORY_WINDOW_MAX_TOKENS": "3999", "MEMORY_FOLD_MIN_TOKENS": "2000"})
    assert "HISTORY_WINDOW_MAX_TOKENS (3999)" in message
    assert "MEMORY_FOLD_MIN_TOKENS (2000)" in message
    assert "held by neither" in message


def test_a_lowered_window_with_the_default_fold_trigger_is_refused():
    message = _refusal({"HISTORY_WINDOW_MAX_TOKENS": "3000"})
    assert "HISTORY_WINDOW_MAX_TOKENS (3000)" in message
    assert "MEMORY_FOLD_MIN_TOKENS (2000)" in message


def test_a_lowered_fold_trigger_lets_the_window_shrink():
    settings = load_settings({"HISTORY_WINDOW_MAX_TOKENS": "1000", "MEMORY_FOLD_MIN_TOKENS": "500"})
    assert settings.history_window_max_tokens == 1000


def test_the_cross_field_rule_is_enforced_on_the_process_environment_too(monkeypatch):
    monkeypatch.setenv("MEMORY_FOLD_MIN_TOKENS", "4000")
    with pytest.raises(InvalidSettings, match="held by neither"):
        load_settings()


def test_the_trim_keeps_400_tokens_at_each_end_by_default():
    shape = load_settings({}).trim_shape
    assert shape == TrimShape(max_message_tokens=1000, head_tokens=400, tail_tokens=400)


@pytest.mark.parametrize(
    ("budget", "each_end"), [(500, 250), (501, 250), (799, 399), (800, 400), (5000, 400), (1, 0)]
)
def test_the_trim_ends_are_capped_at_half_the_message_budget(budget, each_end):
    shape = load_settings({"HISTORY_MESSAGE_MAX_TOKENS": str(budget)}).trim_shape
    assert shape.max_message_tokens == budget
    assert shape.head_tokens == each_end
    assert shape.tail_tokens == each_end


def test_the_window_limits_mirror_the_settings():
    settings = load_settings(
        {
            "HISTORY_WINDOW_MAX_TOKENS": "6000",
            "HISTORY_WINDOW_MAX_MESSAGES": "30",
            "HISTORY_WINDOW_FLOOR_MESSAGES": "7",
            "HISTORY_MESSAGE_MAX_TOKENS": "500",
        }
    )
    assert settings.window_limits == WindowLimits(
        max_tokens=6000,
        max_messages=30,
        floor_messages=7,
        trim=TrimShape(max_message_tokens=500, head_tokens=250, tail_tokens=250),
    )


def test_the_default_window_limits():
    assert load_settings({}).window_limits == WindowLimits(
        max_tokens=4000, max_messages=25, floor_messages=10, trim=TrimShape.for_budget(1000)
    )


def test_without_an_argument_the_process_environment_is_read(monkeypatch):
    monkeypatch.setenv("HISTORY_WINDOW_MAX_TOKENS", "6000")
    monkeypatch.setenv("TURN_RETENTION_DAYS", "45")
    settings = load_settings()
    assert settings.history_window_max_tokens == 6000
    assert settings.turn_retention_days == 45


def test_an_explicit_mapping_wins_over_the_process_environment(monkeypatch):
    monkeypatch.setenv("TURN_RETENTION_DAYS", "abc")
    monkeypatch.setenv("HISTORY_WINDOW_MAX_TOKENS", "9000")
    settings = load_settings({"TURN_RETENTION_DAYS": "9", "HISTORY_WINDOW_MAX_TOKENS": "5000"})
    assert settings.turn_retention_days == 9
    assert settings.history_window_max_tokens == 5000


def test_an_explicit_mapping_ignores_the_process_environment(monkeypatch):
    monkeypatch.setenv("HISTORY_WINDOW_MAX_TOKENS", "9000")
    monkeypatch.setenv("TURN_RETENTION_DAYS", "45")
    assert _values(load_settings({})) == DEFAULTS


def test_an_explicit_mapping_is_not_refused_for_a_bad_process_environment(monkeypatch):
    monkeypatch.setenv("MEMORY_FOLD_MIN_TOKENS", "4000")
    monkeypatch.setenv("TURN_RETENTION_DAYS", "abc")
    assert _values(load_settings({})) == DEFAULTS


def test_an_explicit_mapping_ignores_unrelated_variables():
    settings = load_settings({"PATH": "/usr/bin", "TABLE_NAME": "turns", "POWERTOOLS_X": "1"})
    assert _values(settings) == DEFAULTS


def test_the_settings_are_frozen():
    settings = load_settings({})
    with pytest.raises(ValueError, match="frozen"):
        settings.history_window_max_tokens = 1  # type: ignore[misc]


COLD_START = "from memory_core.settings import load_settings; SETTINGS = load_settings()"


def _cold_start(**settings: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in DEFAULTS}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(FUNCTIONS_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env.update(settings)
    return subprocess.run(
        [sys.executable, "-c", COLD_START],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_cold_start_with_the_fold_trigger_at_the_window_fails_with_the_reason():
    started = _cold_start(MEMORY_FOLD_MIN_TOKENS="4000")
    assert started.returncode != 0
    assert "InvalidSettings" in started.stderr
    assert "HISTORY_WINDOW_MAX_TOKENS (4000)" in started.stderr
    assert "MEMORY_FOLD_MIN_TOKENS (4000)" in started.stderr
    assert "held by neither" in started.stderr


def test_a_cold_start_with_good_settings_succeeds():
    started = _cold_start(HISTORY_WINDOW_MAX_TOKENS="8000", MEMORY_FOLD_MIN_TOKENS="4000")
    assert started.returncode == 0, started.stderr
    assert started.stderr == ""


def test_the_summary_cap_may_not_exceed_the_window():
    message = _refusal({"MEMORY_SUMMARY_MAX_TOKENS": "4001"})
    assert "MEMORY_SUMMARY_MAX_TOKENS (4001) must be <= HISTORY_WINDOW_MAX_TOKENS (4000)" in message
    assert load_settings({"MEMORY_SUMMARY_MAX_TOKENS": "4000"}).memory_summary_max_tokens == 4000


def test_every_setting_is_a_documented_field():
    assert set(DEFAULTS) | {"TENANT_USAGE_METRICS"} == {
        name.upper() for name in Settings.model_fields
    }
    assert {name.upper() for name in COUNTS} == set(DEFAULTS)


# --- TENANT_USAGE_METRICS: the tenants whose usage metrics carry a tenant dimension ---


def test_no_tenant_gets_a_metric_dimension_by_default():
    assert load_settings({}).tenant_usage_metrics == ()
    assert load_settings({"TENANT_USAGE_METRICS": ""}).tenant_usage_metrics == ()
    assert load_settings({"TENANT_USAGE_METRICS": "  "}).tenant_usage_metrics == ()


@pytest.mark.parametrize(
    ("value", "tenants"),
    [
        ("acme", ("acme",)),
        ("acme,globex-legal", ("acme", "globex-legal")),
        (" acme , Globex_2 ", ("acme", "Globex_2")),
        ("a" * 64, ("a" * 64,)),
    ],
)
def test_tenants_are_named_comma_separated(value, tenants):
    assert load_settings({"TENANT_USAGE_METRICS": value}).tenant_usage_metrics == tenants


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("acme,,globex", "an empty id (a comma too many)"),
        ("acme,", "an empty id (a comma too many)"),
        ("acme globex", "'acme globex' is not a tenant id"),
        ("acme;globex", "'acme;globex' is not a tenant id"),
        ("-acme", "'-acme' is not a tenant id"),
        ("a" * 65, f"'{'a' * 65}' is not a tenant id"),
        ("acme,ACME,acme", "'acme' is named twice"),
        ('["acme"]', """'["acme"]' is not a tenant id"""),
    ],
)
def test_a_bad_tenant_list_is_refused_with_the_reason(value, reason):
    message = _refusal({"TENANT_USAGE_METRICS": value})
    assert message.startswith("invalid service settings: TENANT_USAGE_METRICS: ")
    assert reason in message
    assert repr(value) in message
    if "not a tenant id" in reason:
        assert "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" in message


def test_the_settings_give_back_the_environment_they_came_from():
    environ = {"TENANT_USAGE_METRICS": "acme,globex", "TURN_RETENTION_DAYS": "45"}
    rendered = load_settings(environ).as_environment()
    assert rendered["TENANT_USAGE_METRICS"] == "acme,globex"
    assert rendered["TURN_RETENTION_DAYS"] == "45"
    assert set(rendered) == {name.upper() for name in Settings.model_fields}
    assert load_settings(rendered) == load_settings(environ)
    assert load_settings({}).as_environment()["TENANT_USAGE_METRICS"] == ""


def test_a_cold_start_with_a_bad_tenant_list_fails_with_the_reason():
    started = _cold_start(TENANT_USAGE_METRICS="acme,globex legal")
    assert started.returncode != 0
    assert "InvalidSettings" in started.stderr
    assert "TENANT_USAGE_METRICS: " in started.stderr
    assert "'globex legal' is not a tenant id" in started.stderr
