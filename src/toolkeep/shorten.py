"""The shapes of every shortened tool result, and the markers that lead back to the original.

All functions here are pure: the same text and numbers give the same string, in any process, so a
provider's prompt cache keeps hitting.

Forms (``KEY`` is :func:`archive_key` of the original, ``PATH`` a persisted copy)::

    cap       head + "\\n\\n[TRUNCATED N chars omitted, M kept] [full output saved to PATH] <<ccr:KEY>>\\n\\n" + tail
              (a failed save: "[full output could not be saved: REASON]" in place of the saved-to part)
    preview   head + "\\n\\n... [N chars omitted -- full output saved to PATH] <<ccr:KEY>>\\n\\n" + tail
    compact   head + "\\n[... N chars omitted from old tool result ...] <<ccr:KEY>>\\n" + tail
    summary   "[Old tool result cleared -- L lines, S chars, TYPE] <<ccr:KEY>>"
    cleared   "[result cleared] <<ccr:KEY>>" (the request budget's last resort)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator

__all__ = [
    "CAP_LINE_RE",
    "CCR_MARKER_RE",
    "CHUNK_CHARS",
    "CLEARED",
    "SAVED_PATH_RE",
    "archive_key",
    "cap_form",
    "carried_keys",
    "cleared_form",
    "compact_form",
    "format_size",
    "line_count",
    "marker",
    "preview_form",
    "split_preview",
    "summary_form",
    "utf8_chunks",
]

CCR_MARKER_RE = re.compile(r"<<ccr:([0-9a-f]{16})>>")
"""Matches an archive marker; group 1 is the key."""

SAVED_PATH_RE = re.compile(r"full output saved to ([^\]\n]+)\]")
"""Matches the persisted-file reference of a cap or preview; group 1 is the path."""

CAP_LINE_RE = re.compile(r"\n\n\[TRUNCATED (\d+) chars omitted, (\d+) kept\][^\n]*\n\n")
"""Matches the line of a cap form (:func:`cap_form`) between its head and tail; groups 1 and 2
are the chars omitted and kept."""


CHUNK_CHARS = 1 << 20
"""Chars encoded at a time when a text is hashed or written: a 100 MB result never needs a
second, encoded copy of itself in memory."""


def utf8_chunks(text: str) -> Iterator[bytes]:
    """The UTF-8 bytes of ``text`` (lone surrogates kept), :data:`CHUNK_CHARS` chars at a time.

    The same bytes as ``text.encode("utf-8", "surrogatepass")``: every code point, a lone
    surrogate too, is encoded on its own, so a cut between two never changes them."""
    for start in range(0, len(text), CHUNK_CHARS):
        yield text[start : start + CHUNK_CHARS].encode("utf-8", "surrogatepass")


def archive_key(text: str) -> str:
    """The archive key of a text: the first 16 hex digits of the SHA-256 of its UTF-8 bytes.

    Lone surrogates (possible in a ``str`` decoded from JSON) are encoded as they are, so every
    ``str`` has a key.
    """
    if len(text) <= CHUNK_CHARS:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    digest = hashlib.sha256()
    for chunk in utf8_chunks(text):
        digest.update(chunk)
    return digest.hexdigest()[:16]


def marker(key: str) -> str:
    """The archive marker ``<<ccr:KEY>>``."""
    return f"<<ccr:{key}>>"


def line_count(text: str) -> int:
    """Lines in ``text``: line breaks plus one for a last line without one (0 for "")."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def format_size(n: int) -> str:
    """A count in the summary's units: ``950``, ``3.2K``, ``28K``, ``1.2M``."""
    if n < 1_000:
        return str(n)
    if n < 999_500:
        value, unit = n / 1_000, "K"
    else:
        value, unit = n / 1_000_000, "M"
    text = f"{value:.1f}" if value < 10 else f"{value:.0f}"
    if text.endswith(".0"):
        text = text[:-2]
    return text + unit


