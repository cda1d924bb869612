"""Operators' check of a rules file before it is deployed.

    python -m rules_cli validate FILE

Exits 0 and names the tenants when the file is valid under the settings in the
environment (`TURN_RETENTION_DAYS` bounds `historyDays`); exits 1 with the
reason when it is not, and 2 when the file cannot be read as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memory_core.rules import InvalidRules, parse_rules
from memory_core.settings import InvalidSettings, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rules_cli")
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a rules.json file")
    validate.add_argument("file", type=Path)
    args = parser.parse_args(argv)

    try:
        document = json.loads(args.file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"{args.file}: cannot be read as JSON: {error}", file=sys.stderr)
        return 2
    try:
        rules = parse_rules(document, load_settings().turn_retention_days)
    except (InvalidRules, InvalidSettings) as error:
        print(f"{args.file}: {error}", file=sys.stderr)
        return 1
    print(f"{args.file}: valid, {len(rules.tenants)} tenant(s): {', '.join(sorted(rules.tenants))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
