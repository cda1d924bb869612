"""The README's two set-up commands: `make run` installs only what serving needs, visibly.

Read from `make -n` (what make would run, on a virtualenv path that does not
exist yet, as on a fresh clone), so nothing is installed by the test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def planned(target: str, tmp_path: Path) -> list[str]:
    """The pip commands `make <target>` would run on a fresh clone."""
    done = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}", "NODE_MODULES=.nothing-to-do"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    commands = done.stdout.replace("\\\n", " ").splitlines()
    return [re.sub(r"\s+", " ", line) for line in commands if "pip install" in line]


def test_make_run_installs_the_runtime_requirements_only_with_pips_progress(tmp_path):
    [install] = planned("run", tmp_path)
    assert "-r requirements.txt" in install
    assert "requirements-dev.txt" not in install
    assert "--quiet" not in install


def test_the_runtime_requirements_hold_the_emulation_and_nothing_for_tests_or_deploys():
    pins = [
        line.split("==")[0].split("[")[0].lower()
        for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert "moto" in pins
    assert not {"pytest", "hypothesis", "aws-cdk-lib", "matplotlib", "schemathesis"} & set(pins)


def test_the_agent_frameworks_are_pinned_for_the_tests_only():
    """The client's adapters are tested against pinned releases; no framework is in what
    make run installs, nor in what the Lambdas get (their asset is `functions/`, their
    libraries requirements.txt's, from Powertools' layer and the runtime)."""
    frameworks = {"strands-agents", "langchain", "langgraph", "langchain-aws", "openai-agents"}

    def pins(name: str) -> dict[str, str]:
        lines = (REPO_ROOT / name).read_text().splitlines()
        found = [line.split("==") for line in lines if "==" in line and not line.startswith("#")]
        return {package.split("[")[0].lower(): version for package, version in found}

    assert frameworks <= pins("requirements-dev.txt").keys()
    assert not frameworks & pins("requirements.txt").keys()


@pytest.mark.parametrize("target", ["test", "bench", "synth", "lint"])
def test_the_tooling_targets_install_the_rest(target, tmp_path):
    installs = planned(target, tmp_path)
    assert any("-r requirements.txt" in install for install in installs)
    assert any("-r requirements-dev.txt" in install for install in installs)


def test_make_help_lists_install():
    done = subprocess.run(
        ["make", "help"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert re.search(r"^make install\s", done.stdout, re.MULTILINE)