def _way_back(kept: str, keys: Iterable[str], paths: Iterable[str] = ()) -> str:
    """Markers for ``keys`` and ``paths`` not already in ``kept``, each once, in order."""
    out: list[str] = []
    for path in dict.fromkeys(paths):
        ref = f"[full output saved to {path}]"
        if ref not in kept:
            out.append(" " + ref)
    for key in dict.fromkeys(keys):
        mark = marker(key)
        if mark not in kept:
            out.append(" " + mark)
    return "".join(out)


def carried_keys(text: str) -> list[str]:
    """Archive keys already present in ``text``, in order of appearance, each once."""
    return list(dict.fromkeys(CCR_MARKER_RE.findall(text)))


def cap_form(
    text: str,
    head: int | None,
    tail: int | None,
    *,
    keys: Iterable[str],
    path: str | None = None,
    save_error: str | None = None,
    cap: int | None = None,
) -> str:
    """The per-tool cap form: plain head and tail around ``[TRUNCATED N chars omitted, M kept]``.

    When the full output could not be saved, ``save_error`` says why, after the marker line.

    With ``cap``, the form is at most ``cap`` chars long, everything included: the marker line
    and the first key always (the way back), then the saved path, the save note and the other
    keys while they take at most half the cap, and head and tail in what is left (each at most
    ``head``/``tail``; ``None``: they fill it, the head five sixths). Without a key, the path is
    the way back that must fit, else the note that nothing was saved. :class:`ValueError` when
    ``cap`` leaves no room for that and the marker line (:data:`toolkeep.config.MIN_TOOL_CAP`
    always does for a key or the note).

        >>> form = cap_form("x" * 10_000, None, None, keys=["0123456789abcdef"], cap=100)
        >>> len(form) <= 100, form[:4], form.count("<<ccr:0123456789abcdef>>")
        (True, 'xxxx', 1)
    """
    keys = list(dict.fromkeys(keys))
    if cap is None:
        return _cap_text(text, head or 0, tail or 0, _cap_notes(keys, path, save_error))
    notes, room = _fit_notes(len(text), cap, keys, path, save_error)
    form = _cap_text(text, *_shares(room, head, tail), notes)
    for _ in range(3):  # the counts were reckoned at their longest: give back what they did not use
        if len(form) >= cap:
            break
        room += cap - len(form)
        longer = _cap_text(text, *_shares(room, head, tail), notes)
        if len(longer) > cap or longer == form:
            break
        form = longer
    return form


def _cap_text(text: str, head: int, tail: int, notes: list[str]) -> str:
    head_text, tail_text = text[:head], text[len(text) - tail :] if tail else ""
    omitted = len(text) - len(head_text) - len(tail_text)
    kept = head_text + tail_text
    way = "".join(n for n in notes if n.startswith(_UNSAVED[:-1]) or n.strip() not in kept)
    kept_n = len(head_text) + len(tail_text)
    return f"{head_text}\n\n[TRUNCATED {omitted} chars omitted, {kept_n} kept]{way}\n\n{tail_text}"


def _cap_notes(keys: list[str], path: str | None, save_error: str | None) -> list[str]:
    """What follows the marker line of a cap form, in order: the save note, path, keys."""
    notes: list[str] = []
    if path is None and save_error:
        notes.append(f" [full output could not be saved: {_one_line(save_error)}]")
    if path:
        notes.append(f" [full output saved to {path}]")
    notes += [" " + marker(k) for k in keys]
    return notes


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fit_notes(
    size: int, cap: int, keys: list[str], path: str | None, save_error: str | None
) -> tuple[list[str], int]:
    """The notes of a cap form of a ``size``-char text that fit ``cap``, and the room left.

    One way back is required: the first key, else the saved path, else the note that nothing
    was saved (with its reason if that fits). Raises :class:`ValueError` when it does not fit."""
    frame = len("\n\n[TRUNCATED  chars omitted,  kept]\n\n") + 2 * len(str(size))  # counts at their longest
    notes = _cap_notes(keys, path, save_error)
    if keys:
        required = " " + marker(keys[0])
    elif path:
        required = f" [full output saved to {path}]"
    elif save_error:  # nothing leads back: say so, with the reason if it fits
        required = notes[0] if frame + len(notes[0]) <= cap // 2 else _UNSAVED
        notes[0] = required
    else:
        required = ""  # a pure run (no store, no workspace): there is no way back to name
    used = frame + len(required)
    if used > cap:
        raise ValueError(f"a cap of {cap} leaves no room for the marker of a {size}-char result")
    chosen = {required}
    for note in notes:
        if note not in chosen and used + len(note) <= cap // 2:
            chosen.add(note)
            used += len(note)
    return [n for n in notes if n in chosen], cap - used


