"""Pairing repair: every call gets exactly one result, right after it (SPEC 2).

The history is cut into blocks, one per assistant message: the assistant message and the messages
up to the next one. Within a block, each call claims the first result with its id; results that no
call claims are removed, calls that claim none get a synthetic error result, and results that sat
behind other content are moved back next to their call. Where the provider says so, a call id it
refuses is renamed (with its results) and a text block that is empty or only whitespace dropped.
An assistant message with nothing left in it goes, as does one that came with nothing (an
interrupted stream's); where that leaves two user turns side by side, the format's dump makes
them what its provider takes.
A block that is already valid for its provider is left exactly as it is, down to the order of its
results.

With ``Config(keep_orphans=True)`` a result that answers no call of its block stays where it is
(the history is known to be partial). Where the format's rules say ``adjacent_turns_join``, two
assistant messages left side by side (what stood between them was removed) are joined into one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..formats import CONTINUE_TEXT, Format, blank_text
from ..messages import History, Message, Part, TextPart, ToolCallPart, ToolResultPart
from ._context import FunctionStep, Reuse, StepContext

__all__ = ["MISSING_RESULT_TEXT", "first_choice_id", "repair_pairing", "survives_pruning", "synthetic_result"]

MISSING_RESULT_TEXT = (
    "[Tool result missing -- the tool execution was interrupted or failed silently. "
    "Do NOT retry this tool call. Analyze what went wrong and try a different approach.]"
)


def synthetic_result(call: ToolCallPart) -> ToolResultPart:
    """The error result that stands in for a call that never got one."""
    return ToolResultPart(
        call.id, MISSING_RESULT_TEXT, is_error=True, name=call.name, synthetic=True, modified=True
    )


@dataclass(slots=True)
class _Block:
    start: int  # input index of the assistant message, or of the first message for the prelude
    assistant: Message | None
    rest: list[tuple[int, Message]]


def _repair_pairing(history: History, ctx: StepContext) -> History:
    """Make every call answered exactly once, right after its assistant message.

    A block's repair depends only on its own messages and on the call ids before it
    (``ctx.place.taken_ids``, which gains the ids the block keeps), so a session reuses it per
    block (see :class:`~toolkeep.steps.Reuse`).
    """
    seen = ctx.place.taken_ids
    out: History = []
    for block in _blocks(history, ctx.place.start):
        if block.assistant is None and not block.rest:
            continue
        out.extend(_repair_block(block, ctx, seen))
    return _joined_turns(out, ctx.format) if ctx.format.rules.adjacent_turns_join else out


def _joined_turns(history: History, fmt: Format) -> History:
    """``history`` with every assistant message that follows another with nothing between them
    joined to it (formats whose rules say ``adjacent_turns_join``). "Nothing" is messages that
    hold no parts and that the format sends as nothing (``message_chars`` 0: the placeholders of
    a Responses run); they go with the join."""
    out: History = []
    last = -1  # where the assistant message sits that the next one would join, or -1
    for m in history:
        if m.role == "assistant" and last >= 0:
            joined = out[last]
            del out[last + 1 :]
            out[last] = joined.with_parts([*joined.parts, *m.parts])
            continue
        if m.role == "assistant":
            last = len(out)
        elif last >= 0 and (m.parts or fmt.message_chars(m) != 0):
            last = -1
        out.append(m)
    return out


def _blocks(history: History, offset: int = 0) -> list[_Block]:
    blocks: list[_Block] = [_Block(offset, None, [])]
    for i, m in enumerate(history, offset):
        if m.role == "assistant":
            blocks.append(_Block(i, m, []))
        else:
            blocks[-1].rest.append((i, m))
    return blocks


def _prune_calls(
    block: _Block, ctx: StepContext, seen: set[str]
) -> tuple[Message | None, list[tuple[ToolCallPart, str]]]:
    """The assistant message with bad calls pruned, and ``(call, id its results carry)`` pairs."""
    m = block.assistant
    if m is None:
        return None, []
    report, i = ctx.report, block.start
    kept: list[Part] = []
    calls: list[tuple[ToolCallPart, str]] = []
    here: set[str] = set()
    changed = False
    for p in m.parts:
        if isinstance(p, ToolResultPart):  # a result inside an assistant message answers nothing
            report.add_repair("orphans_removed", p.call_id, i, "result inside an assistant message")
            changed = True
            continue
        if not isinstance(p, ToolCallPart):
            if _refused_text(p, ctx.format):
                report.add_repair("blank_text_dropped", "", i)
                changed = True
            else:
                kept.append(p)
            continue
        invalid = _invalid_call(p)
        if invalid:
            report.add_repair("invalid_calls_pruned", p.id, i, invalid)
            changed = True
            continue
        if p.id in here:
            report.add_repair("duplicates_pruned", p.id, i)
            changed = True
            continue
        here.add(p.id)
        call = p
        new_id = _accepted_id(p.id, ctx, seen, m)
        if new_id != p.id:
            report.add_repair("renamed", p.id, i, f"renamed to {new_id}")
            call = replace(p, id=new_id)
            changed = True
        seen.add(call.id)
        kept.append(call)
        calls.append((call, p.id))
    if not survives_pruning(m, ctx.format):
        report.add_repair(
            "empty_assistant_dropped", "", i, "" if m.parts else "assistant message with no content"
        )
        return None, []
    return (m, calls) if not changed else (m.with_parts(kept), calls)


def survives_pruning(m: Message, fmt: Format) -> bool:
    """True when pairing keeps assistant message ``m``: pairing decides by it, and the engine,
    which ages results by it, asks it before running a block (:attr:`Reuse.keeps_turn`).

    ``m`` goes when it holds nothing but results, calls pairing prunes (no id, no name) and text
    the provider refuses, and when it holds nothing at all: the ``content: []`` or ``null`` an
    interrupted stream leaves, which every provider refuses (Anthropic takes it last only, where
    it prefills nothing). The first part it keeps decides. A rule of the message alone: where it
    sits (last, or followed by another assistant message) decides nothing, so what one
    ``prepare`` keeps the next keeps too (two empty messages in a row used to go one per run).
    Parts the format sends only beside others (:meth:`Format.stands_alone`: a Responses reasoning
    item) keep no message by themselves."""
    for p in m.parts:
        if isinstance(p, ToolResultPart) or _refused_text(p, fmt) or not fmt.stands_alone(p):
            continue
        if not isinstance(p, ToolCallPart) or not _invalid_call(p):
            return True
    return False


def _refused_text(p: Part, fmt: Format) -> bool:
    """True for a text block the provider refuses: empty or only whitespace (where it says so)."""
    return fmt.rules.refuses_blank_text and blank_text(p)


def _without_refused_text(block: _Block, ctx: StepContext) -> _Block:
    """``block`` with the refused text blocks of its other messages dropped (reported). A
    message that held nothing else says ``(continue)`` instead: dropping it would change the
    turns (a last user message gone makes the request a prefill of the assistant's)."""
    fmt = ctx.format
    if not fmt.rules.refuses_blank_text:
        return block
    rest: list[tuple[int, Message]] = []
    for i, m in block.rest:
        kept = [p for p in m.parts if not _refused_text(p, fmt)]
        if len(kept) == len(m.parts):
            rest.append((i, m))
            continue
        for _ in range(len(m.parts) - len(kept)):
            ctx.report.add_repair("blank_text_dropped", "", i, "" if kept else f"replaced by {CONTINUE_TEXT}")
        rest.append((i, m.with_parts(kept or [TextPart(CONTINUE_TEXT)])))
    return _Block(block.start, block.assistant, rest)


def _invalid_call(p: ToolCallPart) -> str:
    """Why pairing prunes a call ("" when it keeps it): providers reject both."""
    if not p.id:
        return f"call to {p.name!r} has no id"
    if not p.name:
        return "call has no tool name"
    return ""


def first_choice_id(call_id: str, fmt: Format) -> str:
    """The id pairing gives a call before uniqueness is asked for: ``call_id``, or the one the
    provider's id rule has it stand for (:meth:`CallIdRule.conforming`)."""
    rule = fmt.rules.call_id_rule
    return call_id if rule is None else rule.accepted(call_id)


def _accepted_id(call_id: str, ctx: StepContext, seen: set[str], m: Message) -> str:
    """``call_id``, or the id it is renamed to: one the provider's id rule accepts, then, where
    the format wants ids unique, one no earlier call took (``_2``, ``_3``, ... made to fit the
    rule again), and never another call's id in the same message."""
    fmt = ctx.format
    new_id = first_choice_id(call_id, fmt)
    if new_id == call_id and not (fmt.rules.unique_call_ids and call_id in seen):
        return call_id
    own = {c.id for c in m.calls} - {call_id}
    taken = (seen if fmt.rules.unique_call_ids else set()) | own
    while new_id in taken:
        new_id = first_choice_id(_fresh_id(new_id, taken), fmt)
    return new_id


def _fresh_id(old: str, taken: set[str]) -> str:
    """``old_2``, ``old_3``, ...: the first not taken by an earlier call or one in this block."""
    n = 2
    while f"{old}_{n}" in taken:
        n += 1
    return f"{old}_{n}"


def _valid_as_is(block: _Block, ctx: StepContext, seen: set[str]) -> list[Message] | None:
    """The block with its results named, when pairing has nothing to repair in it (the usual
    case, decided in one pass); ``None`` to leave the decision to the full repair.

    "Nothing to repair": every call has an id the provider accepts and a name, none repeats an
    id (within the block, or before it where the format wants ids unique), each is answered by
    exactly one result, no result answers anything else or sits behind other content, the
    results are where the provider wants them, and no text is one the provider refuses.
    ``seen`` gains the block's ids, as the full repair adds them."""
    a = block.assistant
    if a is None or not a.parts:
        return None
    fmt = ctx.format
    rule = fmt.rules.call_id_rule
    names: dict[str, str] = {}
    for p in a.parts:
        if isinstance(p, ToolCallPart):
            if not p.id or not p.name or p.id in names or (rule is not None and not rule.accepts(p.id)):
                return None
            names[p.id] = p.name
        elif isinstance(p, ToolResultPart) or _refused_text(p, fmt):
            return None
    if ctx.format.rules.unique_call_ids and not seen.isdisjoint(names):
        return None
    answered: set[str] = set()
    positions: list[int] = []
    other = False
    for pos, (_, m) in enumerate(block.rest):
        for p in m.parts:
            if isinstance(p, ToolResultPart):
                if other or p.call_id not in names or p.call_id in answered:
                    return None
                answered.add(p.call_id)
                positions.append(pos)
            elif _refused_text(p, fmt):
                return None
            else:
                other = True
    if len(answered) != len(names):
        return None
    if positions:
        if ctx.format.rules.grouped_results:
            if positions[-1] != 0 or block.rest[0][1].role != "user":
                return None
        elif positions != list(range(len(positions))):
            return None
    seen.update(names)
    return [a, *[_with_names(m, names) for _, m in block.rest]]


def _repair_block(block: _Block, ctx: StepContext, seen: set[str]) -> list[Message]:
    as_is = _valid_as_is(block, ctx, seen)
    if as_is is not None:
        return as_is
    assistant, calls = _prune_calls(block, ctx, seen)
    block = _without_refused_text(block, ctx)
    report = ctx.report
    head: list[Message] = [assistant] if assistant is not None else []
    if block.assistant is not None and assistant is None:
        calls = []

    # claim: each call takes the first result with its id in this block
    located: list[tuple[int, int, ToolResultPart, bool]] = []  # (msg pos, part pos, part, after other)
    other_seen = False
    for pos, (_, m) in enumerate(block.rest):
        for j, p in enumerate(m.parts):
            if isinstance(p, ToolResultPart):
                located.append((pos, j, p, other_seen))
            else:
                other_seen = True
    claimed: dict[int, tuple[int, int, ToolResultPart, bool]] = {}
    taken: set[int] = set()
    for n, (_, carried_id) in enumerate(calls):
        for k, loc in enumerate(located):
            if k not in taken and loc[2].call_id == carried_id:
                claimed[n] = loc
                taken.add(k)
                break
    orphans = [loc for k, loc in enumerate(located) if k not in taken]
    stays = _kept_orphans(block, ctx, orphans)
    if stays:
        orphans = [loc for loc in orphans if (loc[0], loc[1]) not in stays]
    missing = [n for n in range(len(calls)) if n not in claimed]
    relocated = [loc for loc in claimed.values() if loc[3]]
    renamed = any(call.id != carried for call, carried in calls)
    misplaced = _misplaced(ctx, block, claimed)

    names = {carried: call.name for call, carried in calls}
    if not (orphans or missing or relocated or renamed or misplaced or assistant is not block.assistant):
        return head + [_with_names(m, names) for _, m in block.rest]

    for pos, _, p, _ in orphans:
        report.add_repair("orphans_removed", p.call_id, block.rest[pos][0])
    for pos, _, p, _ in relocated:
        report.add_repair("relocated", p.call_id, block.rest[pos][0])
    results: list[ToolResultPart] = []
    for n, (call, carried) in enumerate(calls):
        if n in claimed:
            p = claimed[n][2]
            p = replace(p, name=call.name)
            if call.id != carried:
                p = replace(p, call_id=call.id, modified=True)
            results.append(p)
        else:
            report.add_repair("synthetic", call.id, block.start)
            results.append(synthetic_result(call))
    rest: list[Message] = []
    for pos, (_, m) in enumerate(block.rest):
        kept = [p for j, p in enumerate(m.parts) if not isinstance(p, ToolResultPart) or (pos, j) in stays]
        if len(kept) == len(m.parts):
            rest.append(m)
        elif kept:
            rest.append(m.with_parts(kept))
        elif not results and _holds_the_place_of_a_user(block, pos, ctx.format):
            rest.append(m.with_parts([TextPart(CONTINUE_TEXT)]))
    if not results and block.assistant is not None and assistant is None:
        rest = _user_before_system(rest, ctx.format)
    return head + (ctx.format.pack_results(results, rest) if results else rest)


def _user_before_system(rest: list[Message], fmt: Format) -> list[Message]:
    """``rest``, the messages after an assistant message pairing dropped, with a user message
    saying :data:`CONTINUE_TEXT` put first when they begin with a system message, in a format
    that wants a system message after a user message (:attr:`FormatRules.user_before_system`).

    Pairing decides one turn at a time, so whether the turn before ends in a user message is not
    known here; a user message more is always accepted (the provider joins two in a row), a
    system message right after an assistant message never is."""
    if fmt.rules.user_before_system and rest and rest[0].role == "system":
        return [Message("user", (TextPart(CONTINUE_TEXT),), dirty=True), *rest]
    return rest


def _holds_the_place_of_a_user(block: _Block, pos: int, fmt: Format) -> bool:
    """True when the message at ``pos`` of ``block.rest``, emptied of its orphan results, must
    stay for the message after it: a user message right before a system message, in a format
    that wants a system message after a user message (:attr:`FormatRules.user_before_system`)."""
    if not fmt.rules.user_before_system or block.rest[pos][1].role != "user":
        return False
    return pos + 1 < len(block.rest) and block.rest[pos + 1][1].role == "system"


def _kept_orphans(
    block: _Block, ctx: StepContext, orphans: list[tuple[int, int, ToolResultPart, bool]]
) -> set[tuple[int, int]]:
    """Where the orphans that ``keep_orphans`` leaves in place sit (``(message, part)`` in
    ``block.rest``): those that answer no call of the block's assistant message. A second result
    for one of its calls, or the result of a call pruned from it, still goes: its call is in the
    history, so the provider would refuse it."""
    if not orphans or not ctx.config.keep_orphans:
        return set()
    own = {c.id for c in block.assistant.calls} if block.assistant is not None else set()
    return {(pos, j) for pos, j, p, _ in orphans if p.call_id not in own}


def _misplaced(
    ctx: StepContext, block: _Block, claimed: dict[int, tuple[int, int, ToolResultPart, bool]]
) -> bool:
    """True when the claimed results are not where the provider wants them."""
    if not claimed:
        return False
    positions = [loc[0] for loc in claimed.values()]
    if ctx.format.rules.grouped_results:
        first = block.rest[0][1]
        return any(pos != 0 for pos in positions) or first.role != "user"
    return sorted(positions) != list(range(len(positions)))


def _with_names(m: Message, names: dict[str, str]) -> Message:
    """``m`` with its results naming the calls they answer; ``m`` itself when they already do."""
    if not names:
        return m
    parts: list[Part] = []
    renamed = False
    for p in m.parts:
        if isinstance(p, ToolResultPart):
            name = names.get(p.call_id)
            if p.name != name:
                p = p.named(name)
                renamed = True
        parts.append(p)
    return Message(m.role, tuple(parts), m.raw, m.dirty, m.meta) if renamed else m


repair_pairing = FunctionStep(_repair_pairing, Reuse(block_local=True, keeps_turn=survives_pruning))
"""Make every call answered exactly once, right after its assistant message (a step; it may
drop an assistant message, and its :class:`~toolkeep.steps.Reuse` says which)."""
