"""The workspace reader (SPEC 5): it pages files inside the session workspace and nothing else."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkeep import Config, ReaderError, Workspace
from toolkeep.recall import handle_tool_call, read_answer
from toolkeep.workspace import MAX_NAME_BYTES, WorkspaceReader, split_lines

from .test_recall import follow_pages, page_body

SECRET = "TOP-SECRET-OUTSIDE-THE-WORKSPACE\n"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Workspace, Path]]:
    """A workspace with some files and symlinks, and a secret file beside it (outside)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    ws = Workspace(tmp_path / "ws")
    (ws.results_dir / "budget_t1_0123456789abcdef.txt").write_text("one\ntwo\nthree\n")
    scratch = ws.scratch_dir
    (scratch / "notes.txt").write_text("inside\n")
    (scratch / "link-out").symlink_to(outside / "secret.txt")
    (scratch / "dir-out").symlink_to(outside, target_is_directory=True)
    (scratch / "link-etc").symlink_to("/etc/passwd")
    (scratch / "link-in").symlink_to(scratch / "notes.txt")
    (scratch / "rel-out").symlink_to("../../outside/secret.txt")
    (scratch / "loop-a").symlink_to(scratch / "loop-b")
    (scratch / "loop-b").symlink_to(scratch / "loop-a")
    (scratch / "dangling").symlink_to(scratch / "nothing-here")
    (scratch / "root-link").symlink_to(ws.path, target_is_directory=True)
    (scratch / "up-link").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(scratch / "fifo")
    # files whose names only look like a way out; the reader must not open even these
    (scratch / "\u2024\u2024").mkdir()
    (scratch / "\u2024\u2024" / "x.txt").write_text("decoy\n")
    yield ws, outside
    ws.close()


def hostile_paths(ws: Path, outside: Path) -> list[str]:
    """Paths that must not be readable, one per way of trying."""
    secret = outside / "secret.txt"
    rel_up = os.path.relpath(secret, ws)
    return [
        # relative climbs
        rel_up,
        "../outside/secret.txt",
        "./../outside/secret.txt",
        "scratch/../../outside/secret.txt",
        "tool-results/../../outside/secret.txt",
        "scratch/../tool-results/budget_t1_0123456789abcdef.txt",  # '..' even when it lands inside
        "../" * 40 + "etc/passwd",
        "..",
        ".",
        "",
        # absolute, elsewhere
        str(secret),
        "/etc/passwd",
        "/proc/self/environ",
        "/dev/zero",
        "/",
        str(ws.parent),
        str(ws),
        str(ws) + "/../outside/secret.txt",
        str(ws) + "-evil/secret.txt",
        "//etc/passwd",
        # symlinks leaving the workspace
        "scratch/link-out",
        "scratch/dir-out/secret.txt",
        str(ws / "scratch" / "dir-out" / "secret.txt"),
        "scratch/link-etc",
        "scratch/rel-out",
        "scratch/up-link/outside/secret.txt",
        "scratch/loop-a",
        "scratch/dangling",
        "scratch/root-link",
        # not regular files
        "scratch",
        "tool-results/",
        "scratch/fifo",
        # look-alikes of '/', '\\' and '.'
        "..\uff0foutside\uff0fsecret.txt",  # fullwidth solidus
        "..\u2215outside\u2215secret.txt",  # division slash
        "..\u2044outside\u2044secret.txt",  # fraction slash
        "\u2024\u2024/outside/secret.txt",  # one dot leader
        "\u2025/outside/secret.txt",  # two dot leader
        "\uff0e\uff0e/outside/secret.txt",  # fullwidth full stop
        "\ufe52\ufe52/outside/secret.txt",  # small full stop
        "scratch/\u2024\u2024/x.txt",  # a real file, but named with dot leaders
        "..\\outside\\secret.txt",  # backslashes
        "..\uff3coutside\uff3csecret.txt",  # fullwidth reverse solidus
        "%2e%2e/outside/secret.txt",
        "~/../outside/secret.txt",
        "file://" + str(secret),
        # very long
        "a" * (MAX_NAME_BYTES + 1),
        "é" * 200,  # 400 UTF-8 bytes in one name
        "a/" * 3_000 + "x",
        "scratch/" + "x" * 10_000,
        # NUL
        "scratch/notes.txt\x00../../outside/secret.txt",
        "\x00",
    ]


