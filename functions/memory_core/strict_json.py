"""JSON read as the standard has it: what Python's parser lets through is refused.

Python's `json.loads` takes `NaN` and `Infinity`, keeps the last of two equal
keys in an object, turns `1e400` into `inf`, and raises RecursionError or a
plain ValueError on some inputs. A request body or a rules file read that way
can silently lose a field (`{"tenants": {...}, "tenants": {}}` empties the
tenant list). Every refusal here is a `json.JSONDecodeError` whose `msg`
names the problem, the duplicate key included, so a caller has one error to
handle and one message to show.
"""

from __future__ import annotations

import json
import math
from typing import Any

NOT_JSON = "NaN and Infinity are not JSON"
NUMBER_TOO_LARGE = "a number is too large"
TOO_DEEP = "nested too deeply"
DUPLICATE_KEY = "duplicate key"
"""The start of the message for a key given twice in one object: `duplicate key 'text'`."""


def strict_loads(text: str) -> Any:
    """The document in `text`, or `json.JSONDecodeError` naming what is wrong with it."""
    try:
        return json.loads(
            text,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except RecursionError:
        raise json.JSONDecodeError(TOO_DEEP, text, 0) from None
    except ValueError as error:
        if isinstance(error, json.JSONDecodeError):
            raise
        # int() refuses a numeral past Python's digit limit with a plain ValueError.
        raise json.JSONDecodeError(NUMBER_TOO_LARGE, text, 0) from None


def is_duplicate_key(error: json.JSONDecodeError) -> bool:
    return error.msg.startswith(DUPLICATE_KEY)


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                # The position is not known here; the key is what the reader needs.
                raise json.JSONDecodeError(f"{DUPLICATE_KEY} {key!r}", key, 0)
            seen.add(key)
    return document


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(NOT_JSON, name, 0)


def _finite_float(spelled: str) -> float:
    number = float(spelled)
    if not math.isfinite(number):
        raise json.JSONDecodeError(NUMBER_TOO_LARGE, spelled, 0)
    return number
