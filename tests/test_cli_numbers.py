"""The command line keeps numbers JSON allows as numbers JSON allows: ``1e400`` (valid JSON, past
float's range) is written back as it was read, never as ``Infinity``; ``NaN`` and ``Infinity``,
which Python's parser takes and JSON does not, are refused with exit 2 and one line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkeep.cli._app import dumps, read_json
from toolkeep.jsonnumbers import _encoded

from .strategies import property_settings
from .test_cli_core import one_error_line, run

HISTORY = (
    '[{"role": "user", "content": "go"},'
    ' {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "calc",'
    ' "input": {"big": 1e400, "small": -1E+400, "plain": 2.5, "n": 7}}]},'
    ' {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]'
)


def strict(text: str) -> Any:
    """Parse ``text`` as JSON and nothing else (Python's parser also takes NaN and Infinity)."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in the output: not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("indent", [None, 2])
def test_a_number_past_float_range_comes_out_as_it_went_in(indent: int | None, tmp_path: Path) -> None:
    """``toolkeep prepare`` writes ``1e400`` and ``-1E+400`` back literally (they read as
    infinities everywhere in between) and the output is strict JSON."""
    source = tmp_path / "in.json"
    source.write_text(HISTORY, encoding="utf-8")
    target = tmp_path / "out.json"
    args = ["prepare", str(source), "-o", str(target), "--workspace", str(tmp_path / "ws")]
    result = run(*args, *(["--indent", str(indent)] if indent is not None else []))
    assert result.returncode == 0, result.stderr.decode()
    text = target.read_text(encoding="utf-8")
    assert "Infinity" not in text and "1e400" in text and "-1E+400" in text
    assert strict(text) == json.loads(HISTORY)
    assert strict(text)[1]["content"][0]["input"]["big"] == math.inf


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(constant: str, tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    source.write_text(HISTORY.replace("2.5", constant), encoding="utf-8")
    line = one_error_line(run("prepare", str(source), "--workspace", str(tmp_path / "ws")))
    assert line == f"toolkeep: error: {source}: invalid JSON: {constant} is not a JSON number"
    assert one_error_line(run("validate", str(source))).endswith(f"{constant} is not a JSON number")


def test_a_number_literal_survives_the_ascii_fallback(tmp_path: Path) -> None:
    """Text no encoding can write (a lone surrogate) falls back to ASCII escapes; the literal
    stays as it is there too."""
    source = tmp_path / "in.json"
    source.write_text(HISTORY.replace('"go"', '"\\ud800"'), encoding="utf-8")
    document = read_json(str(source))
    data = dumps(document, None)
    assert b"\\ud800" in data and b"1e400" in data and b"Infinity" not in data


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.sampled_from(["a", "é", "🙂", "\n", '"', "\\", "\x00", "\ud800"]), max_size=8),
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@property_settings(200)
@given(value=_values, indent=st.sampled_from([None, 0, 1, 4]), ascii=st.booleans())
def test_the_literal_writer_writes_what_json_dumps_writes(
    value: Any, indent: int | None, ascii: bool
) -> None:
    """Where no number needs its literal, the writer used for those that do gives the bytes
    ``json.dumps`` gives, so an output that holds one is laid out as any other."""
    assert _encoded(value, indent, ascii, 0) == json.dumps(value, ensure_ascii=ascii, indent=indent)
