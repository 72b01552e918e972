"""JSON numbers past a float's range, read and written back as they were written.

``json.loads`` reads ``1e400`` (valid JSON) as ``inf``, which ``json.dumps`` then writes as
``Infinity`` (not JSON) or refuses; and it takes ``NaN``, ``Infinity`` and ``-Infinity``, which
JSON does not have. :func:`loads` reads such a number as a :class:`Number` (``inf`` to every
reader, with the literal it was written as) and refuses the three names; :func:`dumps` writes a
:class:`Number` as its literal, so what was read as JSON is written back as the same JSON::

    >>> dumps(loads('{"big": 1e400, "n": 2.5}'))
    '{"big": 1e400, "n": 2.5}'

The command line reads and writes its documents with them; the proxy forwards a body holding
such a number as it came (:mod:`toolkeep.proxy.prepare`).
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

__all__ = ["Number", "dumps", "loads", "parse_float", "refuse_constant"]


class Number(float):
    """A JSON number float cannot hold (``1e400`` reads as ``inf``), with the literal it was
    written as, which :func:`dumps` writes back: its value is ``inf`` to every reader, and the
    output stays the JSON it came as."""

    __slots__ = ("literal",)
    literal: str

    def __new__(cls, literal: str) -> Number:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number


def parse_float(literal: str) -> float:
    """A JSON number with a fraction or an exponent: a float, or a :class:`Number` past its range
    (``json.loads``' ``parse_float``)."""
    value = float(literal)
    return value if math.isfinite(value) else Number(literal)


def refuse_constant(name: str) -> NoReturn:
    """``NaN``, ``Infinity`` and ``-Infinity``, which Python's parser takes and JSON does not
    (``json.loads``' ``parse_constant``): a :class:`ValueError`."""
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, with numbers past a float's range as :class:`Number` and the names
    JSON does not have refused (:class:`ValueError`, as for any invalid JSON)."""
    return json.loads(text, parse_float=parse_float, parse_constant=refuse_constant)


def dumps(value: Any, *, indent: int | None = None, ensure_ascii: bool = False) -> str:
    """``json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)``, but for a :class:`Number`,
    written as its literal; a NaN or an infinity of any other origin is a :class:`ValueError`."""
    try:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, allow_nan=False)
    except ValueError:  # a number past float's range (or a NaN)
        return _encoded(value, indent, ensure_ascii, 0)


def _encoded(value: Any, indent: int | None, ascii: bool, level: int) -> str:
    if isinstance(value, Number):
        return value.literal
    if isinstance(value, dict) and value:
        items = [f"{_key(k, ascii)}: {_encoded(v, indent, ascii, level + 1)}" for k, v in value.items()]
        return _joined("{", items, "}", indent, level)
    if isinstance(value, (list, tuple)) and value:
        return _joined("[", [_encoded(v, indent, ascii, level + 1) for v in value], "]", indent, level)
    try:
        return json.dumps(value, ensure_ascii=ascii, allow_nan=False)
    except ValueError:
        raise ValueError(f"the output holds {value!r}, which JSON cannot write") from None


def _key(key: Any, ascii: bool) -> str:
    return json.dumps(key if isinstance(key, str) else json.dumps(key), ensure_ascii=ascii)


def _joined(start: str, items: list[str], end: str, indent: int | None, level: int) -> str:
    if indent is None:
        return start + ", ".join(items) + end
    inner, outer = "\n" + " " * (indent * (level + 1)), "\n" + " " * (indent * level)
    return start + inner + ("," + inner).join(items) + outer + end
