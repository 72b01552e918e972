"""The request budget (``Config.max_request_tokens``) on the largest real trajectory.

Replays the trajectory request by request through one Session, as an agent would (a request is
the history before an assistant message), at each budget asked for, and checks every request:

- it fits (``Report.tokens_after`` within the budget, and the request as sent counts as much);
- it is valid (:func:`toolkeep.validate`);
- every ``<<ccr:KEY>>`` marker it sends recalls byte-exact: the store's text under the key is the
  one the key names (keys are the SHA-256 of their text), checked once per key; and the note of
  archived turns (:mod:`toolkeep.turns`) recalls exactly the trajectory's own messages it stands
  for, as the compact JSON list of them;
- the archived span only grows (the note's turns never fewer than the request before's).

It then prices the requests sent with the prompt-cache-aware cost (:mod:`toolkeep.costs`,
Anthropic's 5-minute cache) against the same replay without a budget, and gives the time
``prepare`` took (wall and CPU of this process), with and without the budget.

    python bench/window.py [--limit 150000 100000 60000] [--policy NAME] [--write]

``--write`` records the table in bench/results.md (section "Request budget"). Tokens are
o200k_base through tiktoken (:func:`toolkeep.tokens.default_counter`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import toolkeep
from toolkeep.costs import request_cost, request_segments
from toolkeep.markers import marker_keys
from toolkeep.shorten import archive_key
from toolkeep.tokens import default_counter, serialize_message
from toolkeep.turns import HEADER

HERE = Path(__file__).resolve().parent
LARGEST = (
    HERE.parent.parent
    / "shared"
    / "bench-data"
    / "anthropic"
    / "claude-code__engram__sentinel__42a88904.json"
)
LIMITS = (150_000, 100_000, 60_000)


@dataclass
class Run:
    """One replay: what was sent and refused, what the checks found, its cost and time."""

    limit: int | None
    requests: int = 0
    sent: list[int] = field(default_factory=list)
    refused: list[tuple[int, int]] = field(default_factory=list)
    """(request end, floor) of each request refused."""
    invalid: int = 0
    miscounted: int = 0
    markers: int = 0
    """Markers sent, summed over the requests."""
    keys: int = 0
    """Distinct keys checked."""
    unrecalled: int = 0
    notes: int = 0
    """Requests that carried a note of archived turns."""
    spans: int = 0
    """Distinct archived spans (each one a fold that archived, and a break of the cache)."""
    archived_turns: int = 0
    """Turns archived at the last request."""
    turns_checked: int = 0
    """Notes whose recall was compared with the trajectory's messages (one per span)."""
    turns_unrecalled: int = 0
    shrank: int = 0
    """Requests whose archived span was smaller than the request before's."""
    cost: float = 0.0
    tokens: int = 0
    seconds: float = 0.0
    """Wall time of ``prepare``, summed (CPU time of this process: ``cpu``)."""
    cpu: float = 0.0


def request_ends(history: list[Any]) -> list[int]:
    """The end (exclusive) of each request: the history before each assistant message."""
    return [i for i, m in enumerate(history) if m["role"] == "assistant" and i > 0]


def _note(message: Any) -> str | None:
    content = message.get("content") if isinstance(message, dict) else None
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    for block in blocks:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str) and text.startswith(HEADER):
            return text
    return None


def archived_exactly(history: list[Any], text: str) -> bool:
    """True when ``text`` (what a note's key recalls) is the compact JSON of a run of the
    trajectory's own messages, byte for byte."""
    messages = json.loads(text)
    if not messages:
        return False
    first = serialize_message(messages[0])
    for start, m in enumerate(history):
        if serialize_message(m) == first:
            return serialize_message(history[start : start + len(messages)]) == text
    return False


def replay(history: list[Any], config: toolkeep.Config, check: bool = True) -> Run:
    """Every request through one Session, each one checked (with ``check``) and priced."""
    counter = default_counter()
    run = Run(config.max_request_tokens)
    ends = request_ends(history)
    run.requests = len(ends)
    texts: dict[int, tuple[Any, str]] = {}
    keys_of: dict[int, tuple[Any, frozenset[str]]] = {}
    tokens_of: dict[int, tuple[Any, int]] = {}
    checked: dict[str, bool] = {}
    previous: list[str] | None = None
    last_turns = 0
    spans: set[str] = set()
    with toolkeep.Session(config) as session:
        for end in ends:
            t, c = time.perf_counter(), time.process_time()
            try:
                out, report = session.prepare(history[:end], format="anthropic")
            except toolkeep.RequestTooLargeError as error:
                run.refused.append((end, error.floor))
                continue
            finally:
                run.seconds += time.perf_counter() - t
                run.cpu += time.process_time() - c
            segments = []
            for m in out:
                entry = texts.get(id(m))
                if entry is None or entry[0] is not m:
                    entry = texts[id(m)] = (m, serialize_message(m))
                segments.append(entry[1])
            priced = request_cost(previous, request_segments(None, segments), counter)
            previous = request_segments(None, segments)
            run.cost += priced.cost
            run.tokens += priced.tokens
            if run.limit is None:
                continue
            run.sent.append(report.tokens_after or 0)
            if not check:
                continue
            counted = 0
            for m in out:  # the request as sent, counted as the budget counts it (request_tokens)
                entry = tokens_of.get(id(m))
                if entry is None or entry[0] is not m:
                    entry = tokens_of[id(m)] = (m, counter.count(texts[id(m)][1]) + 1)
                counted += entry[1]
            run.miscounted += counted != report.tokens_after
            run.invalid += bool(toolkeep.validate(out, "anthropic"))
            turns = 0
            for m in out[:4]:
                note = _note(m)
                if note is None:
                    continue
                run.notes += 1
                turns = int(note[len(HEADER) :].split()[0])
                (key,) = marker_keys(note)
                if key not in spans:
                    spans.add(key)
                    run.turns_checked += 1
                    text = session.recall(key)
                    run.turns_unrecalled += text is None or not archived_exactly(history, text)
            run.shrank += turns < last_turns
            last_turns = turns
            for m in out:
                found = keys_of.get(id(m))
                if found is None or found[0] is not m:
                    found = keys_of[id(m)] = (m, frozenset(marker_keys(m)))
                run.markers += len(found[1])
                for key in found[1]:
                    if key not in checked:
                        text = session.recall(key)
                        checked[key] = text is not None and archive_key(text) == key
                        run.unrecalled += not checked[key]
    run.keys = len(checked)
    run.spans = len(spans)
    run.archived_turns = last_turns
    return run


