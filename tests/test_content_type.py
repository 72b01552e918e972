"""Content types of the one-line summary (SPEC 6): the seed's rules, then evidence-based ones,
checked on small hand-written snippets and on the real tool output of ../shared's trajectories
(read at test time, never copied)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

import pytest

from toolkeep.content_type import detect_content_type, detect_content_type_seed
from toolkeep.formats.anthropic import result_text

from .conftest import TRAJECTORIES, shared_or_skip


class TestSeedRulesLiteral:
    @pytest.mark.parametrize(
        ("text", "kind"),
        [
            ('{"a": [1, 2]}', "JSON"),
            ("[1, 2, 3]", "JSON"),
            ("{not json at all", "text"),
            ("the package is installed", "Go source"),
            ("def f(): pass", "Python source"),
            ("a function here", "JavaScript source"),
            ("diff --git a/x b/x", "diff"),
            ("--- a/x\n+++ b/x", "diff"),
            ("commit 0123abcd\nAuthor: x", "git log"),
            ("hello", "text"),
        ],
    )
    def test_seed_function_keeps_chatcli_labels(self, text: str, kind: str) -> None:
        """``detect_content_type_seed`` is the seed's table, word for word."""
        assert detect_content_type_seed(text) == kind


class TestSeedRulesAsCode:
    @pytest.mark.parametrize(
        ("text", "kind"),
        [
            ('  {"a": 1}\n', "JSON"),
            ('package main\n\nimport "fmt"\n\nfunc main() { fmt.Println(1) }\n', "Go source"),
            ("import os\n\ndef main():\n    return os.getcwd()\n", "Python source"),
            ("async def go(x):\n    await x\n", "Python source"),
            ("function add(a, b) {\n  return a + b;\n}\n", "JavaScript source"),
            ("export default async function handler(req) {}\n", "JavaScript source"),
            ("const f = function (x) { return x }\n", "JavaScript source"),
            ("diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-a\n+b\n", "diff"),
            ("commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: A <a@b>\n\n    msg\n", "git log"),
        ],
    )
    def test_code_is_recognised(self, text: str, kind: str) -> None:
        """Code the seed's rules name is still named so."""
        assert detect_content_type(text) == kind

    @pytest.mark.parametrize(
        "text",
        [
            "Resolved 126 packages in 499ms\nwarning: The package `moto` has no extra\n",
            "# Plan\n\nWe package the app and define the function of each module.\n",
            "Collecting requests\n  Downloading package metadata\nSuccessfully installed 3 packages\n",
        ],
    )
    def test_prose_mentioning_keywords_is_not_code(self, text: str) -> None:
        """``package``, ``def`` or ``function`` in prose no longer makes Go, Python or JavaScript."""
        assert detect_content_type(text) not in ("Go source", "Python source", "JavaScript source")

    def test_java_package_clause_is_not_go(self) -> None:
        """``package com.x;`` is Java's package clause, not Go's."""
        text = 'package com.example;\n\nimport java.util.List;\n\npublic class A {\n  @Override\n  public String toString() { return ""; }\n}\n'
        assert detect_content_type(text) == "Java source"


class TestWrappers:
    def test_claude_code_read_numbers_are_looked_through(self) -> None:
        """``     1→`` prefixes of Claude Code's Read do not hide the code."""
        text = "".join(f"{n:6}→{line}\n" for n, line in enumerate(["package main", "", "func main() {}"], 1))
        assert detect_content_type(text) == "Go source"

    def test_cat_n_header_names_the_file(self) -> None:
        """OpenHands' cat -n header gives the file type by extension."""
        text = "Here's the result of running `cat -n` on /w/src/x.c:\n" + "".join(
            f"{n:6}\t{line}\n" for n, line in enumerate(["/* x */", "", "static int y;"], 1)
        )
        assert detect_content_type(text) == "C/C++ source"

    def test_swe_agent_header_and_colon_numbers(self) -> None:
        """SWE-agent's [File: ...] header, colon numbers and (N more lines) lines are looked through."""
        body = ['<?xml version="1.0"?>', "<project>", "  <name>x</name>", "</project>"]
        text = (
            "[File: /r/pom.xml (200 lines total)]\n(10 more lines above)\n"
            + "".join(f"{n}:{line}\n" for n, line in enumerate(body, 11))
            + "(180 more lines below)\n"
        )
        assert detect_content_type(text) == "XML"

    def test_returncode_output_tags(self) -> None:
        """mini-swe-agent's <returncode>/<output> tags do not make it XML."""
        inner = "total 8\ndrwxr-xr-x 2 root root 4096 Jan 1 00:00 .\n-rw-r--r-- 1 root root 12 Jan 1 00:00 a.py\n-rw-r--r-- 1 root root 12 Jan 1 00:00 b.py\n"
        assert (
            detect_content_type(f"<returncode>0</returncode>\n<output>\n{inner}</output>")
            == "directory listing"
        )

    def test_exit_code_line(self) -> None:
        """A leading ``Exit code 1`` line does not decide."""
        assert detect_content_type('Exit code 1\n{"error": "boom"}') == "JSON"

    def test_colon_numbers_alone_are_not_stripped(self) -> None:
        """Without a SWE-agent header, ``file:12:`` lines stay grep output."""
        text = "src/a.py:12:import os\nsrc/b.py:40:import sys\nsrc/c.py:7:import re\n"
        assert detect_content_type(text) == "grep output"

    @pytest.mark.parametrize(
        ("numbered", "kind"), [(71, "text"), (72, "directory listing"), (120, "directory listing")]
    )
    @pytest.mark.parametrize("newline", ["\n", "\r\n"])
    def test_numbers_are_stripped_when_most_sampled_lines_carry_one(
        self, numbered: int, kind: str, newline: str
    ) -> None:
        """Numbers are looked through when 60% of the first 120 lines carry one (72 of them);
        the numbered lines after those do not count, whatever the line ends."""
        lines = [f"src/pkg/mod_{i}.py" for i in range(300)]
        numbered_lines = [
            f"{i + 1:6}→{line}" if i < numbered or i >= 120 else line for i, line in enumerate(lines)
        ]
        assert detect_content_type(newline.join(numbered_lines)) == kind


