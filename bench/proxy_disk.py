"""What the proxy leaves on disk: N short synthetic conversations prepared by the proxy's
preparer (in process, no HTTP), then the files and bytes (as ``du`` counts them: allocated blocks,
each inode once) of its ``tool-results/`` and ``archive/`` at the end (and the most seen, every 100 conversations).

Each conversation sends ``--turns`` requests, each adding one tool result of 2,000 to 8,000 chars
of its own (long enough to be saved). Run it against another checkout to compare (its
``make_preparer`` may take no caps: then none are given)::

    PYTHONPATH=src python bench/proxy_disk.py --conversations 3000
    PYTHONPATH=src python bench/proxy_disk.py --conversations 3000 --max-disk-bytes 50M
    PYTHONPATH=/path/to/other/checkout/src python bench/proxy_disk.py --conversations 3000
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from toolkeep import Config
from toolkeep.proxy import make_preparer


def du(path: Path) -> tuple[int, int]:
    """Files and allocated bytes under ``tool-results/`` and ``archive/`` (each inode once)."""
    seen: set[tuple[int, int]] = set()
    files = size = 0
    for sub in ("tool-results", "archive"):
        folder = path / sub
        if not folder.is_dir():
            continue
        for entry in os.scandir(folder):
            info = entry.stat(follow_symlinks=False)
            files += 1
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                size += info.st_blocks * 512
    return files, size


def conversation(n: int, turns: int, rng: random.Random) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"task {n}: look at the files"}]
    for t in range(turns):
        text = "".join(
            f"conv {n} file {t} line {i}: {rng.random():.12f} some output\n"
            for i in range(rng.randint(40, 160))
        )
        call = {"type": "tool_use", "id": f"toolu_{n}_{t}", "name": "Read", "input": {"file_path": f"/f{t}"}}
        messages.append({"role": "assistant", "content": [call]})
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": text}]}
        )
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=3000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-disk-bytes", help="the proxy's --max-disk-bytes (e.g. 50M; default: its own)")
    parser.add_argument("--workspace", help="where (default: a temporary directory, removed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(args.workspace or tmp)
        kwargs: dict[str, Any] = {}
        accepts = inspect.signature(make_preparer).parameters
        if args.max_disk_bytes and "max_disk_bytes" in accepts:
            from toolkeep.cli._team import parse_size

            kwargs["max_disk_bytes"] = parse_size(args.max_disk_bytes)
        preparer = make_preparer(Config(), workspace, **kwargs)
        rng = random.Random(7)
        started = time.perf_counter()
        peak = 0
        for n in range(args.conversations):
            if n % 100 == 0:
                peak = max(peak, du(workspace)[1])
            history = conversation(n, args.turns, rng)
            for t in range(1, args.turns + 1):
                body = json.dumps({"model": "m", "messages": history[: 1 + 2 * t]}).encode()
                outcome = preparer.prepare("anthropic", body)
                if outcome.error is not None:
                    raise SystemExit(f"conversation {n}: {outcome.error}")
        seconds = time.perf_counter() - started
        preparer.conversations.close()
        files, size = du(workspace)
        peak = max(peak, size)
        print(
            json.dumps(
                {
                    "conversations": args.conversations,
                    "turns": args.turns,
                    "caps": {k: v for k, v in kwargs.items()} or "none given",
                    "files": files,
                    "bytes": size,
                    "MB": round(size / 1e6, 1),
                    "peak_MB": round(peak / 1e6, 1),
                    "seconds": round(seconds, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
