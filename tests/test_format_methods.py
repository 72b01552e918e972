"""What each format knows about its provider beyond histories: tool definitions in its schema.

Parametrized over every registered format (``toolkeep.formats.FORMATS``) and, where it applies,
the SDK-object wrapper of each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep import recall
from toolkeep.formats import FORMATS, Format, ToolSpec
from toolkeep.formats._sdk import wrap

NAMES = list(FORMATS)
FIXTURES = Path(__file__).parent / "fixtures"


def variants(name: str) -> list[Format]:
    """The registered format, and its SDK-object wrapper where it has one."""
    fmt = FORMATS[name]
    wrapped = wrap(fmt)
    return [fmt] if wrapped is fmt else [fmt, wrapped]


def each_variant(names: list[str] | tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(f, id=f"{name}-{'objects' if k else 'plain'}")
        for name in names
        for k, f in enumerate(variants(name))
    ]


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------ tool definitions

SCHEMA = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "A regular expression."},
        "limit": {"type": "integer", "minimum": 1, "description": "Most matches."},
    },
    "required": ["pattern"],
}
SCHEMA_TEXT = json.dumps(SCHEMA)
SPEC = ToolSpec("grep", "Search the files.", SCHEMA)
# what each provider's documentation asks for, written out (key order included: the bytes count)
EXPECTED_DEFINITIONS: dict[str, list[Any]] = {
    "anthropic": [{"name": "grep", "description": "Search the files.", "input_schema": SCHEMA}],
    "openai-chat": [
        {
            "type": "function",
            "function": {"name": "grep", "description": "Search the files.", "parameters": SCHEMA},
        }
    ],
    "openai-responses": [
        {
            "type": "function",
            "name": "grep",
            "description": "Search the files.",
            "parameters": SCHEMA,
            "strict": False,
        }
    ],
    "gemini": [
        {
            "function_declarations": [
                {
                    "name": "grep",
                    "description": "Search the files.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "pattern": {"type": "string", "description": "A regular expression."},
                            "limit": {"type": "integer", "description": "Most matches."},
                        },
                        "required": ["pattern"],
                    },
                }
            ]
        }
    ],
    "bedrock": [
        {"toolSpec": {"name": "grep", "description": "Search the files.", "inputSchema": {"json": SCHEMA}}}
    ],
    "langchain": [
        {
            "type": "function",
            "function": {"name": "grep", "description": "Search the files.", "parameters": SCHEMA},
        }
    ],
}


def containers(value: Any) -> list[Any]:
    """Every dict and list inside ``value`` (itself included)."""
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in containers(v))]
    return []


class TestToolDefinitions:
    def test_every_format_is_covered(self) -> None:
        assert set(EXPECTED_DEFINITIONS) == set(FORMATS)

    @pytest.mark.parametrize("fmt", each_variant(NAMES))
    def test_in_the_providers_schema(self, fmt: Format) -> None:
        """The definition is byte-equal to the provider's documented shape, and owns its schema:
        emptying every dict and list of it leaves the spec, and the next definitions, whole."""
        expected = json.dumps(EXPECTED_DEFINITIONS[fmt.name])
        first = fmt.tool_definitions([SPEC])
        assert json.dumps(first) == expected
        for container in containers(first):
            container.clear()
        assert json.dumps(SPEC.schema) == SCHEMA_TEXT
        assert json.dumps(fmt.tool_definitions([SPEC])) == expected

    @pytest.mark.parametrize("name", NAMES)
    def test_recall_gives_todays_bytes(self, name: str) -> None:
        """``recall.tool_definitions`` delegates to the format and sends what it sent before (the
        pin was written by the code that kept its own per-format table)."""
        pinned = json.loads((FIXTURES / "tool_definitions.json").read_text(encoding="utf-8"))
        assert json.dumps(recall.tool_definitions(name)) == json.dumps(pinned[name])
        assert recall.tool_definitions(name) == FORMATS[name].tool_definitions(recall.tool_specs())
        assert recall.TOOL_FORMATS == (
            "anthropic", "openai-chat", "openai-responses", "gemini", "bedrock", "langchain",
        )  # fmt: skip

    def test_recall_refuses_as_before(self) -> None:
        with pytest.raises(toolkeep.ConfigError, match=r"no tool definitions for format 'cohere' \(known: "):
            recall.tool_definitions("cohere")
        with pytest.raises(
            toolkeep.ConfigError, match=r"unknown toolkeep tool 'rm' \(known: recall, read_result\)"
        ):
            recall.tool_definitions("cohere", tools=("rm",))  # the tool is checked first, as before

    def test_the_sdks_accept_them(self) -> None:
        """Each SDK's own type for a tool definition validates the format's output."""
        import anthropic
        from google.genai import types
        from openai.types.chat import ChatCompletionToolParam
        from openai.types.responses import FunctionToolParam
        from pydantic import TypeAdapter

        TypeAdapter(anthropic.types.ToolParam).validate_python(
            FORMATS["anthropic"].tool_definitions([SPEC])[0]
        )
        TypeAdapter(ChatCompletionToolParam).validate_python(
            FORMATS["openai-chat"].tool_definitions([SPEC])[0]
        )
        TypeAdapter(FunctionToolParam).validate_python(
            FORMATS["openai-responses"].tool_definitions([SPEC])[0]
        )
        (tool,) = FORMATS["gemini"].tool_definitions([SPEC])
        declared = types.Tool.model_validate(tool).function_declarations
        assert declared is not None and declared[0].parameters is not None
        assert declared[0].parameters.required == ["pattern"]
