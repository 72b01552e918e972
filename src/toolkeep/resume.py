"""A conversation's state kept in its store, so that a new process goes on where the last one stopped.

A :class:`~toolkeep.Session` prepares each request of a conversation from what it did for the one
before (:mod:`toolkeep.engine`): a new process given the whole history (``toolkeep prepare``, the
proxy after a restart, a new replica) would fold every request again, tens of times the cost of
``json.dumps`` of the history under the cache-aware policy. So a session appends to the
conversation's kept state (beside its store: :meth:`toolkeep.stores.StoreBase.state_store`) what
changed in the engine's state: the blocks made again and their output, the plan's decisions, the
markers and saved files the output names, and a digest of the history it covers; on the
conversation's first request, every :attr:`Resume.write_every` requests after, and when the
session closes. A new session reads it back on its first request, checks the digest against the
history it is given (one ``json.dumps`` of the covered prefix), adopts the state and prepares only
what is new: the same bytes as the session that saw every request.

The records are JSON (never pickles), under archive keys, each written once: per conversation, a
*head* (rewritten, deleted and put again, only with a whole state) names an epoch; chunk 0 of the
epoch is a whole state, each chunk after it what changed since the one before, which it names by
digest. A reader takes the chunks up to the first missing or not linked (a replica that lost a
race, an eviction): a state the conversation had, from which the engine folds the rest. After
:attr:`Resume.whole_after` chunks, or when they outweigh the whole state, the next write is a
whole state in a new epoch, and the old one is deleted.

A record is taken only if it names this version of the records, this toolkeep, the config, the
pipeline, the format and the workspace (the fingerprint in the head's key and in every chunk),
covers a prefix of the history with the same digest, agrees with what the session knows of
expired requests, and the saved files its output names are there. Anything else (missing,
evicted, corrupt, stale, from another config) and the request is prepared by the full fold, as a
new session always was: never other bytes. Originals its markers name that the store lost are
archived again (the conversation's markers are told what the adopted output names). A block
adopted is staged again in this process only when a later request needs its staged form (a result
of it changes tier, or the plan reads a call or result of it): the plan's items stand for their
parts until read (:func:`_lazy_class`).

Trust: whoever can write the store can make a session send what they wrote, as they can already
through the originals a marker recalls; the digests guard against staleness, not forgery.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import secrets
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, is_dataclass, replace
from itertools import compress, count
from operator import is_not
from typing import TYPE_CHECKING, Any, get_args

from .engine import (
    _UNKNOWN,
    Restage,
    SessionState,
    StaleState,
    _Block,
    _Engine,
    _flat_start,
    _materialize,
    restored_part,
)
from .exceptions import InvalidKeyError, StoreError
from .formats import Format
from .markers import Tracker, marker_keys
from .messages import Role, ToolCallPart, ToolResultPart
from .report import Cut, Repair, Report
from .shorten import archive_key
from .shortforms.commands import Kind
from .steps import Pipeline, StepContext
from .stores import ArchiveStore, validate_key
from .version import __version__

if TYPE_CHECKING:
    from .archive import Archive

__all__ = ["RECORDS_VERSION", "Resume", "head_key"]

_log = logging.getLogger("toolkeep")

RECORDS_VERSION = 1
"""The version of the records' layout; a record of another is not read."""


class _Unfit(Exception):
    """A stored state that cannot be taken (the request is prepared by the full fold)."""


def _version() -> str:
    return __version__


