"""Old tool-call inputs, shortened: the file contents that write and edit calls send.

On long coding sessions the inputs of old write and edit calls weigh as much as the results.
The economy policy cuts each long string of an old call's arguments to its head and
``[... N chars omitted from old tool call input ...] <<ccr:KEY>>``, archiving the string first;
:class:`RestoreInputs` puts the original back when a prepared history comes in again, as
``restore_originals`` does for results, so the policy sees what it saw then. A step changes a
call only through :meth:`ToolCallPart.with_arguments`; each format writes the arguments back in
its own shape.

The request budget's last resort (:mod:`toolkeep.window`) goes further: :func:`cleared_input`
keeps only an old call's short entries (a path, a flag) and puts the whole input in the archive,
behind one more entry, ``"_cleared": "<<ccr:KEY>>"``; :class:`RestoreInputs` puts that back too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..messages import History, Message, ToolCallPart
from ..shorten import CCR_MARKER_RE, marker
from ..steps import Reuse, StepContext
from ..tokens import serialize_message

__all__ = ["CLEARED_ENTRY", "MAX_DEPTH", "RestoreInputs", "cleared_input", "input_form", "parsed_object"]

_OMITTED = " chars omitted from old tool call input ...]"
_OMITTED_TAIL = re.compile(r"\n\[\.\.\. (\d+)" + re.escape(_OMITTED) + r" <<ccr:([0-9a-f]{16})>>\Z")


CLEARED_ENTRY = "_cleared"
"""The entry of a cleared call input (:func:`cleared_input`) that holds its way back."""


MAX_DEPTH = 32
"""How deep in a call's arguments strings are shortened (and looked at to restore): the model
may nest its arguments arbitrarily deep, and what lies deeper is left as it came."""


def input_form(value: Any, ctx: StepContext, min_chars: int, head: int, depth: int = 0) -> Any:
    """``value`` (a call's arguments) with every string longer than ``min_chars`` cut to its
    first ``head`` chars and the omission marker, the whole string archived first; what lies
    deeper than :data:`MAX_DEPTH` stays as it is."""
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, str):
        if len(value) <= min_chars:
            return value
        key = ctx.archive(value)
        if ctx.unarchived(key):
            return value  # no way back: it stays whole
        way = f" {marker(key)}" if key else ""
        return f"{value[:head]}\n[... {len(value) - head}{_OMITTED}{way}"
    if isinstance(value, Mapping):
        return {k: input_form(v, ctx, min_chars, head, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [input_form(v, ctx, min_chars, head, depth + 1) for v in value]
    return value


def cleared_input(arguments: Any, ctx: StepContext, keep: int) -> Any:
    """``arguments`` (a call's input, a mapping or the JSON string of one) cleared, the request
    budget's last resort: only its short entries (a string of at most ``keep`` chars, a list or
    object whose JSON is, a number, a boolean, a null: what names the call, a path or a flag),
    and ``"_cleared": "<<ccr:KEY>>"``, ``KEY`` the archived input whole (the string as it came,
    or the mapping's compact JSON). A string stays a JSON string. ``arguments`` itself when
    nothing would go, when it has an entry of that name, or when the archive refuses it (no
    way back)."""
    parsed = parsed_object(arguments)
    if parsed is None or CLEARED_ENTRY in parsed:
        return arguments
    form = {k: v for k, v in parsed.items() if not _long(v, keep)}
    if len(form) == len(parsed):
        return arguments
    key = ctx.archive(arguments if isinstance(arguments, str) else serialize_message(arguments))
    if ctx.unarchived(key):
        return arguments
    form[CLEARED_ENTRY] = marker(key) if key else "[input cleared]"  # a run without a store
    return json.dumps(form, ensure_ascii=False) if isinstance(arguments, str) else form


def _long(value: Any, keep: int) -> bool:
    """True for a string, list or object over ``keep`` chars (as JSON, but a string's own)."""
    if isinstance(value, str):
        return len(value) > keep
    return isinstance(value, list | Mapping) and len(serialize_message(value)) > keep


def _uncleared(parsed: Mapping[str, Any], ctx: StepContext) -> str | None:
    """The archived input that ``parsed`` is the cleared form of (:func:`cleared_input`): the
    original behind its ``_cleared`` marker, when that is an object without such an entry that
    holds every entry ``parsed`` kept, in the same order."""
    value = parsed.get(CLEARED_ENTRY)
    found = CCR_MARKER_RE.fullmatch(value) if isinstance(value, str) else None
    text = ctx.lookup(found[1]) if found is not None else None
    original = parsed_object(text)
    if original is None or CLEARED_ENTRY in original:
        return None
    kept = [k for k in parsed if k != CLEARED_ENTRY]
    if [k for k in original if k in parsed] != kept or any(original[k] != parsed[k] for k in kept):
        return None
    return text


def parsed_object(arguments: Any) -> Any:
    """``arguments`` when it is a mapping; the object a JSON string of one holds; else ``None``.
    The model wrote it: a string that does not parse, or parses too deep or too large, is not
    an error, only not an object."""
    if isinstance(arguments, Mapping):
        return arguments
    if not isinstance(arguments, str) or not arguments.startswith("{"):
        return None
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


class RestoreInputs:
    """Put back whole the call inputs that an earlier run shortened (see the module docstring)."""

    reuse = Reuse(block_local=True)

    def __call__(self, history: History, ctx: StepContext) -> History:
        if ctx.store is None:
            return history
        out: list[Message] | None = None
        for index, m in enumerate(history):
            if m.role != "assistant":
                continue
            parts = list(m.parts)
            changed = False
            for j, part in enumerate(parts):
                if not isinstance(part, ToolCallPart):
                    continue
                arguments = part.arguments
                if isinstance(arguments, str) and "<<ccr:" in arguments:  # a JSON string (OpenAI)
                    parsed = parsed_object(arguments)
                    if parsed is None:
                        continue
                    whole = _uncleared(parsed, ctx)
                    restored = _restored(parsed, ctx) if whole is None else parsed
                    if whole is not None or restored is not parsed:
                        parts[j] = part.with_arguments(whole or json.dumps(restored))
                        changed = True
                elif isinstance(arguments, Mapping):
                    whole = _uncleared(arguments, ctx)
                    arguments = _restored(arguments, ctx) if whole is None else json.loads(whole)
                    if arguments is not part.arguments:
                        parts[j] = part.with_arguments(arguments)
                        changed = True
            if changed:
                out = out if out is not None else list(history)
                out[index] = m.with_parts(parts)
        return history if out is None else out


def _restored(value: Any, ctx: StepContext, depth: int = 0) -> Any:
    """``value`` with each string that is an input form of an archived original replaced by it
    (down to :data:`MAX_DEPTH`, as deep as :func:`input_form` makes them); the very same object
    when there is none."""
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, str):
        found = _OMITTED_TAIL.search(value) if value.endswith(">>") else None
        if found is None:
            return value
        original = ctx.lookup(found.group(2))
        head = value[: found.start()]
        if (
            original is None
            or not original.startswith(head)
            or len(original) - len(head) != int(found.group(1))
        ):
            return value
        return original
    if isinstance(value, Mapping):
        items = {k: _restored(v, ctx, depth + 1) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    if isinstance(value, list):
        restored = [_restored(v, ctx, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(restored, value, strict=True)) else restored
    return value
