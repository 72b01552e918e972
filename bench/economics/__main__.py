"""``python -m bench.economics [--only ROW,...] [--policy NAME] [--pricing LIST] [--levers] [--no-write]``.

Replays every trajectory in ``../shared/bench-data/anthropic/`` through the reference policies and
toolkeep's, prints the table, and (unless ``--no-write``) replaces the ``## Economics`` section of
``bench/results.md``. ``--levers`` adds one row per economy lever switched off. ``--policy NAME``
runs the toolkeep row of that policy (and unmanaged) only; ``--pricing`` prices every row with a
``toolkeep.pricing`` list (a preset or ``read=R,write=W,ttl=S``), which toolkeep's rows decide
with too (default ``anthropic-5m``, the format's).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from toolkeep.exceptions import ConfigError
from toolkeep.pricing import DEFAULT_PRICING, parse_pricing

from .cost import CostModel
from .data import DATA_DIR, load_trajectories
from .report import write_section
from .run import Row, all_policies, compute_facts, economy_variant, run_policy

LEVERS: dict[str, tuple[str, dict[str, object]]] = {
    "economy (bench run)": ("all levers on", {}),
    "- batching": ("tier moves at every request, not in paying batches", {"batch": False}),
    "- lean summaries": ("with nothing saved to pay a rewrite, no batch at all", {"lean": False}),
    "+ 10 % risk": (
        "a batch may also cost 10 % of the session's unmanaged cost so far, the whole summary",
        {"risk": 0.1, "lean": False},
    ),
    "- command classes": ("no command classes: no failure hold, no superseded reads", {"smart": False}),
    "- read hold": ("file reads summarized at the same age as other results", {"read_factor": 1}),
    "- content previews": ("SPEC head+tail and one-line summary, no names index", {"previews": False}),
    "- input shortening": ("old tool-call inputs kept whole", {"inputs": False}),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; 0 when toolkeep's economy row meets every goal, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m bench.economics", description=__doc__)
    parser.add_argument("--only", help="comma-separated row names to run (unmanaged always runs)")
    parser.add_argument("--levers", action="store_true", help="also measure each economy lever")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/results.md")
    parser.add_argument("--write", action="store_true", help="write bench/results.md (the default)")
    parser.add_argument("--policy", help="run only this toolkeep policy's row (and unmanaged)")
    parser.add_argument("--pricing", default=DEFAULT_PRICING, help="price list (preset or custom list)")
    args = parser.parse_args(argv)
    try:
        pricing = parse_pricing(args.pricing)
    except ConfigError as exc:
        parser.error(str(exc))
    trajectories = load_trajectories()
    if not trajectories:
        print(f"no trajectories under {DATA_DIR}", file=sys.stderr)
        return 2
    model = CostModel(pricing)
    facts = compute_facts(trajectories)
    policies = all_policies(pricing, args.policy)
    wanted = set(args.only.split(",")) | {"unmanaged"} if args.only else set(policies)
    if args.policy:
        wanted = {f"toolkeep-{args.policy}", "unmanaged"} | (
            set(args.only.split(",")) if args.only else set()
        )
    rows: list[Row] = []
    descriptions: dict[str, str] = {}
    for name, (description, make, note) in policies.items():
        if name not in wanted:
            continue
        descriptions[name] = description
        if make is None:
            rows.append(Row(name, note=note))
            print(f"{name}: skipped ({note})", file=sys.stderr)
            continue
        start = time.time()
        rows.append(run_policy(name, make, trajectories, facts, model))
        print(f"{name}: {rows[-1].seconds:.0f}s CPU, {time.time() - start:.0f}s wall", file=sys.stderr)
    lever_rows: list[Row] = []
    if args.levers:
        for name, (description, levers) in LEVERS.items():
            descriptions[name] = description
            variant = economy_variant(pricing, **levers)
            lever_rows.append(run_policy(name, variant, trajectories, facts, model))
            print(f"{name}: {lever_rows[-1].seconds:.0f}s CPU", file=sys.stderr)
    text, met = write_section(
        rows, lever_rows, descriptions, trajectories, facts, write=not args.no_write, pricing=pricing
    )
    print(text)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
