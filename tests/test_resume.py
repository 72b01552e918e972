"""A new session (a new process, the proxy after a restart, a new replica) given a conversation's
history goes on from the state an earlier one kept in the store (:mod:`toolkeep.resume`), with
the same bytes as the session that saw every request; a state that is missing, stale, corrupt or
of another config is not taken, and the full fold gives those bytes instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.conversation_key import conversation_key
from toolkeep.formats import has_objects
from toolkeep.pipeline import POLICIES
from toolkeep.policies import build_steps
from toolkeep.pricing import CacheTimes
from toolkeep.proxy.conversations import Conversations as ProxyConversations
from toolkeep.resume import Resume, head_key
from toolkeep.shorten import archive_key
from toolkeep.stores import ArchiveStore, MemoryStore, StoreBase
from toolkeep.stores.file import FileStore
from toolkeep.stores.redis import RedisStore
from toolkeep.userdirs import user_sessions_dir
from toolkeep.workspace import Workspace

from . import redis_server
from .conftest import TRAJECTORIES, load_trajectory
from .strategies import (
    agent_histories,
    bedrock_histories,
    gemini_histories,
    langchain_histories,
    long_sessions,
    property_settings,
    responses_histories,
)

redis_url = redis_server.redis_url  # the session-wide Redis fixture

SRC = Path(toolkeep.__file__).resolve().parent.parent


def cases() -> st.SearchStrategy[tuple[str, list[Any]]]:
    """``(format, history)`` in every format the strategies make."""
    return st.one_of(
        long_sessions(),
        agent_histories(),
        responses_histories().map(lambda h: ("openai-responses", h)),
        gemini_histories().map(lambda h: ("gemini", h)),
        bedrock_histories().map(lambda h: ("bedrock", h)),
        langchain_histories().map(lambda h: ("langchain", h)),
    )


def dumped(messages: Any) -> str:
    """``messages`` as JSON (SDK objects by their ``repr``)."""
    return json.dumps(messages, default=repr)


def request_ends(history: list[Any]) -> list[int]:
    """Every prefix of the history, as an agent appending one message at a time sends it."""
    return list(range(1, len(history) + 1))


def same_paths(text: str, *workspaces: Path) -> str:
    """``text`` with each workspace's path as the same word (saved files are named by path)."""
    for ws in workspaces:
        text = text.replace(str(ws), "WS")
    return text


def resume_of(session: toolkeep.Session) -> Resume:
    resume = session.conversations.current.state.resume
    assert isinstance(resume, Resume)
    return resume


def incremental(
    config: toolkeep.Config, fmt: str, history: list[Any], ends: list[int], ws: Path, **kwargs: Any
) -> list[tuple[str, dict[str, Any]]]:
    """What a session that saw every request in ``ends`` sends for each, with its report."""
    out = []
    with toolkeep.Session(config, workspace=ws, **kwargs) as session:
        for end in ends:
            sent, report = session.prepare(history[:end], format=fmt)
            out.append((dumped(sent), report.to_dict()))
    return out


class TestSameBytes:
    @pytest.mark.parametrize("policy", sorted(POLICIES))
    @property_settings(20)
    @given(case=cases(), data=st.data())
    def test_a_resumed_session_sends_what_the_one_that_saw_every_request_sends(
        self, policy: str, case: tuple[str, list[Any]], data: st.DataObject, tmp_path_factory: Any
    ) -> None:
        """Sessions made again at random requests (each closing, the next one on the same
        workspace): every output and report is the one of a session that saw every request, and
        each new session adopted the kept state (in a format whose messages load one by one, a
        history of plain JSON)."""
        fmt, history = case
        ends = request_ends(history)
        restarts = data.draw(
            st.lists(st.booleans(), min_size=len(ends), max_size=len(ends)), label="restarts"
        )
        config = toolkeep.Config(policy=policy)
        ref_ws, ws = tmp_path_factory.mktemp("ws"), tmp_path_factory.mktemp("ws")
        expected = incremental(config, fmt, history, ends, ref_ws)
        adoptable = toolkeep.get_format(fmt).rules.per_message and not has_objects(history)
        session = toolkeep.Session(config, workspace=ws)
        try:
            for n, end in enumerate(ends):
                if restarts[n] and n:
                    session.close()
                    session = toolkeep.Session(config, workspace=ws)
                sent, report = session.prepare(history[:end], format=fmt)
                assert same_paths(dumped(sent), ws) == same_paths(expected[n][0], ref_ws)
                assert report.to_dict() == expected[n][1]
                if restarts[n] and n and adoptable:
                    assert resume_of(session).adopted == ends[n - 1], resume_of(session).failed
        finally:
            session.close()

    @pytest.mark.parametrize("policy", sorted(POLICIES))
    def test_a_real_trajectory_restarted_every_few_requests(self, policy: str, tmp_path: Path) -> None:
        """A real trajectory whose session is made again every few requests sends what one
        session sends, request by request, reports included."""
        path = next((p for p in TRAJECTORIES if 150_000 < p.stat().st_size < 600_000), None)
        if path is None:
            pytest.skip("no trajectory of that size")
        history = load_trajectory(path)
        ends = request_ends(history)[: min(len(history), 160)]
        config = toolkeep.Config(policy=policy)
        expected = incremental(config, "anthropic", history, ends, tmp_path / "ref")
        ws = tmp_path / "wsx"
        adopted = 0
        session = toolkeep.Session(config, workspace=ws)
        for n, end in enumerate(ends):
            if n % 7 == 0 and n:
                session.close()
                session = toolkeep.Session(config, workspace=ws)
            sent, report = session.prepare(history[:end], format="anthropic")
            assert same_paths(json.dumps(sent), ws) == same_paths(expected[n][0], tmp_path / "ref")
            assert report.to_dict() == expected[n][1]
            adopted += n % 7 == 0 and resume_of(session).adopted > 0
        session.close()
        assert adopted == (len(ends) - 1) // 7