class TestHostilePaths:
    def test_none_is_readable(self, world: tuple[Workspace, Path]) -> None:
        """Every hostile path raises ReaderError, and the secret beside the workspace is real."""
        ws, outside = world
        assert (outside / "secret.txt").read_text() == SECRET  # the target exists: refusals mean something
        reader = ws.reader
        readable = []
        for path in hostile_paths(ws.path, outside):
            try:
                reader.read_text(path)
            except ReaderError:
                continue
            readable.append(path)
        assert readable == []

    def test_the_tool_answers_instead_of_raising(self, world: tuple[Workspace, Path]) -> None:
        """Through the read_result tool every hostile path gets a refusal sentence, no content."""
        ws, outside = world
        for path in hostile_paths(ws.path, outside):
            answer = handle_tool_call("read_result", {"path": path}, store=None, workspace=ws)
            assert answer is not None and answer.startswith("[read_result: "), path
            assert "TOP-SECRET" not in answer

    def test_bytes_path_refused(self, world: tuple[Workspace, Path]) -> None:
        """A bytes path is refused rather than guessed at."""
        ws, _ = world
        with pytest.raises(ReaderError, match="text"):
            ws.reader.read_text(b"scratch/notes.txt")  # type: ignore[arg-type]

    def test_socket_refused(self, world: tuple[Workspace, Path]) -> None:
        """A Unix socket inside the workspace is not a regular file."""
        ws, _ = world
        path = ws.scratch_dir / "s.sock"
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
            with pytest.raises(ReaderError, match="regular file"):
                ws.reader.read_text("scratch/s.sock")

    def test_errors_are_clear(self, world: tuple[Workspace, Path]) -> None:
        """Each refusal says why: outside, '..', NUL, look-alike, not a file, no such file."""
        ws, outside = world
        reader = ws.reader
        cases = {
            str(outside / "secret.txt"): "outside the session workspace",
            "../x": "'..' component",
            "a\x00b": "NUL",
            "..\uff0fx": "look like a slash or a dot",
            "scratch": "not a regular file",
            "scratch/link-out": "leads outside",
            "scratch/missing.txt": "no such file",
        }
        for path, words in cases.items():
            with pytest.raises(ReaderError, match=words):
                reader.read_text(path)

    def test_swapped_symlink_after_check_is_caught(self, world: tuple[Workspace, Path]) -> None:
        """A file replaced by a symlink between the check and the open is not followed."""
        ws, outside = world
        reader = ws.reader
        target = ws.scratch_dir / "swap.txt"
        target.write_text("fine\n")

        class Racing(WorkspaceReader):
            def resolve_inside(self, path: str | os.PathLike[str]) -> Path:
                real = super().resolve_inside(path)
                real.unlink()  # the attacker's move, right after the check
                real.symlink_to(outside / "secret.txt")
                return real

        with pytest.raises(ReaderError):
            Racing(reader.root).read_text("scratch/swap.txt")


class TestReading:
    def test_relative_absolute_and_inner_symlink(self, world: tuple[Workspace, Path]) -> None:
        """A file is read by its path relative to the workspace, its absolute path, or a symlink
        that stays inside."""
        ws, _ = world
        reader = ws.reader
        name = "tool-results/budget_t1_0123456789abcdef.txt"
        assert reader.read_text(name) == "one\ntwo\nthree\n"
        assert reader.read_text(str(ws.path / name)) == "one\ntwo\nthree\n"
        assert reader.read_text("scratch/link-in") == "inside\n"
        assert reader.read_text("./scratch//notes.txt") == "inside\n"

    def test_line_ranges(self, world: tuple[Workspace, Path]) -> None:
        """start_line/end_line are 1-based and inclusive; a bad range is refused."""
        ws, _ = world
        name = "tool-results/budget_t1_0123456789abcdef.txt"
        assert ws.read(name, 2, 2) == "two\n"
        assert ws.read(name, 2) == "two\nthree\n"
        assert ws.read(name, 3, 99) == "three\n"
        for start, end in ((0, 1), (3, 2)):
            with pytest.raises(ReaderError, match="line range"):
                ws.read(name, start, end)

    def test_persisted_output_is_byte_exact(self, world: tuple[Workspace, Path]) -> None:
        """What Workspace.persist wrote, lone surrogates and CRLF included, reads back exactly."""
        ws, _ = world
        text = "a\r\nb\ud800c\n\u2028d" * 500
        path = ws.persist("call/1", text)
        assert ws.reader.read_text(str(path)) == text
        assert "".join(split_lines(text)) == text

    def test_paged_through_the_tool(self, world: tuple[Workspace, Path]) -> None:
        """read_result pages a big file; following the notes gives the whole file back."""
        ws, _ = world
        text = "".join(f"{n:05d} {'x' * (n % 97)}\n" for n in range(4_000)) + "x" * 9_000
        path = str(ws.persist("big", text))
        config = Config(recall_page_chars=2_000)
        answers = follow_pages(lambda **more: read_answer(ws, path, config=config, **more))
        assert all(len(a) <= 2_000 for a in answers)
        assert "".join(page_body(a) for a in answers) == text
