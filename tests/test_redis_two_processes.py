"""Agents on many machines: separate processes share one Redis archive (a real ``redis-server``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkeep.shorten import CCR_MARKER_RE, archive_key
from toolkeep.stores.redis import RedisStore

from . import redis_server
from .redis_server import fresh_prefix
from .strategies import anthropic_turns

redis_url = redis_server.redis_url  # the session-wide Redis fixture

TOOLKEEP = [sys.executable, "-m", "toolkeep"]

# a second process that pages every key back through the recall tool, as a model would
RECALL_ALL = """
import json, re, sys
from toolkeep import Config
from toolkeep.recall import recall_answer
from toolkeep.stores import open_store

url, keys = sys.argv[1], json.loads(sys.stdin.read())
note = re.compile(r"\\n\\n\\[lines? [^\\n]*\\]\\Z")
more = re.compile(r"start_line=(\\d+)(?:, start_char=(\\d+))?\\]\\Z")
config = Config(recall_page_chars=4_000)
out = {}
with open_store(url) as store:
    for key in keys:
        parts, args = [], {}
        while True:
            answer = recall_answer(store, key, config=config, **args)
            found = note.search(answer)
            parts.append(answer[: found.start()] if found else answer)
            step = more.search(answer) if found else None
            if step is None:
                break
            args = {"start_line": int(step[1])}
            if step[2]:
                args["start_char"] = int(step[2])
        out[key] = "".join(parts)
sys.stdout.write(json.dumps(out))
"""


def originals(salt: str) -> list[str]:
    """Big results, unlike each other, with non-ASCII, CRLF and one line far over a page."""
    texts = ["".join(f"{salt}{n}:{i:05d} é中🙂\r\n" for i in range(2_000 + 300 * n)) for n in range(4)]
    texts.append(salt + "q" * 60_000)
    return texts


def prepare_cmd(tmp: Path, name: str, texts: list[str], url: str) -> list[str]:
    source = tmp / f"{name}.json"
    source.write_text(json.dumps(anthropic_turns(*[(f"c{n}", "grep", t) for n, t in enumerate(texts)])))
    return [*TOOLKEEP, "prepare", str(source), "-o", str(tmp / f"{name}.out.json"),
            "--workspace", str(tmp / f"ws-{name}"), "--store", url]  # fmt: skip


def keys_in(path: Path) -> list[str]:
    return list(dict.fromkeys(CCR_MARKER_RE.findall(path.read_text())))


@pytest.fixture
def namespace(redis_url: str) -> Iterator[str]:
    """A store URL with a fresh prefix; the namespace is deleted afterwards."""
    prefix = fresh_prefix()
    yield f"{redis_url}?prefix={prefix}"
    with RedisStore(redis_url, prefix=prefix) as store:
        store.clear()


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "TOOLKEEP_STORE_URL"}


@pytest.mark.slow  # two processes over every key of a trajectory: half a minute
def test_one_prepares_the_other_recalls_every_key(namespace: str, tmp_path: Path) -> None:
    """A `toolkeep prepare --store redis://` process archives; another process recalls every key
    byte-exact, once with `toolkeep recall` and once by paging through the recall tool."""
    url = namespace
    texts = originals("a")
    done = subprocess.run(prepare_cmd(tmp_path, "a", texts, url), capture_output=True, env=env(), timeout=120)
    assert done.returncode == 0, done.stderr
    keys = keys_in(tmp_path / "a.out.json")
    assert sorted(keys) == sorted(archive_key(t) for t in texts)
    by_key = {archive_key(t): t for t in texts}
    for key in keys:
        got = subprocess.run(
            [*TOOLKEEP, "recall", key, "--store", url], capture_output=True, env=env(), timeout=60
        )
        assert got.returncode == 0, got.stderr
        assert got.stdout == by_key[key].encode("utf-8")
    paged = subprocess.run(
        [sys.executable, "-c", RECALL_ALL, url], input=json.dumps(keys).encode(),
        capture_output=True, env=env(), timeout=120, check=True,
    )  # fmt: skip
    assert json.loads(paged.stdout) == by_key


def test_two_agents_at_once_recall_each_others_results(
    redis_url: str, namespace: str, tmp_path: Path
) -> None:
    """Two prepare processes running at the same time share the namespace: each one's keys are
    recalled by a third process, and a store under another prefix sees none of them."""
    url = namespace
    texts = {"a": originals("a"), "b": originals("b")}
    procs = [
        subprocess.Popen(prepare_cmd(tmp_path, name, ts, url), stderr=subprocess.PIPE, env=env())
        for name, ts in texts.items()
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    keys = keys_in(tmp_path / "a.out.json") + keys_in(tmp_path / "b.out.json")
    expected = {archive_key(t): t for ts in texts.values() for t in ts}
    assert sorted(keys) == sorted(expected)
    paged = subprocess.run(
        [sys.executable, "-c", RECALL_ALL, url], input=json.dumps(keys).encode(),
        capture_output=True, env=env(), timeout=120, check=True,
    )  # fmt: skip
    assert json.loads(paged.stdout) == expected
    stats = subprocess.run(
        [*TOOLKEEP, "store", "stats", "--json", "--store", url], capture_output=True, env=env()
    )
    assert json.loads(stats.stdout)["entries"] == len(expected)
    other = subprocess.run(
        [*TOOLKEEP, "recall", keys[0], "--store", f"{namespace}-other"],
        capture_output=True,
        env=env(),
    )
    assert other.returncode == 1
