"""Operators' check of a rules file before it is deployed.

    python -m rules_cli validate FILE

Exits 0 and names the tenants when the file is valid under the settings in the
environment (`TURN_RETENTION_DAYS` bounds `historyDays`); exits 1 with the
reason when it is not, and 2 when the file cannot be read as JSON: not UTF-8,
not JSON, or a key given twice in one object (which Python's own parser would
let through, keeping the last: `"tenants"` twice can empty the tenant list).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memory_core.rules import InvalidRules, UnreadableRules, load_rules_json, parse_rules
from memory_core.settings import InvalidSettings, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rules_cli")
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a rules.json file")
    validate.add_argument("file", type=Path)
    args = parser.parse_args(argv)

    try:
        raw = args.file.read_bytes()
    except OSError as error:
        print(f"{args.file}: cannot be read as JSON: {error}", file=sys.stderr)
        return 2
    try:
        document = load_rules_json(raw)
    except UnreadableRules as refusal:  # not UTF-8, not JSON, or a key given twice
        print(f"{args.file}: {refusal}", file=sys.stderr)  # as the service would refuse it
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
