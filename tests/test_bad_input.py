"""Bad input: every malformed history in ``tests/corpus`` (and the huge ones made here) gets either
a documented repair or a typed error naming the message and field; the CLI, a real subprocess,
exits 2 with one line on stderr and never a traceback.

The corpus and what each file must give are listed in ``tests/corpus/README.md``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep import DetectionError, FormatError, Session
from toolkeep.policies import POLICIES
from toolkeep.shorten import CCR_MARKER_RE

from .test_cli_core import TOOLKEEP, one_error_line, run

CORPUS = Path(__file__).with_name("corpus")

# file -> (format for the API and --format, index, field, words the one-line message must hold)
ERRORS: dict[str, tuple[str, int | None, str | None, str]] = {
    "list-of-numbers.json": ("auto", 0, None, "could not detect"),
    "missing-role.json": ("auto", 1, "role", "could not detect"),
    "role-number.json": ("auto", 0, "role", "could not detect"),
    "content-number.json": ("auto", 0, "content", "could not detect"),
    "content-object.json": ("auto", 0, "content", "could not detect"),
    "result-content-number.json": ("auto", 1, "content[0].content", "must be a string or a list"),
    "result-id-number.json": ("auto", 1, "content[0].tool_use_id", "must be a string"),
    "call-id-number.json": ("auto", 1, "tool_calls[0].id", "must be a string"),
    "function-string.json": ("auto", 1, "tool_calls[0].function", "must be an object"),
}
# the same files with the format named: the adapter's own error, same message and field
NAMED_ERRORS: dict[str, tuple[str, int, str | None]] = {
    "list-of-numbers.json": ("anthropic", 0, None),
    "missing-role.json": ("anthropic", 1, "role"),
    "role-number.json": ("openai-chat", 0, "role"),
    "content-number.json": ("anthropic", 0, "content"),
    "content-object.json": ("openai-chat", 0, "content"),
}
# documents the CLI refuses before any format is involved: file -> words of the one line
UNREADABLE: dict[str, str] = {
    "not-json.txt": "invalid JSON",
    "empty.json": "invalid JSON",
    "truncated.json": "invalid JSON",
    "invalid-utf8.json": "not valid UTF-8 (byte 33)",
    "utf16.json": "not valid UTF-8",
    "huge-integer.json": "invalid JSON",
    "top-number.json": "expected a JSON list of messages",
    "top-string.json": "expected a JSON list of messages",
    "top-null.json": "expected a JSON list of messages",
    "object-without-messages.json": "expected a JSON list of messages",
    "messages-not-a-list.json": "expected a JSON list of messages",
}
# file -> the repairs (kind, input index) the report must list, in order
REPAIRS: dict[str, list[tuple[str, int]]] = {
    "call-without-name-anthropic.json": [("invalid_calls_pruned", 1), ("orphans_removed", 2)],
    "call-without-name-openai.json": [("invalid_calls_pruned", 1), ("orphans_removed", 2)],
    "call-without-id.json": [("invalid_calls_pruned", 1), ("empty_assistant_dropped", 1)],
    "result-without-id.json": [("orphans_removed", 2), ("synthetic", 1)],
    "call-id-refused-anthropic.json": [("renamed", 1), ("renamed", 1)],
    "call-id-too-long-openai.json": [("renamed", 1)],
    "blank-text-anthropic.json": [
        ("blank_text_dropped", 1),
        ("blank_text_dropped", 2),
        ("blank_text_dropped", 4),
    ],
}
# files that are odd but valid: they come back exactly as they went in
UNCHANGED = ("nul-chars.json", "lone-surrogates.json", "crlf-lines.json", "utf8-bom.json")


def load(name: str) -> Any:
    return json.loads((CORPUS / name).read_bytes().decode("utf-8-sig"))


def test_corpus_is_listed() -> None:
    """Every corpus file is in exactly one table above, so none is left untested."""
    tables = [set(ERRORS), set(UNREADABLE), set(REPAIRS), set(UNCHANGED)]
    files = {p.name for p in CORPUS.iterdir() if p.is_file() and p.name != "README.md"}
    assert set().union(*tables) == files
    assert sum(len(t) for t in tables) == len(files)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_api_error_names_message_and_field(name: str, session: Session) -> None:
    """``prepare`` raises a FormatError carrying the message index and field of the fault."""
    fmt, index, field, words = ERRORS[name]
    messages = load(name)
    with pytest.raises(FormatError) as caught:
        session.prepare(messages, format=fmt)
    assert (caught.value.index, caught.value.field) == (index, field)
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"message {index}")
    assert messages == load(name)  # the caller's data is untouched even on the way to an error


@pytest.mark.parametrize("name", sorted(NAMED_ERRORS))
def test_api_error_with_named_format(name: str, session: Session) -> None:
    """With the format named, the adapter's own error gives the same index and field."""
    fmt, index, field = NAMED_ERRORS[name]
    with pytest.raises(FormatError) as caught:
        session.prepare(load(name), format=fmt)
    assert not isinstance(caught.value, DetectionError)
    assert (caught.value.index, caught.value.field) == (index, field)