class TestEvidenceRules:
    @pytest.mark.parametrize(
        ("text", "kind"),
        [
            ('Traceback (most recent call last):\n  File "a.py", line 1, in <module>\nValueError: x\n', "Python traceback"),
            ("Exception in thread \"main\" java.lang.NullPointerException\n\tat a.B.c(B.java:1)\n\tat a.B.d(B.java:2)\n\tat a.B.e(B.java:3)\n", "stack trace"),
            ("============================= test session starts ==============================\ncollected 3 items\n\n========================= 3 passed in 0.01s =========================\n", "test report"),
            (" ✓ src/a.test.tsx (3 tests) 12ms\n ✓ src/b.test.ts (1 test) 3ms\n\n Test Files  2 passed (2)\n      Tests  4 passed (4)\n", "test report"),
            ("<!DOCTYPE html>\n<html><body><p>x</p></body></html>\n", "HTML"),
            ('<?xml version="1.0"?>\n<a><b>1</b></a>\n', "XML"),
            ("I001 [*] Import block is un-sorted\n  --> pkg/a.py:3:1\nE501 Line too long\n  --> pkg/b.py:9:101\n", "lint output"),
            ("a.py:1:1: F401 'os' imported but unused\nb.py:2:80: E501 line too long\nc.py:3:1: E302 expected 2 blank lines\n", "lint output"),
            ('Found 3 matches for "x" in /r:\n/r/a.java (2 matches)\n/r/b.java (1 matches)\nEnd of matches for "x" in /r\n', "grep output"),
            ("2026-03-09 08:34:52.955 | INFO | a:b:1 - start\n2026-03-09 08:34:53.001 | INFO | a:b:2 - step\n2026-03-09 08:34:54.100 | WARNING | a:b:3 - slow\n", "log"),
            (".:\nREADME.md\nsrc\n\n./src:\nmain.py\nutil.py\n", "directory listing"),
            ("x/\n├── a.py\n├── b.py\n└── c/\n    └── d.py\n", "directory listing"),
            ("use std::io;\n\npub struct A { x: u8 }\n\nfn main() { let x = 1; }\n", "Rust source"),
            ("#[derive(Debug, Clone)]\npub struct EdgeId(pub u64);\n\npub enum Kind { A, B }\n", "Rust source"),
            ("#include <stdio.h>\n\nint main(void) {\n  return 0;\n}\n", "C/C++ source"),
            ("export interface User {\n  id: string;\n  age: number;\n}\n", "TypeScript source"),
            ("#!/bin/sh\nset -e\nif [ -f x ]; then echo y; fi\n", "shell script"),
            ('"""Models."""\n\nfrom pydantic import BaseModel\n\n\nclass A(BaseModel):\n    x: int\n', "Python source"),
            ("# Sentinel\n# local dev\nservices:\n  api:\n    image: x\n    ports:\n      - 8000\n", "YAML"),
            ("# Title\n\nSome text with a [link](http://x).\n\n- one\n- two\n", "Markdown"),
            ("a,b,c\n1,2,3\n4,5,6\n", "CSV"),
            ("", "text"),
            ("just one line of prose", "text"),
        ],
    )  # fmt: skip
    def test_rule(self, text: str, kind: str) -> None:
        """Each evidence rule recognises its own kind of output."""
        assert detect_content_type(text) == kind

    def test_markdown_table_is_not_a_tree(self) -> None:
        """A Markdown table's separator rows are not directory-tree branches."""
        table = "| a | b |\n|---|---|\n| 1 | 2 |\n|---|---|\n| 3 | 4 |\n"
        assert detect_content_type(table) != "directory listing"

    def test_body_tag_in_json_error_is_not_html(self) -> None:
        """``<body`` quoted inside an error message does not make a page HTML."""
        text = (
            'MCP tool reported an error: {"args": {"content": "<html><body>x</body></html>"}}\nmore\nlines\n'
        )
        assert detect_content_type(text) != "HTML"

    def test_large_input_is_sampled_consistently(self) -> None:
        """A multi-megabyte result is classified from its head and tail, the same every time."""
        text = "2026-01-01 00:00:00 INFO step\n" * 100_000
        assert detect_content_type(text) == detect_content_type(text) == "log"


