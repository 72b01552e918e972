"""Write examples/broken-session.json: a short Anthropic-format agent session with every problem
toolkeep fixes. Run it again to regenerate the file; the output is deterministic.

- an interrupted tool call (no result), an orphan result, a duplicate call id,
- a result displaced behind a user message,
- an oversized test log (persisted to the workspace and previewed),
- old large reads that microcompaction truncates and summarizes.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).with_name("broken-session.json")


def source_file(n: int) -> str:
    lines = ["package inventory", "", 'import "fmt"', ""]
    for i in range(n):
        lines += [
            f"// Item{i} describes stock entry {i}.",
            f"type Item{i} struct {{ ID int; Qty int }}",
            f'func (x Item{i}) String() string {{ return fmt.Sprintf("item{i} %d", x.Qty) }}',
            "",
        ]
    return "\n".join(lines)


def test_log(n: int) -> str:
    lines = ["============================= test session starts =============================="]
    lines += [f"tests/test_inventory.py::test_case_{i} PASSED" for i in range(n)]
    lines += [
        "FAILED tests/test_inventory.py::test_restock - AssertionError: 3 != 4",
        f"========================= 1 failed, {n} passed in 4.20s =========================",
    ]
    return "\n".join(lines)


def call(id_: str, name: str, **args: object) -> dict:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def result(id_: str, text: str, **extra: object) -> dict:
    return {"type": "tool_result", "tool_use_id": id_, "content": text, **extra}


def main() -> None:
    history = [
        {"role": "user", "content": "The restock test fails. Find out why and fix it."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading the inventory code."},
                call("toolu_01", "read", path="inventory/items.go"),
            ],
        },
        {"role": "user", "content": [result("toolu_01", source_file(120))]},
        {"role": "assistant", "content": [call("toolu_02", "read", path="inventory/stock.go")]},
        {"role": "user", "content": [result("toolu_02", source_file(60))]},
        {
            "role": "assistant",
            "content": [
                call("toolu_03", "grep", pattern="Restock"),
                call("toolu_03", "grep", pattern="Restock"),
            ],
        },
        {"role": "user", "content": [result("toolu_03", "inventory/stock.go:12:func Restock(q int) int {")]},
        {"role": "assistant", "content": [call("toolu_04", "bash", command="go test ./... -v")]},
        {"role": "user", "content": [{"type": "text", "text": "(the test run is slow, be patient)"}]},
        {"role": "user", "content": [result("toolu_04", test_log(1500), is_error=True)]},
        {
            "role": "assistant",
            "content": [
                call("toolu_05", "read", path="inventory/stock_test.go"),
                call("toolu_06", "bash", command="git diff"),
            ],
        },
        {
            "role": "user",
            "content": [
                result("toolu_05", source_file(170)),
                result("toolu_99", "a result whose call was trimmed away"),
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Restock adds one too few; fixing."}]},
        {"role": "user", "content": "Go on."},
    ]
    OUT.write_text(json.dumps(history, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