@pytest.mark.parametrize("value", [42, "a history", None, b"[]", 3.5])
def test_api_not_a_list(value: Any, session: Session) -> None:
    """Anything but a list or tuple of messages (or a request object) is a FormatError, never an
    AttributeError."""
    with pytest.raises(FormatError, match="list of messages"):
        session.prepare(value)


@pytest.mark.parametrize(
    ("value", "words", "field"),
    [
        ({"model": "m", "max_tokens": 5}, "holds its history under 'messages', 'input' or 'contents'", None),
        ({"role": "user", "content": "hi"}, "(its keys: 'role', 'content')", None),
        ({"messages": {"role": "user"}}, "'messages' must be a list of messages, got dict", "messages"),
        ({"messages": "hi"}, "'messages' must be a list of messages, got str", "messages"),
        ({"input": 3}, "'input' must be a list or a string, got int", "input"),
        ({"contents": None}, "'contents' must be a list or a string, got NoneType", "contents"),
        ({"messages": [], "input": []}, "one history, this one has 'messages' and 'input'", None),
    ],
)
def test_api_bad_request_object(value: Any, words: str, field: str | None, session: Session) -> None:
    """A mapping is a request object: one without a history list (or string) is a FormatError
    naming the key, and the session is left as it was."""
    with pytest.raises(FormatError) as caught:
        session.prepare(value)
    assert words in str(caught.value) and caught.value.field == field
    assert session.prepare([{"role": "user", "content": "hi"}])[0] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_cli_error_one_line(name: str, tmp_path: Path) -> None:
    """``prepare`` and ``validate`` exit 2 with one line naming message and field, no traceback."""
    fmt, index, field, words = ERRORS[name]
    for command in (["prepare", "--workspace", str(tmp_path / "ws")], ["validate"]):
        line = one_error_line(run(command[0], str(CORPUS / name), "--format", fmt, *command[1:]))
        where = f"message {index}" + (f", field {field!r}" if field else "")
        assert line.startswith(f"toolkeep: error: {where}: "), line
        assert words in line


@pytest.mark.parametrize("name", sorted(NAMED_ERRORS))
def test_cli_error_named_format(name: str) -> None:
    """With ``--format`` named, the one line still says which message and field."""
    fmt, index, field = NAMED_ERRORS[name]
    line = one_error_line(run("validate", str(CORPUS / name), "--format", fmt))
    assert f"message {index}" in line and (field is None or repr(field) in line)


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_cli_unreadable_document(name: str, tmp_path: Path) -> None:
    """A document that is not a JSON message list gets one line saying why, from file and stdin."""
    words = UNREADABLE[name]
    data = (CORPUS / name).read_bytes()
    line = one_error_line(run("prepare", str(CORPUS / name), "--workspace", str(tmp_path / "ws")))
    assert words in line and name in line
    line = one_error_line(run("validate", "-", stdin=data))
    assert words.replace(" (byte 33)", "") in line


@pytest.mark.parametrize("name", sorted(REPAIRS))
def test_repairs_are_reported_and_valid(name: str, session: Session, tmp_path: Path) -> None:
    """Calls without a name or id and results without an id are repaired, reported, and valid after."""
    messages = load(name)
    out, report = session.prepare(messages)
    assert [(r.kind, r.index) for r in report.repairs] == REPAIRS[name]
    assert toolkeep.validate(out) == []
    calls = [c for m in toolkeep.get_format(report.format).load(out) for c in m.calls]
    assert all(c.id and c.name for c in calls)
    assert messages == load(name)
    result = run("prepare", str(CORPUS / name), "--workspace", str(tmp_path / "cli"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == out


@pytest.mark.parametrize("name", UNCHANGED)
def test_odd_but_valid_comes_back_as_is(name: str, session: Session, tmp_path: Path) -> None:
    """NUL chars, lone surrogates, CRLF line breaks and a BOM go through unchanged (API and CLI)."""
    messages = load(name)
    out, report = session.prepare(messages)
    assert out == messages and not report.changed
    result = run("prepare", str(CORPUS / name), "--workspace", str(tmp_path / "cli"))
    assert result.returncode == 0, result.stderr
    chars = f"{report.chars_before:,} -> {report.chars_before:,}"
    assert re.fullmatch(
        rf"toolkeep: policy economy, .*: 0 repairs; .*chars {chars}\n", result.stderr.decode()
    )
    assert json.loads(result.stdout) == messages


def big_result_history(text: str, call_id: str = "toolu_big") -> list[Any]:
    return [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "cat", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}]},
    ]


