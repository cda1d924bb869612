"""The runner's environment: what it defaults, and what it refuses rather than override."""

from __future__ import annotations

import pytest

from local.runner import StartRefused, configure_environment

EMULATION = "http://127.0.0.1:4566"


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("CALLER_IDENTITY", "required", "authenticates no caller"),
        ("RULES_SOURCE", "appconfig", "reads RULES_FILE"),
    ],
)
def test_a_setting_the_runner_cannot_honour_fails_the_start_naming_it(name, value, reason):
    with pytest.raises(StartRefused) as refused:
        configure_environment({name: value}, EMULATION)
    assert str(refused.value).startswith(f"{name}={value} cannot be honoured locally")
    assert reason in str(refused.value)


def test_the_values_it_honours_are_accepted_and_the_unset_ones_chosen():
    environ = {"CALLER_IDENTITY": "optional", "RULES_SOURCE": "file"}
    configure_environment(environ, EMULATION)
    assert (environ["CALLER_IDENTITY"], environ["RULES_SOURCE"]) == ("optional", "file")
    unset: dict[str, str] = {}
    configure_environment(unset, EMULATION)
    assert (unset["CALLER_IDENTITY"], unset["RULES_SOURCE"]) == ("optional", "file")


def test_the_terminal_gets_warnings_and_no_metrics_blobs_unless_asked():
    quiet: dict[str, str] = {}
    configure_environment(quiet, EMULATION)
    assert quiet["POWERTOOLS_LOG_LEVEL"] == "WARNING"
    assert quiet["POWERTOOLS_METRICS_DISABLED"] == "true"
    asked = {"POWERTOOLS_LOG_LEVEL": "INFO", "POWERTOOLS_METRICS_DISABLED": "false"}
    configure_environment(asked, EMULATION)
    assert (asked["POWERTOOLS_LOG_LEVEL"], asked["POWERTOOLS_METRICS_DISABLED"]) == (
        "INFO",
        "false",
    )
