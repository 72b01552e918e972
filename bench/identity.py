"""One digest per policy of every request a Session prepares on the real trajectories.

Replays each trajectory of ``../shared/bench-data/anthropic`` request by request (the history
before each assistant message, then the whole history) through one ``Session`` per policy, on a
workspace at a fixed path (paths appear in previews), and prints a SHA-256 over the JSON of every
request it returned. Run it on two commits to show that a change leaves the output of a policy
byte-identical at every request:

    python bench/identity.py [--policy NAME ...] [--only SUBSTRING] [--per-session] [--workspace DIR]

Both runs must use the same ``--workspace`` (it is in the bytes), and no other run may use it at
the same time: the digest is refused when a save failed (another run removed the directory).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

import toolkeep

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "bench-data" / "anthropic"
WORKSPACE = Path("/tmp/toolkeep-identity-workspace")


def digest(path: Path, policy: str, workspace: Path = WORKSPACE) -> str:
    history = json.loads(path.read_text())
    history = history["messages"] if isinstance(history, dict) else history
    ends = [i for i, m in enumerate(history) if m.get("role") == "assistant" and i > 0]
    ends.append(len(history))
    shutil.rmtree(workspace, ignore_errors=True)
    h = hashlib.sha256()
    config = toolkeep.Config(policy=policy)
    with toolkeep.Session(config, workspace=workspace) as session:
        for end in ends:
            out, report = session.prepare(history[:end], "anthropic")
            if report.save_errors:
                sys.exit(
                    f"{path.name}: a save failed ({report.save_errors[0]}): is another run using {workspace}?"
                )
            h.update(json.dumps(out, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    shutil.rmtree(workspace, ignore_errors=True)
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", action="append", help="policy name (repeatable; default: all)")
    parser.add_argument("--only", help="only trajectories whose file name contains this")
    parser.add_argument("--per-session", action="store_true", help="a digest per trajectory too")
    parser.add_argument(
        "--workspace", type=Path, default=WORKSPACE, help=f"session workspace (default {WORKSPACE})"
    )
    args = parser.parse_args()
    files = sorted(DATA.glob("*.json"))
    if args.only:
        files = [f for f in files if args.only in f.name]
    if not files:
        sys.exit(f"no trajectories under {DATA}: this benchmark needs ../shared/bench-data")
    from toolkeep.pipeline import POLICIES

    for policy in args.policy or sorted(POLICIES):
        total = hashlib.sha256()
        for f in files:
            d = digest(f, policy, args.workspace)
            total.update(d.encode())
            if args.per_session:
                print(f"{policy}\t{d[:16]}\t{f.name}")
        print(f"{policy}\t{total.hexdigest()}\t{len(files)} trajectories")


if __name__ == "__main__":
    main()