def history_of(n: int = 20) -> list[Any]:
    history: list[Any] = [{"role": "user", "content": "start"}]
    for k in range(n):
        history.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{k}", "name": "bash", "input": {"command": f"cat f{k}.py"}}]})  # fmt: skip
        text = "".join(f"def f{k}_{i}(x):\n    return x + {i}\n" for i in range(400))
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": text}]})  # fmt: skip
    return history


def kept(
    store: ArchiveStore, history: list[Any], stop: int, config: toolkeep.Config | None = None
) -> list[str]:
    """Prepare every request of ``history`` up to ``stop`` in one session over ``store``; what it
    sent for each."""
    out = []
    with toolkeep.Session(config or toolkeep.Config(), store=store) as session:
        for end in range(1, stop + 1):
            out.append(json.dumps(session.prepare(history[:end], "anthropic")[0]))
    return out


def the_head(history: list[Any], config: toolkeep.Config | None = None, workspace: Path | None = None) -> str:
    """The key of the head of the state a session keeps for ``history`` (by default on the
    conversation's own workspace)."""
    config = config or toolkeep.Config()
    where = workspace or user_sessions_dir() / conversation_key(history[0])
    return head_key(history, config, build_steps(config), toolkeep.get_format("anthropic"), str(where))


def state_of(store: StoreBase) -> ArchiveStore:
    """Where a session over ``store`` keeps its conversations' state."""
    state = store.state_store()
    assert state is not None
    return state


