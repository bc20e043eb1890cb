"""JSON as the standard defines it: no ``NaN``, ``Infinity`` or ``-Infinity``.

Python's ``json`` module accepts those three words (and turns a number such as
``1e999`` into infinity), although JSON has no such values; a record value
parsed that way would be stored as the text ``NaN``. Every JSON a user hands the
engine (the HTTP API's bodies, the CLI's JSON lines and plan headers) is parsed
here instead, and a non-finite number is refused with the path of the field that
holds it, so the caller can say which field to fix.
"""

from __future__ import annotations

import json
import math
from typing import Any


class NonFiniteNumberError(ValueError):
    """A non-finite number at ``path`` (``records[0].value``; ``""`` for the whole document).

    ``token`` is the number as written (``NaN``, ``-Infinity``, ``1e999``); the
    message says what is wrong with it, without the location, which the caller
    words in its own terms (``body field ...``, ``standard input, line 3 ...``).
    """

    def __init__(self, path: str, token: str) -> None:
        self.path = path
        self.token = token
        if token in ("NaN", "Infinity", "-Infinity"):
            reason = f"{token} is not valid JSON (JSON numbers are finite)"
        else:
            reason = f"{token} is too large for a 64-bit floating-point number (JSON numbers here must be finite)"
        super().__init__(reason)


class _NonFinite:
    """Stands in for a non-finite number while the document is parsed, so its path can be found."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads`` that raises ``NonFiniteNumberError`` for a non-finite number.

    Raises ``json.JSONDecodeError``, ``UnicodeDecodeError`` and ``RecursionError``
    as ``json.loads`` does. A document without a non-finite number costs nothing
    more than ``json.loads``: it is walked only when one was seen.
    """
    seen: list[_NonFinite] = []

    def constant(token: str) -> _NonFinite:
        marker = _NonFinite(token)
        seen.append(marker)
        return marker

    def number(text: str) -> float | _NonFinite:
        value = float(text)
        return value if math.isfinite(value) else constant(text)

    value = json.loads(data, parse_constant=constant, parse_float=number)
    if seen:
        found = _first_marker(value)
        if found is not None:  # else a repeated key replaced it: the value parsed has none
            raise NonFiniteNumberError(*found)
    return value


def _first_marker(value: Any) -> tuple[str, str] | None:
    """The first non-finite number in document order, with its path (iteratively: any depth)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _NonFinite):
            return path, item.token
        if isinstance(item, dict):
            stack.extend((_key_path(path, key), child) for key, child in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in reversed(list(enumerate(item))))
    return None


def _key_path(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"