@pytest.mark.parametrize(
    "text",
    [
        "\r\n" * 30_000,
        "line\r\n" * 9_000,
        "\x00" * 40_000,
        "\ud800 half \udfff" * 3_000,
        "\r" * 25_000,
    ],
    ids=["crlf-only", "crlf-lines", "nul-only", "lone-surrogates", "cr-only"],
)
def test_odd_big_results_are_cut_and_recalled_byte_exact(text: str, session: Session) -> None:
    """CRLF-only, NUL-only, surrogate and CR-only outputs are cut, saved and recalled byte-exact."""
    out, report = session.prepare(big_result_history(text))
    sent = out[2]["content"][0]["content"]
    assert len(sent) < len(text) and report.save_errors == []
    (key,) = CCR_MARKER_RE.findall(sent)
    assert session.recall(key) == text
    path = re.search(r"full output saved to ([^\]]+)\]", sent)
    assert path is not None
    assert session.workspace.reader.read_text(path[1]) == text
    assert session.prepare(out)[0] == out  # idempotent on odd text too


def test_lone_surrogates_and_bad_bytes_on_the_command_line(tmp_path: Path) -> None:
    """Arguments that are not valid UTF-8 (lone surrogates once decoded) give one line, not a crash."""
    good = tmp_path / "ok.json"
    good.write_text('[{"role": "user", "content": "hi"}]')
    ws = str(tmp_path / "ws")
    cases: list[tuple[list[str | bytes], str]] = [
        (["prepare", b"\xff\xfe.json"], "cannot read"),
        (["prepare", str(good), "--format", b"\xff"], "Invalid value for '--format'"),
        (["prepare", str(good), "--store", b"redis://\xff:1/0", "--workspace", ws], "Redis archive"),
        (["prepare", str(good), "-o", b"/nonexistent/\xff.json", "--workspace", ws], "cannot write"),
        (["recall", b"\xff\xfe", "--workspace", ws], "invalid archive key"),
        (["recall", "\ud800".encode("utf-8", "surrogatepass"), "--workspace", ws], "invalid archive key"),
    ]
    (tmp_path / "ws" / "archive").mkdir(parents=True)
    for args, words in cases:
        raw = [a if isinstance(a, bytes) else a.encode() for a in args]
        line = one_error_line(run_bytes(*raw))
        assert words in line, line
    result = run_bytes(b"read", b"\xff", b"--workspace", ws.encode())
    err = result.stderr.decode()
    assert result.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err


def run_bytes(*args: bytes) -> subprocess.CompletedProcess[bytes]:
    """The CLI with arguments given as raw bytes (as a shell passes them)."""
    return subprocess.run([*(a.encode() for a in TOOLKEEP), *args], capture_output=True, timeout=120)


def nested(depth: int) -> list[Any]:
    """A list nested ``depth`` deep, built without recursion."""
    top: list[Any] = []
    cur = top
    for _ in range(depth - 1):
        cur.append([])
        cur = cur[0]
    return top


def test_deep_nesting_api(session: Session) -> None:
    """A content nested 100,000 deep is a typed error; the same depth inside a tool input passes."""
    with pytest.raises(DetectionError) as caught:
        session.prepare([{"role": "user", "content": "hi"}, {"role": "user", "content": nested(100_000)}])
    assert caught.value.index == 1
    with pytest.raises(FormatError) as named:
        session.prepare([{"role": "user", "content": nested(100_000)}], format="anthropic")
    assert named.value.index == 0
    history = big_result_history("ok")
    history[1] = {**history[1], "content": [{**history[1]["content"][0], "input": {"x": nested(100_000)}}]}
    out, _ = session.prepare(history)
    assert out[1] is history[1]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_deep_nesting_in_a_call_input_passes_every_policy(policy: str, tmp_path: Path) -> None:
    """The model's arguments nested 100,000 deep never raise, whatever the policy: the cache-aware
    one measures and shortens call inputs, and leaves what lies too deep as it came."""
    history = big_result_history("ok")
    history[1] = {**history[1], "content": [{**history[1]["content"][0], "input": {"x": nested(100_000)}}]}
    with Session(toolkeep.Config(policy=policy), workspace=tmp_path / "ws") as session:
        out, _ = session.prepare(history)
        assert out[1] is history[1]
        again, _ = session.prepare([*history, {"role": "assistant", "content": "done"}])
    assert again[1] is history[1]
    assert toolkeep.validate(again, "anthropic") == []