class TestFallsBack:
    """What the store holds is taken only if it fits; else the full fold, and the same bytes."""

    def resumed(self, store: ArchiveStore, history: list[Any], **kwargs: Any) -> tuple[str, Resume]:
        with toolkeep.Session(store=store, **kwargs) as session:
            sent, _ = session.prepare(history, "anthropic")
            return json.dumps(sent), resume_of(session)

    def test_taken_when_it_fits(self) -> None:
        history, store = history_of(), MemoryStore()
        expected = kept(store, history, len(history))
        text, resume = self.resumed(store, history)
        assert text == expected[-1] and resume.adopted == len(history)

    @pytest.mark.parametrize(
        "damage", ["not json", "another conversation", "whole state gone", "head garbled"]
    )
    def test_a_damaged_state_is_not_taken(self, damage: str) -> None:
        history, original = history_of(), MemoryStore()
        expected = kept(original, history, len(history))
        store = state_of(original)
        head = the_head(history)
        epoch = json.loads(store.get(head) or "{}")["epoch"]
        whole = Resume.chunk_key(head, epoch, 0)
        text = store.get(whole)
        assert text is not None
        store.delete(whole)
        if damage == "not json":
            store.put(whole, text[: len(text) // 2])
        elif damage == "another conversation":
            chunk = json.loads(text)
            chunk["conversation"] = "0" * 16
            store.put(whole, json.dumps(chunk))
        elif damage == "head garbled":
            store.put(whole, text)
            store.delete(head)
            store.put(head, '{"v": 1, "fp": 3}')
        sent, resume = self.resumed(original, history)
        assert sent == expected[-1]
        assert resume.adopted == 0 and resume.failed

    def test_a_chunk_that_does_not_follow_ends_what_is_taken(self) -> None:
        """A chunk not linked to the one before it (a replica that lost a race) is not read, nor
        any after it: the state up to there is taken and the rest folded."""
        history, original = history_of(12), MemoryStore()
        with toolkeep.Session(store=original) as session:
            resume = resume_of_first(session, history)
            resume.write_every = 1
            for end in range(2, len(history) + 1):
                session.prepare(history[:end], "anthropic")
        store = state_of(original)
        head = the_head(history)
        epoch = json.loads(store.get(head) or "{}")["epoch"]
        chunks = 0
        while store.get(Resume.chunk_key(head, epoch, chunks)) is not None:
            chunks += 1
        assert chunks >= 2
        last = Resume.chunk_key(head, epoch, chunks - 1)
        chunk = json.loads(store.get(last) or "{}")
        chunk["prev"] = "0" * 32
        store.delete(last)
        store.put(last, json.dumps(chunk))
        expected = kept(MemoryStore(), history, len(history))
        sent, resume = self.resumed(original, history)
        assert sent == expected[-1]
        assert 0 < resume.adopted < len(history)

    def test_an_edited_history_is_folded_whole(self) -> None:
        history, store = history_of(), MemoryStore()
        kept(store, history, len(history))
        edited = [*history[:3], {**history[3], "content": [{**history[3]["content"][0], "content": "changed"}]}, *history[4:]]  # fmt: skip
        sent, resume = self.resumed(store, edited)
        assert resume.adopted == 0 and resume.failed == "the history differs from what it covers"
        assert sent == kept(MemoryStore(), edited, len(edited))[-1]

    def test_another_config_finds_nothing(self) -> None:
        history, store = history_of(), MemoryStore()
        kept(store, history, len(history))
        other = toolkeep.Config(compact_min_chars=4_000)
        sent, resume = self.resumed(store, history, config=other)
        assert resume.adopted == 0 and resume.failed == "nothing stored"
        assert sent == kept(MemoryStore(), history, len(history), other)[-1]

    def test_a_shorter_history_is_folded_whole(self) -> None:
        history, store = history_of(), MemoryStore()
        kept(store, history, len(history))
        sent, resume = self.resumed(store, history[:5])
        assert resume.adopted == 0 and resume.failed == "it covers more than the history"
        assert sent == kept(MemoryStore(), history, 5)[-1]

    def test_other_expired_requests_are_folded_whole(self) -> None:
        """A state decided knowing of expired requests is taken by a session told nothing of
        them (it learns them), not by one told of others."""
        history, store = history_of(), MemoryStore()
        with toolkeep.Session(store=store) as session:
            for end in range(1, len(history) + 1):
                sent, _ = session.prepare(history[:end], "anthropic", now=float(end * 1000))
            expected = json.dumps(sent)
            told = session.cache_times(history)
        assert told.expired
        with toolkeep.Session(store=store) as session:
            again, _ = session.prepare(history, "anthropic", now=float(len(history) * 1000))
            assert json.dumps(again) == expected and resume_of(session).adopted == len(history)
            assert session.cache_times(history).expired == told.expired
        with toolkeep.Session(store=store) as session:
            other = CacheTimes(told.last, frozenset({0}))
            session.prepare(history, "anthropic", now=float(len(history) * 1000), cache=other)
            assert resume_of(session).adopted == 0

    def test_originals_the_store_lost_are_archived_again(self) -> None:
        """The store kept the state but lost originals its markers name: the request is made
        again from scratch, which archives them again."""
        history, store = history_of(), MemoryStore()
        expected = kept(store, history, len(history))
        named = set(toolkeep.markers.marker_keys(json.loads(expected[-1])))
        assert named
        for key in named:
            store.delete(key)
        sent, _ = self.resumed(store, history)
        assert sent == expected[-1]
        assert all(store.get(key) is not None for key in named)


def resume_of_first(session: toolkeep.Session, history: list[Any]) -> Resume:
    session.prepare(history[:1], "anthropic")
    return resume_of(session)


_SCRIPT = """
import json, sys
import toolkeep
history = json.load(open(sys.argv[1]))
with toolkeep.Session(toolkeep.Config(policy=sys.argv[4]), workspace=sys.argv[2]) as session:
    sent, report = session.prepare(history[: int(sys.argv[3])], "anthropic")
    resume = session.conversations.current.state.resume
    print(json.dumps({"adopted": resume.adopted, "sent": sent, "report": report.to_dict()}))
"""


def in_a_new_process(history_file: Path, ws: Path, end: int, policy: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(history_file), str(ws), str(end), policy],
        capture_output=True, text=True, env=env, timeout=300, check=True,
    )  # fmt: skip
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.mark.parametrize("policy", ["economy", "spec"])
def test_a_new_process_goes_on_from_the_kept_state(policy: str, tmp_path: Path) -> None:
    """Each request in a process of its own (as ``toolkeep prepare`` runs): each adopts what the
    one before kept, and sends what one session sending them all sends."""
    history = history_of(10)
    history_file = tmp_path / "history.json"
    history_file.write_text(json.dumps(history))
    ends = [3, 4, 9, 15, len(history)]
    expected = incremental(toolkeep.Config(policy=policy), "anthropic", history, ends, tmp_path / "ref")
    for n, end in enumerate(ends):
        got = in_a_new_process(history_file, tmp_path / "new", end, policy)
        assert same_paths(json.dumps(got["sent"]), tmp_path / "new") == same_paths(
            expected[n][0], tmp_path / "ref"
        )
        assert got["report"] == expected[n][1]
        assert got["adopted"] == (ends[n - 1] if n else 0)


def test_the_cli_keeps_its_state_between_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``toolkeep prepare`` (a new process each run, the conversation's own workspace): the
    second run adopts what the first kept (a chunk follows the whole state the first wrote)."""
    history = history_of(10)
    first, whole = tmp_path / "first.json", tmp_path / "whole.json"
    first.write_text(json.dumps(history[:9]))
    whole.write_text(json.dumps(history))
    env = {**os.environ, "PYTHONPATH": str(SRC), "TOOLKEEP_CACHE_DIR": str(tmp_path / "cache")}
    outs = []
    for source in (first, whole):
        out = tmp_path / f"out-{source.name}"
        subprocess.run(
            [sys.executable, "-m", "toolkeep", "prepare", str(source), "-o", str(out)],
            env=env, capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        outs.append(json.loads(out.read_text()))
    key = conversation_key(history[0])
    monkeypatch.setenv("TOOLKEEP_CACHE_DIR", str(tmp_path / "cache"))
    store = state_of(FileStore(user_sessions_dir() / key / "archive"))
    head = the_head(history, workspace=user_sessions_dir() / key)
    epoch = json.loads(store.get(head) or "{}")["epoch"]
    assert store.get(Resume.chunk_key(head, epoch, 1)) is not None  # the second run's
    expected = incremental(toolkeep.Config(), "anthropic", history, [9, len(history)], tmp_path / "ref")
    assert json.dumps(outs[1]).count("ccr:") == expected[1][0].count("ccr:")


def test_a_replica_sharing_redis_goes_on_from_the_kept_state(redis_url: str, tmp_path: Path) -> None:
    """Two replicas over one Redis store, each taking the conversation in turn: each adopts
    what the other kept and sends what one session sends."""
    history = history_of(10)
    prefix = redis_server.fresh_prefix()
    expected = incremental(toolkeep.Config(), "anthropic", history, request_ends(history), tmp_path / "ref")
    turns = [range(1, 6), range(6, 12), range(12, len(history) + 1)]
    for n, ends in enumerate(turns):
        with RedisStore(redis_url, prefix=prefix) as store, toolkeep.Session(store=store) as replica:
            for end in ends:
                sent, _ = replica.prepare(history[:end], "anthropic")
                assert json.dumps(sent) == expected[end - 1][0]
                if end == ends[0] and n:
                    assert resume_of(replica).adopted == ends[0] - 1


def test_the_proxy_after_a_restart_goes_on_from_the_kept_state(tmp_path: Path) -> None:
    """The proxy's table of conversations made again over the same workspace and store (a
    restart): its conversation adopts the kept state and sends the same bytes."""
    history = history_of(8)
    config = toolkeep.Config()
    ws = Workspace(tmp_path / "ws")
    store = MemoryStore()

    def table() -> ProxyConversations:
        return ProxyConversations(config, ws, store)

    before = table()
    sent = [
        before.get("anthropic", history).state.prepare(history[:end], "anthropic").messages
        for end in range(1, 10)
    ]
    before.close()
    after = table()
    conversation = after.get("anthropic", history).state
    for end in range(10, len(history) + 1):
        sent.append(conversation.prepare(history[:end], "anthropic").messages)
        if end == 10:
            assert isinstance(conversation.state.resume, Resume) and conversation.state.resume.adopted == 9
    after.close()
    one = table()
    whole = one.get("anthropic", history).state
    whole.state.resume = None  # (a table that keeps nothing: the reference)
    reference = [whole.prepare(history[:end], "anthropic").messages for end in range(1, len(history) + 1)]
    assert [json.dumps(s) for s in sent] == [json.dumps(r) for r in reference]


def test_a_saved_file_that_is_gone_is_saved_again(tmp_path: Path) -> None:
    """The kept state names a file the workspace no longer holds (removed, another machine's):
    not taken; the full fold saves the file again and names it as before."""
    history = history_of(4)
    big = "".join(f"line {i} of a long log\n" for i in range(2_000))  # over the per-result budget
    history.append({"role": "assistant", "content": [{"type": "tool_use", "id": "big", "name": "bash", "input": {"command": "make"}}]})  # fmt: skip
    history.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "big", "content": big}]}
    )
    expected = kept_in(tmp_path / "ws", history)
    saved = [p for p in (tmp_path / "ws" / "tool-results").iterdir() if p.is_file()]
    assert saved and all(str(p) in expected for p in saved)
    for p in saved:
        p.unlink()
    with toolkeep.Session(workspace=tmp_path / "ws") as session:
        sent, _ = session.prepare(history, "anthropic")
        assert resume_of(session).failed == "a file the kept state names is gone"
    assert json.dumps(sent) == expected
    assert all(p.is_file() for p in saved)


def kept_in(ws: Path, history: list[Any]) -> str:
    with toolkeep.Session(workspace=ws) as session:
        for end in request_ends(history):
            sent, _ = session.prepare(history[:end], "anthropic")
    return json.dumps(sent)


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_every_store_keeps_state_beside_its_originals(kind: str, tmp_path: Path) -> None:
    """A store named by URL keeps the state in a namespace of its own: a new session adopts it,
    and the store counts only originals."""
    url = f"sqlite:///{tmp_path}/a.db" if kind == "sqlite" else f"file://{tmp_path}/archive"
    history = history_of()
    with toolkeep.Session(store=url) as session:
        for end in request_ends(history):
            expected, _ = session.prepare(history[:end], "anthropic")
    with toolkeep.Session(store=url) as session:
        sent, _ = session.prepare(history, "anthropic")
        assert resume_of(session).adopted == len(history)
    assert json.dumps(sent) == json.dumps(expected)
    head = the_head(history)
    with toolkeep.stores.open_store(url) as store:
        assert isinstance(store, StoreBase)
        assert store.get(head) is None  # not among the originals...
        assert state_of(store).get(head) is not None  # ...but beside them
        named = toolkeep.markers.marker_keys(sent)
        assert named and all(archive_key(store.get(key) or "") == key for key in named)
    if kind == "file":  # every file of the archive is an original under its own key
        files = [p for p in (tmp_path / "archive").iterdir() if p.suffix == ".txt"]
        assert files and all(archive_key(p.read_text(encoding="utf-8")) == p.stem for p in files)


def test_processes_of_one_request_each_keep_the_chunks_few(tmp_path: Path) -> None:
    """A process per request (as ``toolkeep prepare`` runs) writes a chunk each; past twice
    ``whole_after`` of them, one writes a whole state, so what a reader reads stays bounded."""
    history = history_of(40)
    store = MemoryStore()
    for end in range(1, len(history) + 1):
        with toolkeep.Session(store=store) as session:
            session.prepare(history[:end], "anthropic")
            resume = resume_of(session)
            assert resume.adopted == (end - 1 if end > 1 else 0)
            assert resume._written <= 2 * resume.whole_after + 1


def test_a_store_without_a_state_store_keeps_nothing(tmp_path: Path) -> None:
    """A store of the caller's own that keeps no state (no ``state_store``): nothing is kept
    nor looked for, and the session prepares as before."""

    class Plain:  # an ArchiveStore of its own: originals only
        def __init__(self) -> None:
            self.inner = MemoryStore()

        def put(self, key: str, text: str) -> None:
            self.inner.put(key, text)

        def get(self, key: str) -> str | None:
            return self.inner.get(key)

        def delete(self, key: str) -> bool:
            return self.inner.delete(key)

        def stats(self) -> Any:
            return self.inner.stats()

        def gc(self) -> Any:
            return self.inner.gc()

        def close(self) -> None:
            self.inner.close()

        def __enter__(self) -> Plain:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

    history = history_of()
    store = Plain()
    expected = kept(MemoryStore(), history, len(history))
    with toolkeep.Session(store=store) as session:
        for end in request_ends(history):
            sent, _ = session.prepare(history[:end], "anthropic")
        assert session.conversations.current.state.resume is None
    assert json.dumps(sent) == expected[-1]
