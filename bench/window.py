"""The request budget (``Config.max_request_tokens``) on the largest real trajectory.

Replays the trajectory request by request through one Session, as an agent would (a request is
the history before an assistant message), and reports how many requests fit the budget, the
peak sent, the requests refused with ``RequestTooLargeError`` and their floors (the fewest tokens
each could be brought to). For the request with the highest floor it breaks that floor down:
where the tokens of the request, shortened as far as the budget goes, are. The highest floor is
the budget at which every request fits; ``--check-all`` replays again at it to show so.
``--time`` also replays without the budget, in the same process, for the ratio of the two.

    python bench/window.py [--limit 150000] [--policy NAME] [--time] [--check-all] [--every N]

Tokens are o200k_base through tiktoken (:func:`toolkeep.tokens.default_counter`).
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
from toolkeep.messages import TextPart, ToolCallPart, ToolResultPart
from toolkeep.shorten import CCR_MARKER_RE, CLEARED
from toolkeep.tokens import default_counter, serialize_message

HERE = Path(__file__).resolve().parent
LARGEST = (
    HERE.parent.parent
    / "shared"
    / "bench-data"
    / "anthropic"
    / "claude-code__engram__sentinel__42a88904.json"
)


@dataclass
class Run:
    """One replay: what was sent and refused, and how long ``prepare`` took in all."""

    sent: list[int] = field(default_factory=list)
    refused: list[tuple[int, int]] = field(default_factory=list)
    """(request end, floor) of each request refused."""
    seconds: float = 0.0
    """Wall time of ``prepare``, summed (CPU time of this process: ``cpu``)."""
    cpu: float = 0.0
    markers: int = 0
    unrecalled: int = 0
    invalid: int = 0


def request_ends(history: list[Any]) -> list[int]:
    """The end (exclusive) of each request: the history before each assistant message."""
    return [i for i, m in enumerate(history) if m["role"] == "assistant" and i > 0]


def replay(history: list[Any], config: toolkeep.Config, every: int = 0) -> Run:
    """Every request through one Session; every ``every``-th one sent (and the last) is also
    validated and has each of its markers recalled."""
    run = Run()
    ends = request_ends(history)
    with toolkeep.Session(config) as session:
        for n, end in enumerate(ends):
            t, c = time.perf_counter(), time.process_time()
            try:
                out, report = session.prepare(history[:end], format="anthropic")
            except toolkeep.RequestTooLargeError as error:
                run.refused.append((end, error.floor))
                continue
            finally:
                run.seconds += time.perf_counter() - t
                run.cpu += time.process_time() - c
            run.sent.append(report.tokens_after or 0)
            if every and (n % every == 0 or n == len(ends) - 1):
                run.invalid += bool(toolkeep.validate(out, "anthropic"))
                keys = set(CCR_MARKER_RE.findall(json.dumps(out)))
                run.markers += len(keys)
                run.unrecalled += sum(session.recall(k) is None for k in keys)
    return run


def floor_request(history: list[Any], floor: int, policy: str) -> list[Any]:
    """The request ``history`` shortened as far as the budget goes: prepared with the budget
    at its floor (a fresh run decides as a session does)."""
    config = toolkeep.Config(policy=policy, max_request_tokens=floor)
    with toolkeep.Session(config) as session:
        out, report = session.prepare(history, format="anthropic")
    assert report.tokens_after is not None and report.tokens_after <= floor
    return out


def breakdown(out: list[Any], original: list[Any]) -> dict[str, int]:
    """Tokens of ``out`` (a prepared request) by what holds them. Each part's text is counted as
    its JSON string; a message's envelope (roles, types, ids, names, keys, the comma) is what its
    count as sent has over its parts'. ``original``: the request as the agent sent it."""
    counter = default_counter()
    fmt = toolkeep.get_format("anthropic")
    history, before = fmt.load(out), fmt.load(original)
    last = max(i for i, m in enumerate(history) if m.role == "assistant")
    inputs = {p.id: p.arguments for m in before for p in m.parts if isinstance(p, ToolCallPart)}
    found: dict[str, int] = {}
    for i, (m, sent) in enumerate(zip(history, out, strict=True)):
        total = counter.count(serialize_message(sent)) + 1
        for p in m.parts:
            if isinstance(p, TextPart):
                value, what = p.text, "last user turn" if i > last else f"{m.role} text"
            elif isinstance(p, ToolCallPart):
                value = p.arguments
                cut = p.arguments != inputs.get(p.id)
                what = (
                    "last calls' inputs" if i == last else "call inputs, cut" if cut else "call inputs, whole"
                )
            elif isinstance(p, ToolResultPart):
                value, what = p.text, "last user turn" if i > last else _result_kind(p.text)
            else:
                continue
            n = counter.count(serialize_message(value))
            found[what] = found.get(what, 0) + n
            total -= n
        found["envelopes"] = found.get("envelopes", 0) + total
    return found


