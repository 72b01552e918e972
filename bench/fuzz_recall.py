"""Coverage-guided fuzzing of the model-facing tools, ``recall`` and ``read_result`` (atheris).

Each input is bytes a model could make the agent hand to :func:`toolkeep.recall.handle_tool_call`:
the first byte picks the tool, the second how the rest is passed (as the arguments string, as
whatever JSON it parses to, or as the fields of an arguments object). The answer must be text
that fits one page and can be sent (strict UTF-8); anything raised is a finding, and atheris
writes the input as ``crash-*`` in the working directory (the JSON summary lists them).
Without atheris (it needs a compiler to build), the same target runs on random edits of the
seeds for the same time.

    python bench/fuzz_recall.py [--seconds 60] [--random]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    import atheris  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - depends on the machine
    atheris = None

# instrumented for coverage when atheris runs; plain imports otherwise
with atheris.instrument_imports(include=["toolkeep"]) if atheris else contextlib.nullcontext():
    import toolkeep
    from toolkeep.recall import READ_TOOL, RECALL_TOOL, handle_tool_call, page_limit

ORIGINAL = "".join(f"{n:04d} a line of tool output, é中🙂\n" for n in range(400))
KEY = toolkeep.shorten.archive_key(ORIGINAL)
CONFIG = toolkeep.Config(recall_page_chars=2_000)
WORKSPACE = toolkeep.Workspace()
STORE = toolkeep.MemoryStore()
STORE.put(KEY, ORIGINAL)
SAVED = str(WORKSPACE.persist("call_1", ORIGINAL))
LINES = ("start_line", "end_line", "start_char")
SEEDS = [
    b"\x00\x00" + json.dumps({"key": KEY, "start_line": 3}).encode(),
    b"\x01\x00" + json.dumps({"path": SAVED, "start_line": "2", "end_line": 9.0}).encode(),
    b"\x00\x01" + json.dumps([KEY]).encode(),
    b"\x01\x02" + f"{SAVED}\x00--3\x00\xc2\xb2".encode(),
    b"\x00\x00" + b"[" * 3_000,
]


def arguments_of(data: bytes) -> tuple[str, Any] | None:
    """The tool name and arguments an input stands for; ``None`` when it stands for none."""
    if len(data) < 2:
        return None
    name = (RECALL_TOOL, READ_TOOL)[data[0] & 1]
    try:
        text = data[2:].decode("utf-8", "surrogatepass")  # encoded surrogates become lone ones
    except UnicodeDecodeError:
        text = data[2:].decode("utf-8", "surrogateescape")
    mode = data[1] % 3
    if mode == 0:
        return name, text
    if mode == 1:
        try:
            return name, json.loads(text)
        except (ValueError, RecursionError):
            return None  # not JSON: mode 0 covers text as it is
    fields = ("key" if name == RECALL_TOOL else "path", *LINES)
    return name, dict(zip(fields, text.split("\x00"), strict=False))


def target(data: bytes) -> None:
    """One input: the answer is a page of text, or a finding is raised."""
    call = arguments_of(data)
    if call is None:
        return
    name, arguments = call
    answer = handle_tool_call(name, arguments, store=STORE, workspace=WORKSPACE, config=CONFIG)
    if not isinstance(answer, str):
        raise AssertionError(f"{name} answered {type(answer).__name__}, not text")
    answer.encode("utf-8")  # a lone surrogate the original does not hold is a finding
    if len(answer) > page_limit(CONFIG, name):
        raise AssertionError(f"{name} answered {len(answer):,} chars, more than one page")


def run_atheris(seconds: int) -> dict[str, Any]:
    """libFuzzer through atheris, in a child process whose temp files (its workspace, the
    corpus) all live in one directory removed afterwards: libFuzzer ends the child with a C
    ``exit()``, so its own clean-up never runs. Findings stay in the working directory."""
    with tempfile.TemporaryDirectory(prefix="toolkeep-fuzz-recall-") as tmp:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        for n, seed in enumerate(SEEDS):
            (corpus / f"seed-{n}").write_bytes(seed)
        flags = [f"-max_total_time={seconds}", "-max_len=65536", "-print_final_stats=1"]
        child = subprocess.run([sys.executable, __file__, "--libfuzzer", str(corpus), *flags],
                               env={**os.environ, "TMPDIR": tmp}, capture_output=True, text=True)  # fmt: skip
    stats = dict(
        line[len("stat::") :].split(":", 1) for line in child.stderr.splitlines() if line.startswith("stat::")
    )
    found = [line for line in child.stderr.splitlines() if "Test unit written to" in line]
    return {"engine": "atheris (libFuzzer)", "seconds": seconds,
            "executions": int(stats.get("number_of_executed_units", "0").strip() or 0),
            "findings": found, "exit": child.returncode}  # fmt: skip


def mutate(rng: random.Random, data: bytes) -> bytes:
    """A few random byte edits of ``data``: flips, inserts, deletions, a repeated slice."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(out) + 1)
        edit = rng.randrange(4)
        if edit == 0 and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
        elif edit == 1:
            out[at:at] = bytes([rng.randrange(256)]) * rng.choice((1, 1, 2, 9, 4_301))
        elif edit == 2:
            del out[at : at + rng.randint(1, 16)]
        else:
            out[at:at] = out[at : at + rng.randint(1, 32)] * rng.randint(2, 64)
    return bytes(out[:65_536])


def run_random(seconds: int, seed: int = 0) -> dict[str, Any]:
    """The fallback without atheris: random edits of the seeds and of earlier inputs."""
    rng = random.Random(seed)
    pool = list(SEEDS)
    deadline = time.monotonic() + seconds
    runs = 0
    findings: list[str] = []
    while time.monotonic() < deadline and not findings:
        data = mutate(rng, rng.choice(pool))
        runs += 1
        try:
            target(data)
        except Exception as exc:
            findings.append(f"{type(exc).__name__}: {str(exc)[:200]} (input {data[:80]!r}...)")
        if len(pool) < 1_000 and rng.random() < 0.01:
            pool.append(data)
    return {"engine": "random mutation (atheris unavailable)", "seconds": seconds, "executions": runs,
            "findings": findings}  # fmt: skip


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--libfuzzer":  # the child run_atheris starts
        atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
        atheris.Fuzz()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--random", action="store_true", help="use the fallback, not atheris")
    args = parser.parse_args()
    try:
        if atheris is not None and not args.random:
            result = run_atheris(args.seconds)
        else:
            result = run_random(args.seconds)
    finally:
        WORKSPACE.close()
    print(json.dumps(result, indent=2))
    sys.exit(1 if result["findings"] else 0)


if __name__ == "__main__":
    main()