def _canon(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON that is the same in every process (sets sorted, objects by their class
    and fields), for the fingerprint."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 6:
        return type(value).__qualname__
    if isinstance(value, Mapping):
        return sorted([[str(k), _canon(v, depth + 1)] for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return [_canon(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(json.dumps(_canon(v, depth + 1)) for v in value)
    name = f"{type(value).__module__}.{type(value).__qualname__}"
    if is_dataclass(value) and not isinstance(value, type):
        return [name, [[f.name, _canon(getattr(value, f.name), depth + 1)] for f in fields(value)]]
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict):
        return [name, [[k, _canon(v, depth + 1)] for k, v in sorted(attrs.items()) if not k.startswith("_")]]
    return name


def fingerprint_of(config: Any, pipeline: Pipeline, fmt: Format, workspace: str) -> str:
    """What a stored state must have been made with: the records' version, toolkeep's, the config,
    the pipeline's steps, the format and the workspace (the paths of saved files name it)."""
    steps = [_canon(s) for s in (*pipeline.steps, pipeline.bound)]
    text = json.dumps(
        [RECORDS_VERSION, _version(), _canon(config), steps, fmt.name, workspace], sort_keys=True
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _head_of(fp: str, conversation: str) -> str:
    return archive_key(f"toolkeep-resume\0{fp}\0{conversation}")


def head_key(history: Sequence[Any], config: Any, pipeline: Pipeline, fmt: Format, workspace: str) -> str:
    """The key of the head of the state a session keeps for the conversation ``history`` begins,
    prepared with ``config``, ``pipeline`` and ``fmt`` in ``workspace`` (in the store's state
    store)."""
    from .conversation_key import conversation_key

    first = conversation_key(history[0] if history else None)
    return _head_of(fingerprint_of(config, pipeline, fmt, workspace), first)


class _Digest:
    """The digest of a growing history: of ``json.dumps`` of its first :attr:`n` messages as a
    list, taken a message at a time."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256(b"[")
        self.n = 0

    @classmethod
    def of(cls, messages: Sequence[Any], n: int) -> _Digest:
        """The digest of the first ``n`` messages, at the cost of one ``json.dumps`` of them."""
        text = json.dumps(messages[:n] if isinstance(messages, list) else list(messages[:n])).encode("ascii")
        made = cls()
        made.hash = hashlib.sha256(memoryview(text)[:-1])
        made.n = n
        return made

    def add(self, messages: Sequence[Any], end: int) -> None:
        for i in range(self.n, end):
            text = json.dumps(messages[i])
            self.hash.update((", " + text if i else text).encode("ascii"))
        self.n = max(self.n, end)

    def hexdigest(self) -> str:
        done = self.hash.copy()
        done.update(b"]")
        return done.hexdigest()


# -- lazy parts: a plan's items name parts of blocks staged again only when read ------------------


def _first_slot(cls: type) -> Any:
    return cls.__dict__[fields(cls)[0].name]


_SLOTS = {ToolResultPart: _first_slot(ToolResultPart), ToolCallPart: _first_slot(ToolCallPart)}
_SLOT_KEY = ToolResultPart.__dict__["key"]


def _load_part(self: Any, base: type) -> None:
    state, message, part = _SLOTS[base].__get__(self, base)
    real: Any = restored_part(state, message, part)
    if type(real) is not base:
        raise StaleState("an adopted item names another kind of part")
    if isinstance(real, ToolResultPart):
        key = _SLOT_KEY.__get__(self, base)
        if real.key != key:
            real = replace(real, key=key)
    object.__setattr__(self, "__class__", base)
    for f in fields(base):
        setattr(self, f.name, getattr(real, f.name))


def _lazy_class(base: type) -> Any:
    """A subclass of ``base`` whose instance, made without its fields, becomes on the first read
    of any attribute the ``base`` part it stands for (:func:`_load_part`): a part of an adopted
    block, staged again only if read."""

    def __getattribute__(self: Any, name: str) -> Any:
        if name == "__class__":  # (isinstance asks: not a read of the part)
            return object.__getattribute__(self, name)
        _load_part(self, base)
        return getattr(self, name)

    return type(f"_Lazy{base.__name__}", (base,), {"__slots__": (), "__getattribute__": __getattribute__})


_LazyResult = _lazy_class(ToolResultPart)
_LazyCall = _lazy_class(ToolCallPart)


def _lazy_result(state: SessionState, message: int, part: int, key: str | None) -> Any:
    obj = object.__new__(_LazyResult)
    _SLOTS[ToolResultPart].__set__(obj, (state, message, part))
    _SLOT_KEY.__set__(obj, key)
    return obj


def _lazy_call(state: SessionState, message: int, part: int) -> Any:
    obj = object.__new__(_LazyCall)
    _SLOTS[ToolCallPart].__set__(obj, (state, message, part))
    return obj


class _Calls(dict[str, Any]):
    """The plan's calls by id, those of adopted blocks made (lazily) when first asked for."""

    def __init__(self, state: SessionState, where: dict[str, Any]) -> None:
        super().__init__()
        self.state = state
        self.where = where

    def get(self, key: str, default: Any = None) -> Any:
        found = dict.get(self, key, _NONE)
        if found is _NONE:
            place = self.where.get(key)
            if place is None:
                return default
            found = self[key] = _lazy_call(self.state, int(place[0]), int(place[1]))
        return found

    def __setitem__(self, key: str, value: Any) -> None:
        self.where.pop(key, None)
        dict.__setitem__(self, key, value)


_NONE: Any = object()


# -- the records ------------------------------------------------------------------------------------


def _report_rec(r: Report) -> list[Any]:
    return [
        r.total, r.capped, r.persisted, r.truncated, r.summarized, r.preserved, r.chars_before, r.chars_after,
        [[x.kind, x.id, x.index, x.detail] for x in r.repairs],
        [[c.kind, c.id, c.index, c.chars_before, c.chars_after, c.key, c.reason] for c in r.cuts],
    ]  # fmt: skip


def _report_of(rec: list[Any], fmt: str) -> Report:
    # (the report's details are not sent: its fields are taken as they were written)
    total, capped, persisted, truncated, summarized, preserved, before, after, repairs, cuts = rec
    return Report(
        fmt, "", "", [Repair(*x) for x in repairs], total, capped, persisted, truncated, summarized, preserved,
        before, after, [], [Cut(*x) for x in cuts],
    )  # fmt: skip


def _key_rec(key: Any) -> Any:
    return list(key) if isinstance(key, tuple) else key


def _key_of(rec: Any) -> Any:
    return tuple(rec) if isinstance(rec, list) else rec


class Resume:
    """Where one conversation's state is kept, and what this process wrote there (see the module
    docstring). ``store`` gives the conversation's store when it is needed; ``conversation`` is
    its key. :meth:`load` is tried on a session's first request, :meth:`save` after each."""

    @classmethod
    def of(cls, archive: Archive, conversation: str, tracker: Tracker | None = None) -> Resume | None:
        """The conversation's kept state beside ``archive``'s store, if that outlives the
        session and keeps state (:meth:`toolkeep.stores.StoreBase.state_store`); written before
        the archive closes."""
        kept = getattr(archive.store, "state_store", None)
        if not archive.outlives or not callable(kept) or kept() is None:
            return None

        def store() -> ArchiveStore | None:
            found: ArchiveStore | None = getattr(archive.store, "state_store")()  # noqa: B009
            return found

        made = cls(store, conversation, tracker)
        archive.flushers.add(made)
        return made

    def __init__(
        self, store: Callable[[], ArchiveStore | None], conversation: str, tracker: Tracker | None = None
    ) -> None:
        self._store = store
        self.conversation = conversation
        self.tracker = tracker
        """The conversation's markers: told those of what is adopted, which the store must hold."""
        self.tried = False
        """Whether the session's first request has looked for a stored state."""
        self.adopted = 0
        """How many leading messages the last :meth:`load` took from the store (0: none)."""
        self.failed: str | None = None
        """Why the last load found nothing to take, or writing stopped."""
        self.write_every = 8
        """Requests between two writes (the first request of a session writes, and so does
        :meth:`flush` when the conversation closes): a new process that finds the last few
        requests unwritten folds them, at the cost of those requests alone."""
        self.whole_after = 32
        """Chunks after which the next write is a whole state: a reader reads them all, one
        round trip each (a Redis store's), so they stay few."""
        self._fp = ""
        self._head = ""
        self._epoch = ""
        self._written = 0
        self._link = ""
        self._since = 0
        self._whole_size = 0
        self._first = True
        self._first_write = False
        self._unwritten = 0
        self._pending: tuple[SessionState, Sequence[Any]] | None = None
        self._digest: _Digest | None = None
        self._blocks: list[_Block] = []
        self._plan: Any = None
        self._fold: Any = None
        self._items: list[list[Any]] = []
        self._index: dict[int, int] = {}
        self._active: list[int] = []
        self._reads: dict[str, Any] = {}
        self._chars = 0
        self._asst = 0
        self._registered = 0
        self._names = 0
        self._calls: dict[str, list[int]] = {}
        self._marks: dict[int, tuple[_Block, list[Any]]] = {}
        """Each block's markers (:func:`_marks_of`), by block."""

    # -- reading ---------------------------------------------------------------------------------

    def _fingerprint(self, ctx: StepContext, pipeline: Pipeline, fmt: Format) -> str:
        if not self._fp:
            where = str(ctx.workspace.path) if ctx.workspace is not None else ""
            self._fp = fingerprint_of(ctx.config, pipeline, fmt, where)
            self._head = _head_of(self._fp, self.conversation)
        return self._fp

    def load(
        self, state: SessionState, fmt: Format, messages: Sequence[Any], pipeline: Pipeline, ctx: StepContext,
        same: int, new_plan: Callable[[], Any] | None = None,
    ) -> int:  # fmt: skip
        """Adopt the stored state of the conversation if it fits ``messages`` (``new_plan``
        makes the plan it fills, for a pipeline with one); how many leading messages the engine
        may then take as unchanged (``same`` when nothing was adopted, and ``state`` is as it was)."""
        if self.tried:
            return same
        self.tried = True
        self.adopted = 0
        collecting = gc.isenabled()
        gc.disable()  # (thousands of small objects made at once: no collection walks the heap meanwhile)
        try:
            fp = self._fingerprint(ctx, pipeline, fmt)
            plan = new_plan() if new_plan is not None else None
            if plan is not None and not _economy(plan):
                raise _Unfit("the policy's plan is not one whose decisions are kept")
            chunks, epoch, written, link = self._read(fp)
            n = self._adopt(state, fmt, messages, chunks, ctx, plan)
        except _Unfit as exc:
            self.failed = str(exc)
            return same
        except StoreError as exc:
            self.failed = f"the store failed: {exc}"
            return same
        finally:
            if collecting:
                gc.enable()
        self.failed = None
        self._epoch, self._written, self._link = epoch, written, link
        self.adopted = n
        return n

    def _chunk_key(self, epoch: str, n: int) -> str:
        return self.chunk_key(self._head, epoch, n)

    @staticmethod
    def chunk_key(head: str, epoch: str, n: int) -> str:
        """The key of chunk ``n`` of the state ``epoch`` that the head under ``head`` names."""
        return archive_key(f"toolkeep-resume\0{head}\0{epoch}\0{n}")

    def _state_store(self) -> ArchiveStore:
        store = self._store()
        if store is None:
            raise StoreError("the store keeps no state")
        return store

    def _read(self, fp: str) -> tuple[list[dict[str, Any]], str, int, str]:
        """The chunks to adopt: the whole state the head names and those after it, up to the
        first missing or not linked to the one before it (written by a replica that lost a race,
        or evicted): the state up to there is one the conversation had, and the engine folds the
        rest. Also the epoch, how many chunks were read and the digest of the last one."""
        store = self._state_store()
        text = store.get(self._head)
        if text is None:
            raise _Unfit("nothing stored")
        head = _json(text)
        if not isinstance(head, dict) or head.get("v") != RECORDS_VERSION or head.get("fp") != fp:
            raise _Unfit("the head is of another version or config")
        epoch = head.get("epoch")
        if not isinstance(epoch, str):
            raise _Unfit("the head names no state")
        chunks: list[dict[str, Any]] = []
        link = ""
        self._whole_size = self._since = 0
        while True:
            text = store.get(self._chunk_key(epoch, len(chunks)))
            if text is None:
                break
            chunk = _json(text)
            if (
                not isinstance(chunk, dict)
                or chunk.get("fp") != fp
                or chunk.get("conversation") != self.conversation
                or chunk.get("whole") is not (not chunks)
                or chunk.get("prev") != link
            ):
                if not chunks:
                    raise _Unfit("the whole state is not of this conversation")
                break
            chunks.append(chunk)
            link = _link(text)
            if len(chunks) == 1:
                self._whole_size = len(text)
            else:
                self._since += len(text)
        if not chunks:
            raise _Unfit("the whole state is missing")
        return chunks, epoch, len(chunks), link

    def _adopt(
        self, state: SessionState, fmt: Format, messages: Sequence[Any], chunks: list[dict[str, Any]],
        ctx: StepContext, plan: Any,
    ) -> int:  # fmt: skip
        try:
            image = _Image(fmt.name)
            for chunk in chunks:
                image.apply(chunk)
            last = chunks[-1]
            n = int(last["n"])
            digest = str(last["digest"])
            expired = {int(r) for r in last["expiry"]}
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise _Unfit(f"malformed: {type(exc).__name__}: {exc}") from exc
        if not 0 < n <= len(messages):
            raise _Unfit("it covers more than the history")
        image.check(n, plan)
        folded = image.folded()
        known = state.expiry.requests
        if known and {r for r in known if r < folded} != {r for r in expired if r < folded}:
            raise _Unfit("it was decided knowing of other expired requests")
        try:
            got = _Digest.of(messages, n)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _Unfit(f"the history is not JSON: {type(exc).__name__}") from exc
        if got.hexdigest() != digest:
            raise _Unfit("the history differs from what it covers")
        image.install(state, fmt, messages, n, ctx, plan)  # (state is changed only if it fits)
        if not known:
            known.update(expired)
        self._digest = got
        self._remember(state, image.calls, image.items)
        self._marks = {id(b): (b, raw) for (b, _), raw in zip(image.marks, image.raw_marks, strict=True)}
        tracker = self.tracker
        if tracker is not None and not tracker.out:
            # the markers of what is adopted: the store must hold those of its cuts (checked
            # after the request, as for a request prepared here; a loss makes it again)
            tracker.out = list(state.out)
            tracker.per_message = [keys for _, per in image.marks for keys in per]
            for keys in tracker.per_message:
                for key in keys:
                    tracker.named[key] = tracker.named.get(key, 0) + 1
            tracker.ours.update(c.key for c in state.cuts if c.key)
            tracker._ours = [key for key in tracker.named if key in tracker.ours]
        return n

    def ready(self, state: SessionState, changed: int) -> None:
        """Stage the adopted blocks whose staged messages the plan's update will read, given that
        ``flat[:changed]`` is unchanged: those from where its fold goes on, the last message it
        registered (all of them when it starts again)."""
        plan: Any = state.plan
        if plan is None or not _economy(plan):
            return
        fold = plan.fold  # (it reads from the last message it registered, and sizes from there)
        start = (
            0
            if changed < fold.registered
            else min(changed, plan.scanned, fold.registered, len(fold.message_chars))
        )
        blocks = state.blocks
        for j in range(max(0, bisect_right(blocks, start, key=_flat_start) - 1), len(blocks)):
            if blocks[j].lazy:
                _materialize(state, j)

    # -- writing ---------------------------------------------------------------------------------

    def save(
        self, state: SessionState, fmt: Format, messages: Sequence[Any], pipeline: Pipeline, same: int
    ) -> None:
        """Note that the request ``messages`` was just prepared on ``state`` (its first ``same``
        messages the very objects of the last request's); what changed is written every
        :attr:`write_every` requests, on the first one, and by :meth:`flush`."""
        if self.failed == "stopped" or not self._fp or (state.plan is not None and not _economy(state.plan)):
            return  # (load ran before, with a context; another plan's decisions are not kept)
        try:
            digest = self._digest
            if digest is None or digest.n > same:
                digest = self._digest = _Digest()
            digest.add(messages, len(messages))
        except (TypeError, ValueError, RecursionError) as exc:  # not JSON (SDK objects): nothing is kept
            _log.debug("toolkeep: conversation state not kept: %s", exc)
            self.failed = "stopped"
            return
        self._pending = (state, messages)
        self._unwritten += 1
        if self._unwritten >= self.write_every or self._first:
            self.flush()

    def flush(self) -> None:
        """Write what the requests prepared since the last write changed (the conversation is
        closing, or enough requests went by)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        state, messages = pending
        self._first_write, self._first = self._first, False
        self._unwritten = 0
        if state.first_failed < len(state.blocks) or len(messages) != self._digest_n():
            return  # (a block to run again: the next request writes)
        try:
            self._write(state, messages)
        except (StoreError, OSError) as exc:
            _log.debug("toolkeep: conversation state not kept: %s", exc)
            self._epoch = ""
        except Exception as exc:  # (not JSON, or a bug: the conversation goes on, unkept)
            _log.warning("toolkeep: conversation state not kept: %s: %s", type(exc).__name__, exc)
            self.failed = "stopped"

    def _digest_n(self) -> int:
        return self._digest.n if self._digest is not None else -1

    def _write(self, state: SessionState, messages: Sequence[Any]) -> None:
        digest = self._digest
        assert digest is not None
        store = self._state_store()
        plan = state.plan
        fresh = plan is not None and (plan is not self._plan or plan.fold is not self._fold)
        # not on a session's first write after it adopted a state (that request stays cheap),
        # unless the chunks are twice as many: a run of processes that each prepare one request
        # (toolkeep prepare) would make them ever more
        if self._first_write and self.adopted:
            due = self._written >= 2 * self.whole_after
        else:
            due = self._written >= self.whole_after or self._since > self._whole_size
        whole = fresh or not self._epoch or due
        blocks = state.blocks
        if whole:
            dirty = list(range(len(blocks)))
        else:
            old = self._blocks
            dirty = list(compress(count(), map(is_not, blocks, old)))
            dirty += range(len(old), len(blocks))
        chunk: dict[str, Any] = {
            "v": RECORDS_VERSION,
            "fp": self._fp,
            "conversation": self.conversation,
            "whole": whole,
            "prev": "" if whole else self._link,
            "n": len(messages),
            "digest": digest.hexdigest(),
            "expiry": sorted(state.expiry.requests),
            "blocks": len(blocks),
            "set": [[j, _block_rec(blocks[j], messages, self._marks_of(blocks[j]))] for j in dirty],
        }
        if plan is not None:
            if whole:
                self._reset_plan(plan, fresh)
            chunk["plan"] = self._plan_rec(plan, state, [blocks[j] for j in dirty], whole)
        text = json.dumps(chunk, separators=(",", ":"))
        if whole:
            old_epoch, old_written = self._epoch, self._written
            self._epoch, self._written = secrets.token_hex(8), 0
            store.put(self._chunk_key(self._epoch, 0), text)
            head = {"v": RECORDS_VERSION, "fp": self._fp, "epoch": self._epoch}
            store.delete(self._head)
            store.put(self._head, json.dumps(head, separators=(",", ":")))
            for n in range(old_written if old_epoch else 0):  # what the new whole state stands for
                store.delete(self._chunk_key(old_epoch, n))
            self._marks = {id(b): self._marks[id(b)] for b in blocks}
            self._whole_size, self._since = len(text), 0
        else:
            store.put(self._chunk_key(self._epoch, self._written), text)
            self._since += len(text)
        self._written += 1
        self._link = _link(text)
        self._blocks = list(blocks)

    def _marks_of(self, b: _Block) -> list[Any]:
        held = self._marks.get(id(b))
        if held is None or held[0] is not b:
            held = self._marks[id(b)] = (b, _marks_of(b))
        return held[1]

    def _remember(
        self, state: SessionState, calls: dict[str, list[int]], items: list[Any] | None = None
    ) -> None:
        """Take what was just adopted as what the store holds (``items``: the records of the
        plan's items as read)."""
        self._blocks = list(state.blocks)
        plan: Any = state.plan
        if plan is not None:
            self._reset_plan(plan, True)
            self._calls = dict(calls)
            fold = plan.fold
            self._items = list(items) if items is not None else [_item_rec(item) for item in fold.items]
            self._index = {id(item): n for n, item in enumerate(fold.items)}
            self._active = [self._index[id(item)] for item in fold.active]
            self._reads = dict(fold.reads)
            self._chars = len(fold.message_chars)
            self._asst = len(plan.assistants)
            self._registered = fold.registered
            self._names = plan.names_indexed

    def _reset_plan(self, plan: Any, fresh: bool) -> None:
        """Write the plan whole next: all of it again, or (``fresh``) a new fold."""
        self._plan, self._fold = plan, plan.fold
        self._items, self._index, self._active, self._reads = [], {}, [], {}
        self._chars = self._asst = self._names = 0
        if fresh:
            self._calls, self._registered = {}, 0

    def _plan_rec(self, plan: Any, state: SessionState, dirty: list[_Block], whole: bool) -> dict[str, Any]:
        fold = plan.fold
        items = fold.items
        index = self._index
        for n in range(len(self._items), len(items)):
            index[id(items[n])] = n
        # items that may have changed: new ones, the active (before and now), those of the
        # blocks rendered again, those whose names were indexed
        candidates = set(range(len(self._items), len(items)))
        candidates.update(self._active)
        active = [index[id(item)] for item in fold.active]
        candidates.update(active)
        for b in dirty:
            lo = b.flat_start
            hi = lo + len(b.staged or ())
            for item in plan._range(lo, hi):
                found = index.get(id(item))
                if found is not None:
                    candidates.add(found)
        changed: list[list[Any]] = []
        saved = self._items
        saved.extend([None] * (len(items) - len(saved)))  # type: ignore[list-item]
        why: dict[str, int] = {}  # the reasons, each once (a batch's moves share theirs)
        for n in sorted(candidates):
            rec = _item_rec(items[n])
            if rec != saved[n]:
                saved[n] = rec
                changed.append([n, [*rec[:10], why.setdefault(rec[10], len(why)), *rec[11:]]])
        # the messages' sizes: those of the blocks rendered again, and the new ones
        chars = fold.message_chars
        ranges = []
        for b in dirty:
            lo = b.flat_start
            hi = min(len(chars), lo + len(b.staged or ()))
            if lo < hi and lo < self._chars:
                ranges.append([lo, chars[lo:hi]])
        # and those of items that moved since (a move decided on the side of a request, whose
        # rendering did not change when the next request made it)
        for _, rec in changed:
            if rec[0] < min(len(chars), self._chars):
                ranges.append([rec[0], chars[rec[0] : rec[0] + 1]])
        if len(chars) > self._chars or whole:
            start = 0 if whole else self._chars
            ranges.append([start, chars[start:]])
        self._chars = len(chars)
        asst = plan.assistants
        start = 0 if whole else bisect_right(asst, dirty[0].flat_start - 1) if dirty else len(asst)
        start = min(start, self._asst)
        self._asst = len(asst)
        reads = {
            path: index[id(item)] for path, item in fold.reads.items() if self._reads.get(path) is not item
        }
        self._reads = dict(fold.reads)
        # the calls of the messages registered since the last chunk (all of them in a whole
        # state: those of adopted blocks, not staged here, are known from the store)
        calls: dict[str, list[int]] = {}
        flat = state.flat
        for m in range(self._registered, fold.registered):
            message = flat[m]
            if message is None or message.role != "assistant":
                continue
            for p, part in enumerate(message.parts):
                if isinstance(part, ToolCallPart):
                    calls[part.id] = [m, p]
        self._calls.update(calls)
        if whole:
            calls = dict(self._calls)
        self._registered = fold.registered
        # names first shown by the results indexed since the last chunk (all in a whole state)
        first = plan.first_shown
        names: dict[str, list[int]] = {}
        if whole:
            names = {name: list(place) for name, place in first.items()}
        for item in [] if whole else items[self._names : plan.names_indexed]:
            if item.names:
                place = (item.message, item.part)
                for name in item.names:
                    if first.get(name) == place:
                        names[name] = [item.message, item.part]
        self._names = plan.names_indexed
        self._active = active
        return {
            "s": [fold.boundaries, fold.registered, fold.sent_total, fold.recorded_total, fold.spent,
                  fold.unmanaged, fold.stalled, fold.leaned, plan.scanned, plan.names_indexed],
            "asst": [start, asst[start:]],
            "chars": ranges,
            "nitems": len(items),
            "items": changed,
            "why": list(why),
            "active": active,
            "reads": reads,
            "calls": calls,
            "names": names,
            "side": sorted(plan.side_messages),
        }  # fmt: skip


_KINDS: dict[str, Kind] = {k: k for k in get_args(Kind)}
_ROLES: dict[str, Role] = {r: r for r in get_args(Role)}


def _index(m: int, n: int) -> int:
    if not 0 <= m < n:
        raise IndexError("an output message names no message of the history")
    return m


def _economy(plan: Any) -> bool:
    from .policies import EconomyPlan  # (the one plan whose decisions are kept)

    return type(plan) is EconomyPlan


def _link(text: str) -> str:
    """What the chunk after the one written as ``text`` names it by."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _Unfit(f"not JSON: {exc}") from exc


def _item_rec(item: Any) -> list[Any]:
    obj = item.obj
    call = isinstance(obj, ToolCallPart)
    key = None if call else _SLOT_KEY.__get__(obj, type(obj))  # (the slot itself: a lazy part stays so)
    return [
        item.message, item.part, item.block, item.kind, item.failure, item.recalled, item.tier, item.superseded,
        sorted([t, s] for t, s in item.sizes.items()), item.role, item.reason, key, call,
    ]  # fmt: skip


def _block_rec(b: _Block, messages: Sequence[Any], marks: list[Any]) -> list[Any]:
    where = {id(messages[i]): i for i in range(b.start, min(b.end, len(messages)))}
    out = []
    for m in b.messages:
        i = where.get(id(m))
        out.append(i if i is not None and messages[i] is m else {"m": m})
    return [
        b.start, b.end, b.calls, b.age, _key_rec(b.age_key), out, list(b.call_ids_out), sorted(b.seen_before),
        _report_rec(b.report), _key_rec(b.render_key), len(b.staged) if b.staged is not None else None, marks,
    ]  # fmt: skip


def _marks_of(b: _Block) -> list[Any]:
    """What the block's output names: the keys of the markers of each of its messages
    (``[index, [keys]]`` for those that name any), and the saved files of its results."""
    out = []
    for n, m in enumerate(b.messages):
        keys = marker_keys(m)
        if keys:
            out.append([n, sorted(keys)])
    files = {
        p.saved_path for m in b.neutral for p in m.parts if isinstance(p, ToolResultPart) and p.saved_path
    }
    return [out, sorted(files)]


class _Image:
    """A stored state as read, chunk after chunk, before it is installed."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.blocks: list[list[Any]] = []
        self.plan: dict[str, Any] | None = None
        self.items: list[list[Any] | None] = []
        self.chars: list[int] = []
        self.asst: list[int] = []
        self.reads: dict[str, int] = {}
        self.calls: dict[str, list[int]] = {}
        self.names: dict[str, list[int]] = {}
        self.marks: list[tuple[_Block, list[tuple[str, ...]]]] = []
        self.raw_marks: list[Any] = []
        """Per block installed, its record of what its output names (for the writer)."""
        """Per block installed: the keys each of its messages names."""

    def apply(self, chunk: dict[str, Any]) -> None:
        if chunk["v"] != RECORDS_VERSION:
            raise ValueError("another version")
        if chunk["whole"]:
            self.__init__(self.fmt)  # type: ignore[misc]
        total = int(chunk["blocks"])
        blocks = self.blocks
        del blocks[total:]
        blocks.extend([None] * (total - len(blocks)))  # type: ignore[list-item]
        for j, rec in chunk["set"]:
            blocks[j] = rec
        plan = chunk.get("plan")
        if plan is None:
            self.plan = None
            return
        self.plan = plan
        items = self.items
        del items[int(plan["nitems"]) :]
        items.extend([None] * (int(plan["nitems"]) - len(items)))
        why = plan["why"]
        for n, rec in plan["items"]:
            items[n] = [*rec[:10], str(why[rec[10]]), *rec[11:]]
        chars = self.chars
        for lo, values in plan["chars"]:
            if not 0 <= lo <= len(chars):
                raise ValueError("sizes out of place")
            chars[lo : lo + len(values)] = values
        start, values = plan["asst"]
        del self.asst[start:]
        self.asst.extend(values)
        self.reads.update(plan["reads"])
        self.calls.update(plan["calls"])
        self.names.update(plan["names"])

    def folded(self) -> int:
        return int(self.plan["s"][0]) if self.plan is not None else 0

    def check(self, n: int, plan: Any) -> None:
        """Raise :class:`_Unfit` unless the image is whole and consistent with ``n`` messages."""
        if any(b is None for b in self.blocks) or not self.blocks:
            raise _Unfit("a block is missing")
        end = 0
        for b in self.blocks:
            if b[0] != end or b[1] < b[0]:
                raise _Unfit("the blocks do not follow each other")
            end = b[1]
        if end != n:
            raise _Unfit("the blocks do not cover the history they say")
        if (self.plan is None) != (plan is None):
            raise _Unfit("made with another kind of policy")
        if self.plan is not None:
            if any(i is None for i in self.items):
                raise _Unfit("an item is missing")
            if any(b[10] is None for b in self.blocks):
                raise _Unfit("a block has no staged size")

    def install(
        self, state: SessionState, fmt: Format, messages: Sequence[Any], n: int, ctx: StepContext, plan: Any
    ) -> None:
        """Make ``state`` the one this image records, over ``messages`` (its first ``n`` covered),
        its plan ``plan`` (a new one, filled here); ``state`` is left alone if the image is bad."""
        name = self.fmt
        blocks: list[_Block] = []
        files: list[str] = []
        flat_len = 0
        try:
            for rec in self.blocks:
                start, end, calls, age, age_key, out, ids, seen, report, render_key, staged, marks = rec
                msgs = [messages[_index(m, n)] if isinstance(m, int) else m["m"] for m in out]
                r = _report_of(report, name)
                if not (type(start) is type(end) is type(calls) is type(age) is int):
                    raise TypeError("a block's place is not whole numbers")
                b = _Block(
                    start, end, calls, _key_of(age_key), msgs, tuple(ids), frozenset(seen), r, None, r,
                    _key_of(render_key), age=age,
                )  # fmt: skip
                if staged is not None:
                    b.staged = [None] * int(staged)  # type: ignore[list-item]
                    b.lazy = True
                    b.flat_start = flat_len
                    flat_len += int(staged)
                blocks.append(b)
                per: list[tuple[str, ...]] = [()] * len(msgs)
                for n_, keys in marks[0]:
                    per[n_] = tuple(validate_key(k) for k in keys)
                self.marks.append((b, per))
                self.raw_marks.append(marks)
                files.extend(str(f) for f in marks[1])
        except (TypeError, ValueError, IndexError, KeyError, InvalidKeyError) as exc:
            raise _Unfit(f"malformed block: {exc}") from exc
        # the files the adopted output names must be there (a workspace removed at close, another
        # machine's): else the full fold saves them again
        if not all(os.path.isfile(f) for f in files):
            raise _Unfit("a file the kept state names is gone")
        if plan is not None:
            self._install_plan(plan, state, flat_len)
        state.plan = plan
        state.format = fmt
        state.blocks = blocks
        state.flat = [None] * flat_len  # type: ignore[list-item]
        state.fingerprints = [(messages[i], _UNKNOWN, None) for i in range(n)]  # type: ignore[misc]
        state.seen = {i for b in blocks for i in b.call_ids_out}
        state.restage = Restage(fmt, (), ctx)
        _Engine(state)._commit(blocks, 0, Report(format=name))

    def _install_plan(self, plan: Any, state: SessionState, flat_len: int) -> None:
        from .policies import Item

        p = self.plan
        assert p is not None
        try:
            s = p["s"]
            fold = plan.fold
            (
                boundaries,
                registered,
                sent,
                recorded,
                spent,
                unmanaged,
                stalled,
                leaned,
                scanned,
                names_indexed,
            ) = s
            if not 0 <= int(registered) <= int(scanned) <= flat_len or len(self.chars) > flat_len:
                raise _Unfit("the plan does not fit the blocks")
            items = []
            for rec in self.items:
                assert rec is not None
                (
                    message,
                    part,
                    block,
                    kind,
                    failure,
                    recalled,
                    tier,
                    superseded,
                    sizes,
                    role,
                    reason,
                    key,
                    call,
                ) = rec
                message, part = int(message), int(part)
                key = None if key is None else validate_key(key)
                if not 0 <= message < flat_len:
                    raise _Unfit("an item lies outside the history")
                item = Item(
                    int(message), int(part), int(block),
                    _lazy_call(state, message, part) if call else _lazy_result(state, message, part, key),
                    None if kind is None else _KINDS[kind], bool(failure), bool(recalled), int(tier),
                    bool(superseded), role=_ROLES[role], reason=str(reason),
                )  # fmt: skip
                item.sizes = {int(t): int(v) for t, v in sizes}
                items.append(item)
            fold.items = items
            fold.active = [items[int(i)] for i in p["active"]]
            fold.reads = {str(k): items[int(i)] for k, i in self.reads.items()}
            fold.calls = _Calls(state, {str(k): (int(m), int(q)) for k, (m, q) in self.calls.items()})
            fold.message_chars = [int(c) for c in self.chars]
            fold.boundaries, fold.registered = int(boundaries), int(registered)
            fold.sent_total, fold.recorded_total = int(sent), int(recorded)
            fold.spent, fold.unmanaged = float(spent), float(unmanaged)
            fold.stalled, fold.leaned = int(stalled), bool(leaned)
            plan.assistants = [int(a) for a in self.asst]
            plan.scanned = int(scanned)
            plan.item_messages = [item.message for item in items]
            plan.first_shown = {str(k): (int(m), int(q)) for k, (m, q) in self.names.items()}
            plan.names_indexed = int(names_indexed)
            plan.side_messages = {int(m) for m in p["side"]}
            if plan.item_messages != sorted(plan.item_messages):
                raise _Unfit("the items are out of order")
        except (TypeError, ValueError, IndexError, KeyError, InvalidKeyError) as exc:
            raise _Unfit(f"malformed plan: {exc}") from exc