_UNSAVED = " [full output could not be saved]"


def _shares(room: int, head: int | None, tail: int | None) -> tuple[int, int]:
    """Head and tail sizes within ``room``: each at most what is given, ``None`` filling it."""
    if head is None and tail is None:
        return room - room // 6, room // 6
    if head is None:
        tail_n = min(tail or 0, room)
        return room - tail_n, tail_n
    if tail is None:
        head_n = min(head, room)
        return head_n, room - head_n
    if head + tail <= room:
        return head, tail
    head_n = room * head // (head + tail)
    return head_n, room - head_n


def split_preview(text: str, head: int, tail: int) -> tuple[str, str]:
    """Head and tail of a budget preview, cut at line breaks where that costs at most half.

    The head is cut back to its last line break if that lies in its second half; the tail is cut
    forward past its first line break if that lies in its first half.
    """
    head_text = text[:head]
    cut = head_text.rfind("\n")
    if cut >= head // 2 and cut > 0:
        head_text = head_text[:cut]
    tail_text = text[len(text) - tail :] if tail else ""
    cut = tail_text.find("\n")
    if 0 <= cut < tail // 2:
        tail_text = tail_text[cut + 1 :]
    return head_text, tail_text


def preview_form(
    text: str,
    head: int,
    tail: int,
    *,
    keys: Iterable[str],
    path: str | None,
    save_error: str | None = None,
) -> str:
    """The budget preview: head, the omission line naming the saved file, tail.

    When the full output could not be saved, the omission line says so instead of naming a file.
    """
    head_text, tail_text = split_preview(text, head, tail)
    omitted = len(text) - len(head_text) - len(tail_text)
    if path is not None:
        where = f"full output saved to {path}"
    else:
        where = f"full output could not be saved: {save_error or 'no workspace'}"
    way = _way_back(head_text + tail_text, keys)
    return f"{head_text}\n\n... [{omitted:,} chars omitted -- {where}]{way}\n\n{tail_text}"


def compact_form(text: str, head: int, tail: int, *, keys: Iterable[str], paths: Iterable[str] = ()) -> str:
    """Microcompaction's truncated form: plain head and tail of the original."""
    head_text, tail_text = text[:head], text[len(text) - tail :] if tail else ""
    omitted = len(text) - len(head_text) - len(tail_text)
    way = _way_back(head_text + tail_text, keys, paths)
    return f"{head_text}\n[... {omitted} chars omitted from old tool result ...]{way}\n{tail_text}"


def summary_form(text: str, content_type: str, *, keys: Iterable[str], paths: Iterable[str] = ()) -> str:
    """Microcompaction's one-line summary of the original."""
    line = (
        f"[Old tool result cleared -- {line_count(text)} lines, "
        f"{format_size(len(text))} chars, {content_type}]"
    )
    return line + _way_back(line, keys, paths)


CLEARED = "[result cleared]"
"""The words of :func:`cleared_form`."""


def cleared_form(*, keys: Iterable[str], paths: Iterable[str] = ()) -> str:
    """The request budget's last form of a result: a few words and its markers, nothing of the
    original: 19 o200k tokens with one marker, where the summary line alone takes about 30. The saved path goes in
    only when there is no marker (a run without a store): the marker is the way back."""
    keys = list(keys)
    return CLEARED + _way_back(CLEARED, keys, () if keys else paths)