@pytest.mark.parametrize("where", ["top", "content", "input"])
def test_deep_nesting_cli(where: str, tmp_path: Path) -> None:
    """JSON nested 100,000 deep: exit 2 with one line (RecursionError never escapes)."""
    deep = "[" * 100_000 + "]" * 100_000
    doc = {
        "top": deep,
        "content": f'[{{"role": "user", "content": {deep}}}]',
        "input": '[{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "a", '
        f'"input": {deep}}}]}}]',
    }[where]
    source = tmp_path / "deep.json"
    source.write_text(doc)
    line = one_error_line(run("prepare", str(source), "--workspace", str(tmp_path / "ws")))
    assert "nested too deeply" in line


def test_as_deep_as_json_reads_goes_through(tmp_path: Path) -> None:
    """The deepest tool input ``json`` itself can read is prepared and written back, exit 0."""
    depth = next(d for d in range(sys.getrecursionlimit(), 0, -10) if _parses(d))
    history = big_result_history("ok")
    history[1]["content"][0]["input"] = {"x": nested(depth)}
    source = tmp_path / "deep.json"
    source.write_text(json.dumps(history))
    result = run("prepare", str(source), "--workspace", str(tmp_path / "ws"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == history


def _parses(depth: int) -> bool:
    try:
        json.loads('{"a": [{"b": {"x": ' + "[" * depth + "]" * depth + "}}]}")
    except RecursionError:
        return False
    return True


def test_hundred_megabyte_result(session: Session) -> None:
    """A 100 MB result is persisted whole, sent as a preview, and recalled byte-exact."""
    text = "".join(f"{i:09d} some tool output line\n" for i in range(100 * 1024 * 1024 // 32))
    history = big_result_history(text)
    out, report = session.prepare(history)
    sent = out[2]["content"][0]["content"]
    assert len(sent) < 10_000 and report.save_errors == []
    (key,) = CCR_MARKER_RE.findall(sent)
    assert session.recall(key) == text
    saved = re.search(r"full output saved to ([^\]]+)\]", sent)
    assert saved is not None and Path(saved[1]).stat().st_size == len(text)
    assert history[2]["content"][0]["content"] is text


def test_hundred_megabyte_result_cli(tmp_path: Path) -> None:
    """The CLI prepares a 100 MB result file to a small output and recalls it byte-exact."""
    text = "x" * (100 * 1024 * 1024)
    source = tmp_path / "big.json"
    source.write_text(json.dumps(big_result_history(text)))
    ws = tmp_path / "ws"
    result = run("prepare", str(source), "--workspace", str(ws))
    assert result.returncode == 0, result.stderr
    assert len(result.stdout) < 20_000
    (key,) = CCR_MARKER_RE.findall(result.stdout.decode())
    recalled = run("recall", key, "--workspace", str(ws))
    assert recalled.returncode == 0 and recalled.stdout == text.encode()


@pytest.mark.slow  # a hundred thousand messages per policy: minutes
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_hundred_thousand_messages(policy: str, tmp_path: Path) -> None:
    """A 100,000-message history is prepared whole under every policy: valid, every result kept
    or cut with a marker that recalls it (SPEC's summarizes the 50 big ones)."""
    messages: list[Any] = [{"role": "user", "content": "start"}]
    bodies: dict[str, str] = {}
    for i in range(49_999):
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "ls", "input": {}}]}
        )
        body = bodies[f"t{i}"] = "x" * 4_000 if i % 1_000 == 0 else f"out {i}"
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": body}]}
        )
    messages.append({"role": "assistant", "content": "done"})
    assert len(messages) == 100_000
    with Session(toolkeep.Config(policy=policy), workspace=tmp_path / "ws") as session:
        out, report = session.prepare(messages)
        assert len(out) == 100_000 and report.total == 49_999 and report.repairs == []
        assert toolkeep.validate(out, "anthropic") == []
        results = [b for m in out[2::2] for b in m["content"]]
        assert [b["tool_use_id"] for b in results] == list(bodies)
        cut = [b for b in results if b["content"] != bodies[b["tool_use_id"]]]
        for block in cut:
            (key,) = CCR_MARKER_RE.findall(block["content"])
            assert session.recall(key) == bodies[block["tool_use_id"]]
    if policy == "spec":
        assert report.summarized == len(cut) == 50


def test_huge_bad_value_gives_a_short_error(tmp_path: Path) -> None:
    """A 1 MB role is quoted by head and tail only: the error (API) and the CLI line stay short."""
    messages = [{"role": "x" * 1_000_000, "content": "hi"}]
    with pytest.raises(FormatError) as caught:
        Session(workspace=tmp_path / "api").prepare(messages, format="anthropic")
    assert caught.value.index == 0 and caught.value.field == "role"
    assert 500 < len(str(caught.value)) < 1_100 and "chars ...]" in str(caught.value)
    source = tmp_path / "big-role.json"
    source.write_text(json.dumps(messages))
    line = one_error_line(
        run("prepare", str(source), "--format", "anthropic", "--workspace", str(tmp_path / "w"))
    )
    assert len(line) < 1_200 and "message 0, field 'role'" in line
