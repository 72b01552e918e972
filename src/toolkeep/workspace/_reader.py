"""The safe reader: reads files inside one directory and nothing else, and says which
directories previews can name so that ``read_result`` reads their files back."""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path

from ..exceptions import ReaderError
from ._files import TMP_PREFIX

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "MAX_READ_BYTES",
    "WorkspaceReader",
    "show",
    "split_lines",
    "workspace_path_refusal",
]

MAX_PATH_CHARS = 4_096
MAX_NAME_BYTES = 255
MAX_READ_BYTES = 256 << 20
"""The reader refuses files bigger than this (persisted outputs are far smaller)."""

# chars that render like "/", "\\" or "." but are not; NFKC folds most of them, not all
_LOOKALIKES = frozenset(
    "\u2024\u2025\u2026\uff0e\ufe52\uff61\u0701\u0702\ua4f8"  # dot leaders, full stops
    "\uff0f\u2215\u2044\u29f8\u2571\u1735\u2cc6\u3033"  # slashes
    "\uff3c\u2216\u29f5\u29f9\ufe68\u20e5"  # backslashes
)


def split_lines(text: str) -> list[str]:
    """``text`` cut after every ``\\n`` (only that: the count matches the summaries' line count).

    ``"".join(split_lines(t)) == t`` for every ``t``.

        >>> split_lines("a\\nb\\r\\nc")
        ['a\\n', 'b\\r\\n', 'c']
    """
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


class WorkspaceReader:
    """Reads files inside one directory, and nothing else.

    A path is refused (:class:`ReaderError`) when it holds a NUL byte, a lone surrogate, a ``..``
    component, a char that only looks like a slash or a dot, or is too long; when it is absolute and not under the
    root; when, with every symlink resolved, it is not under the root; and when it is not a
    regular file. The file is then opened without following a last-moment symlink and checked
    again through its open descriptor, so a swap between the check and the read gains nothing.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def resolve_inside(self, path: str | os.PathLike[str]) -> Path:
        """The real path of ``path`` if it is a regular file inside the root."""
        text = self._check_text(path)
        candidate = Path(text)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        elif not candidate.is_relative_to(self.root):
            raise ReaderError(f"refused: {show(text)} is outside the session workspace")
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise ReaderError(f"no such file in the session workspace: {show(text)}") from exc
        if real == self.root or not real.is_relative_to(self.root):
            raise ReaderError(f"refused: {show(text)} leads outside the session workspace")
        if not real.is_file():
            raise ReaderError(f"refused: {show(text)} is not a regular file")
        if real.name.startswith(TMP_PREFIX):  # a write in progress, or cut short by a crash
            raise ReaderError(f"refused: {show(text)} is an unfinished write")
        return real

    def read_text(self, path: str | os.PathLike[str]) -> str:
        """The whole text of a file inside the root (UTF-8; undecodable bytes replaced)."""
        real = self.resolve_inside(path)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(real, flags | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise ReaderError(f"cannot read {show(os.fspath(path))}: {exc.strerror}") from exc
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ReaderError(f"refused: {show(os.fspath(path))} is not a regular file")
            self._check_descriptor(fd, path)
            if info.st_size > MAX_READ_BYTES:
                raise ReaderError(
                    f"refused: {show(os.fspath(path))} is {info.st_size:,} bytes "
                    f"(the reader stops at {MAX_READ_BYTES:,})"
                )
            data = handle.read(MAX_READ_BYTES + 1)
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace")

    def read(self, path: str | os.PathLike[str], start_line: int = 1, end_line: int | None = None) -> str:
        """Lines ``start_line`` to ``end_line`` (1-based, inclusive) of a file inside the root."""
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ReaderError(f"invalid line range {start_line}-{end_line if end_line is not None else ''}")
        lines = split_lines(self.read_text(path))
        return "".join(lines[start_line - 1 : end_line])

    def _check_text(self, path: str | os.PathLike[str]) -> str:
        """Refusals that need no filesystem access."""
        raw = os.fspath(path)
        if not isinstance(raw, str):
            raise ReaderError("refused: a path must be text, not bytes")
        problem = _text_refusal(raw)
        if problem is not None:
            raise ReaderError(f"refused: {problem}")
        return raw

    def _check_descriptor(self, fd: int, path: str | os.PathLike[str]) -> None:
        """Where Linux tells which file a descriptor holds, it must still be inside the root."""
        try:
            opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return  # no /proc: the O_NOFOLLOW open and the resolve above are what we have
        if not opened.is_relative_to(self.root):
            raise ReaderError(f"refused: {show(os.fspath(path))} moved outside the session workspace")

    def __repr__(self) -> str:
        return f"WorkspaceReader({str(self.root)!r})"


def _text_refusal(raw: str) -> str | None:
    """Why the reader refuses the path ``raw`` on its text alone; ``None`` if it does not."""
    if not raw:
        return "empty path"
    if "\x00" in raw:
        return "the path contains a NUL byte"
    if len(raw) > MAX_PATH_CHARS:
        return f"the path is {len(raw):,} chars long"
    if not raw.isascii():
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError:
            return "the path holds a lone surrogate (it is not valid text)"
    if any(c in _LOOKALIKES for c in raw) or _folds_to_separator(raw):
        return f"{show(raw)} has chars that look like a slash or a dot"
    components = raw.split("/")
    if ".." in components:
        return f"{show(raw)} has a '..' component"
    if "\\" in raw:
        return f"{show(raw)} has a backslash (not a path separator here)"
    if any(len(c.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for c in components):
        return f"{show(raw)} has a name longer than {MAX_NAME_BYTES} bytes"
    return None


_LONGEST_SAVED = len("/tool-results/budget__.txt") + 64 + 16
"""Chars a persisted file's path adds to the workspace's."""


def workspace_path_refusal(root: str) -> str | None:
    """Why ``root`` cannot be a session workspace, or ``None``: a preview names its saved files
    as ``[full output saved to PATH]``, read back to the end of the line or the first ``]``, and
    ``read_result`` must accept the path the model copies from it. So the path holds no ``]``
    and no control char (a line break ends it; the model may not copy the others), and nothing
    the reader refuses (a backslash, a char that looks like a slash or a dot such as ``…`` or
    ``．``, a lone surrogate from bytes that are not UTF-8), and is short enough."""
    if "]" in root:
        return "the path holds a ']', which would end the path a preview names"
    if any(c < " " or c == "\x7f" for c in root):
        return "the path holds a control char (a line break would end the path a preview names)"
    problem = _text_refusal(root)
    if problem is None and len(root) + _LONGEST_SAVED > MAX_PATH_CHARS:
        problem = "the path is too long for the saved files in it to be read back"
    # the caller names the path once; read_result would refuse the files' paths for this reason
    return None if problem is None else problem.replace(show(root), "the path")


def _folds_to_separator(text: str) -> bool:
    """True when compatibility folding would turn some char into a separator or a dot."""
    folded = unicodedata.normalize("NFKC", text)
    if folded == text:
        return False
    return any(folded.count(c) != text.count(c) for c in "/.\\")


def show(text: str) -> str:
    """A path for an error message: short and printable."""
    shown = text if len(text) <= 120 else text[:100] + "..." + text[-16:]
    return repr(shown)