def table(runs: list[Run], plain: Run) -> str:
    rows = [
        "| budget | requests sent | peak sent | valid | markers recalled byte-exact | archived "
        "spans (turns at the end) | spans recalled byte-exact | cache-aware cost vs no budget "
        "| prepare (CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        refused = f", {len(r.refused)} refused" if r.refused else ""
        rows.append(
            f"| {r.limit:,} | {len(r.sent):,} of {r.requests:,}{refused} | {max(r.sent, default=0):,} "
            f"| {len(r.sent) - r.invalid:,} | {r.keys - r.unrecalled:,} of {r.keys:,} keys "
            f"({r.markers:,} markers) | {r.spans} ({r.archived_turns:,}) "
            f"| {r.turns_checked - r.turns_unrecalled} of {r.turns_checked} "
            f"| {r.cost / plain.cost:.3f} ({r.cost:,.0f} / {plain.cost:,.0f}) "
            f"| {r.seconds:.1f} s ({r.cpu:.1f} s) |"
        )
    rows.append(
        f"| none | {plain.requests:,} of {plain.requests:,} | | | | | | 1 ({plain.cost:,.0f}) "
        f"| {plain.seconds:.1f} s ({plain.cpu:.1f} s) |"
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--limit", type=int, nargs="+", default=list(LIMITS))
    parser.add_argument("--policy", default=toolkeep.Config().policy, help="default: the default policy")
    parser.add_argument("--trajectory", type=Path, default=LARGEST)
    parser.add_argument("--write", action="store_true", help="record the table in bench/results.md")
    args = parser.parse_args()
    if not args.trajectory.exists():
        sys.exit(f"{args.trajectory} is absent: this benchmark needs ../shared/bench-data")
    unit = default_counter().unit  # the tokenizer loads here, not in the first timed request
    history: list[Any] = json.loads(args.trajectory.read_text(encoding="utf-8"))
    print(
        f"{args.trajectory.name}: {len(history):,} messages, {len(request_ends(history)):,} requests, "
        f"{unit}, policy {args.policy}",
        flush=True,
    )
    plain = replay(history, toolkeep.Config(policy=args.policy))
    print(
        f"no budget: cost {plain.cost:,.0f}, prepare {plain.seconds:.1f} s ({plain.cpu:.1f} s CPU)",
        flush=True,
    )
    runs = []
    for limit in args.limit:
        runs.append(replay(history, toolkeep.Config(policy=args.policy, max_request_tokens=limit)))
        print(table(runs[-1:], plain).splitlines()[-2], flush=True)
    body = table(runs, plain)
    print(body)
    for r in runs:
        assert r.miscounted == 0 and r.shrank == 0, (r.limit, r.miscounted, r.shrank)
    if not args.write:
        return
    sys.path.insert(0, str(HERE))
    from speed import write_section

    when = time.strftime("%Y-%m-%d")
    write_section(
        "Request budget",
        f"`python bench/window.py --write` ({when}): the largest trajectory (`{args.trajectory.stem}`, "
        f"{len(history):,} messages, {plain.requests:,} requests), every request through one `Session` "
        f"under `{args.policy}`, {unit}. Every request sent is checked: within the budget (and "
        "counted as its report says), valid (`toolkeep.validate`), every marker it sends recalled "
        "from the session's store byte-exact (the text under a key hashes to the key; each key "
        "checked once), and the note of archived turns recalled exactly as the trajectory's own "
        "messages it stands for (each span once). The archived span never shrank from one request "
        "to the next. Cost: the prompt-cache-aware cost of the requests sent (Anthropic 5-minute "
        "prices, `toolkeep.costs`) over the same replay without a budget. Prepare: wall time of "
        "`prepare` summed over the requests (CPU time of the process), on a shared 2-CPU machine.\n\n"
        + body
        + "\n\n"
        + READING,
    )


READING = (
    "When every old result and call input is cut down to its marker and a request is still over, "
    "the oldest whole turns are archived under one key (`toolkeep.turns`): one note in their place "
    "says what they did and recalls them all. The span grows in batches that free a quarter of "
    "the budget, so each span in the table is one break of the prompt cache for a run of requests. "
    "Before turns were archived, at 150,000 the last 268 requests were refused with "
    "`RequestTooLargeError` (issue 32, measured on main)."
)


if __name__ == "__main__":
    main()