def _result_kind(text: str) -> str:
    if text.startswith(CLEARED):
        return "results, cleared"
    if text.startswith("[Old tool result cleared --"):
        return "results, stub" if "\n" not in text else "results, summary"
    return "results, as the policy left them"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--limit", type=int, default=150_000)
    parser.add_argument("--policy", default=toolkeep.Config().policy, help="default: the default policy")
    parser.add_argument("--time", action="store_true", help="also replay without the budget, for the ratio")
    parser.add_argument("--check-all", action="store_true", help="replay again at the highest floor")
    parser.add_argument("--every", type=int, default=100, help="validate and recall every N-th request")
    parser.add_argument("--trajectory", type=Path, default=LARGEST)
    args = parser.parse_args()
    if not args.trajectory.exists():
        sys.exit(f"{args.trajectory} is absent: this benchmark needs ../shared/bench-data")
    unit = default_counter().unit  # the tokenizer loads here, not in the first timed request
    history: list[Any] = json.loads(args.trajectory.read_text(encoding="utf-8"))
    ends = request_ends(history)
    config = toolkeep.Config(policy=args.policy, max_request_tokens=args.limit)
    run = replay(history, config, args.every)
    print(
        f"{args.trajectory.name}: {len(history):,} messages, {len(ends):,} requests, {unit}, policy {args.policy}"
    )
    print(
        f"max_request_tokens={args.limit:,}: {len(run.sent):,} requests fit (peak {max(run.sent, default=0):,}), "
        f"{len(run.refused):,} refused; checked: {run.invalid} invalid, {run.markers:,} markers, "
        f"{run.unrecalled} not recalled; prepare {run.seconds:.1f} s ({run.cpu:.1f} s CPU)"
    )
    if args.time:
        plain = replay(history, toolkeep.Config(policy=args.policy))
        print(
            f"without the budget: prepare {plain.seconds:.1f} s ({plain.cpu:.1f} s CPU); with / without: "
            f"{run.seconds / plain.seconds:.1f}x ({run.cpu / plain.cpu:.1f}x CPU)"
        )
    if not run.refused:
        return
    end, floor = max(run.refused, key=lambda r: r[1])
    print(
        f"refused from message {run.refused[0][0]:,} on; floors {min(f for _, f in run.refused):,} to "
        f"{floor:,} (the budget at which every request fits)"
    )
    parts = breakdown(floor_request(history[:end], floor, args.policy), history[:end])
    print(f"floor of the request ending at message {end:,}: {sum(parts.values()):,} {unit}")
    for what, n in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {what:34} {n:>8,}")
    if args.check_all:
        again = replay(history, config.replace(max_request_tokens=floor), args.every)
        print(
            f"max_request_tokens={floor:,}: {len(again.sent):,} of {len(ends):,} fit "
            f"(peak {max(again.sent, default=0):,}), {len(again.refused)} refused; "
            f"{again.invalid} invalid, {again.unrecalled} of {again.markers:,} markers not recalled"
        )


if __name__ == "__main__":
    main()