# ------------------------------------------------------------------------------ real tool output


class Sample(NamedTuple):
    tool: str
    args: str
    text: str


@cache
def real_samples() -> tuple[Sample, ...]:
    """Every tool result over 3,000 chars in the real trajectories, with its call's name and input."""
    out: list[Sample] = []
    for path in TRAJECTORIES:
        calls: dict[str, tuple[str, str]] = {}
        for message in json.loads(path.read_text(encoding="utf-8")):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_use":
                    calls[block.get("id", "")] = (block.get("name", ""), json.dumps(block.get("input")))
                elif block.get("type") == "tool_result":
                    text = result_text(block.get("content"))
                    if len(text) > 3_000:
                        out.append(Sample(*calls.get(block.get("tool_use_id", ""), ("", "")), text))
    return tuple(out)


def file_arg(pattern: str) -> Callable[[Sample], bool]:
    return lambda s: s.tool == "Read" and re.search(rf'"file_path": "[^"]*{pattern}"', s.args) is not None


def command(pattern: str) -> Callable[[Sample], bool]:
    return lambda s: s.tool.lower() == "bash" and re.search(pattern, s.args) is not None


REAL_CASES: dict[str, tuple[Callable[[Sample], bool], set[str]]] = {
    "Read of .py files is Python": (file_arg(r"\.py"), {"Python source"}),
    "Read of .rs files is Rust": (file_arg(r"\.rs"), {"Rust source"}),
    "Read of .ts/.tsx files is JS or TS": (file_arg(r"\.tsx?"), {"JavaScript source", "TypeScript source"}),
    "Read of .md files is never Go": (
        file_arg(r"\.md"),
        {"Markdown", "directory listing", "Python source", "text"},
    ),
    # a failing run quotes the failing test's source, and the seed's Python rule comes first (SPEC 6)
    "pytest runs are test reports": (command(r"pytest"), {"test report", "Python source"}),
    "vitest runs are test reports": (command(r"vitest"), {"test report"}),
    "ruff check is lint output": (command(r"ruff check"), {"lint output"}),
    "grep -n over a tree is grep output": (
        lambda s: s.tool == "bash" and re.search(r"grep -R", s.args) is not None,
        {"grep output"},
    ),
    "ls -la is a directory listing": (command(r"ls -la"), {"directory listing"}),
    "SWE-agent open of .java is Java": (
        lambda s: s.tool in ("open", "goto", "scroll_down") and ".java (" in s.text[:300],
        {"Java source"},
    ),
    "SWE-agent open of pom.xml is XML": (
        lambda s: s.tool == "open" and "pom.xml (" in s.text[:200],
        {"XML"},
    ),
    "browser state is JSON": (lambda s: s.tool == "browser_get_state", {"JSON"}),
    "package managers are never Go": (
        command(r"uv sync|pip install|uv pip"),
        {"text", "lint output", "log"},
    ),
}


@pytest.mark.parametrize("case", sorted(REAL_CASES))
def test_real_tool_output(case: str) -> None:
    """Real output of a kind of tool call is named as expected (and such output exists)."""
    shared_or_skip()
    select, allowed = REAL_CASES[case]
    found: list[Any] = [s for s in real_samples() if select(s)]
    assert found, f"no sample for {case!r} in the trajectories"
    wrong = [
        (detect_content_type(s.text), s.text[:120])
        for s in found
        if detect_content_type(s.text) not in allowed
    ]
    assert wrong == []


def test_no_real_output_is_called_go_without_a_package_clause() -> None:
    """Only text with a Go package clause is ever called "Go source"."""
    shared_or_skip()
    clause = re.compile(r"^(?:\s*\d+(?:→|\t|:))?package [A-Za-z_]\w*\s*$", re.MULTILINE)
    for s in real_samples():
        if detect_content_type(s.text) == "Go source":
            assert clause.search(s.text), s.text[:200]
