"""The cache-aware default against its goals, on the 27 and on the held-out sessions.

``python -m bench.economics.goals [--write] [--no-references]`` replays both sets through
``Config()`` (no arguments: the default policy, deciding with each price list in turn) and through
every reference row, and prints one line per goal with its figure on each set. ``--write`` puts
the table in the ``## Economics`` section of ``bench/results.md`` ("### Goals of the default").

The definitions are those of ``bench/economics/README.md``; the median is over the sessions with at
least 50,000 chars of tool output. The goals are issue 15's; none of them was tuned on the
held-out set.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolkeep import Config
from toolkeep.config import Economy
from toolkeep.pricing import PRESETS

from .cost import CostModel
from .data import DATA_DIR, Trajectory, load_trajectories
from .heldout import heldout_trajectories, tool_chars
from .report import write_subsection
from .run import REFERENCES, Row, Summary, all_policies, compute_facts, run_policy, summarize, toolkeep_policy

GOALS_HEAD = "### Goals of the default\n"
PRICINGS = ("anthropic-5m", "anthropic-1h", "openai", "bedrock", "gemini", "deepseek")
BIG = 50_000
"""Chars of tool output a session needs for the median's goal."""


@dataclass
class SetResult:
    """One set's figures: the default under each price list, and each reference row."""

    default: dict[str, Summary]
    big_median: dict[str, float]
    references: dict[str, Summary]


def measure(
    trajectories: Sequence[Trajectory], references: bool, economy: Economy | None = None
) -> SetResult:
    """Both sets' figures for ``Config()``, or for its economy policy with ``economy``'s settings."""
    facts = compute_facts(trajectories)
    names = [t.name for t in trajectories]
    big = [t.name for t in trajectories if tool_chars(t) >= BIG]
    policy = Config().policy
    default: dict[str, Summary] = {}
    big_median: dict[str, float] = {}
    base5m: Row | None = None
    for pricing in PRICINGS:
        model = CostModel(pricing=PRESETS[pricing])
        base = run_policy("unmanaged", REFERENCES["unmanaged"][1], trajectories, facts, model)
        settings = {} if economy is None else {"economy": economy}
        row = run_policy(
            policy, toolkeep_policy(policy, pricing=pricing, **settings), trajectories, facts, model
        )
        default[pricing] = summarize(row, base, names)
        big_median[pricing] = summarize(row, base, big).median if big else float("nan")
        if pricing == "anthropic-5m":
            base5m = base
        print(f"default under {pricing}: {row.seconds:.0f}s CPU", file=sys.stderr)
    refs: dict[str, Summary] = {}
    if references:
        assert base5m is not None
        model = CostModel(pricing=PRESETS["anthropic-5m"])
        for name, (_, make, note) in all_policies().items():
            if name == "unmanaged" or name.startswith("toolkeep-"):
                continue
            if make is None:
                print(f"{name}: skipped ({note})", file=sys.stderr)
                continue
            row = run_policy(name, make, trajectories, facts, model)
            refs[name] = summarize(row, base5m, names)
            print(f"{name}: {row.seconds:.0f}s CPU", file=sys.stderr)
    return SetResult(default, big_median, refs)


Check = Callable[[SetResult], tuple[str, bool]]


def _pooled(pricing: str, goal: float) -> Check:
    return lambda r: (f"{r.default[pricing].pooled:.3f}", r.default[pricing].pooled <= goal)


def _median(r: SetResult) -> tuple[str, bool]:
    m = r.big_median["anthropic-5m"]
    return f"{m:.3f}", m <= 0.70


def _worst(r: SetResult) -> tuple[str, bool]:
    worst = max(s.worst for s in r.default.values())
    return f"{worst:.3f}", worst <= 1.0 + 1e-9


def _visible(r: SetResult) -> tuple[str, bool]:
    s = r.default["anthropic-5m"]
    return f"{100 * s.visible:.1f} %", s.visible >= 0.95


def _recoverable(r: SetResult) -> tuple[str, bool]:
    low = min(s.recoverable for s in r.default.values())
    return f"{100 * low:.1f} %", low >= 1.0 - 1e-9


def _references(r: SetResult) -> tuple[str, bool]:
    if not r.references:
        return "not run", False
    s = r.default["anthropic-5m"]
    beaten = [n for n, ref in r.references.items() if s.pooled < ref.pooled and s.visible > ref.visible]
    missed = [
        f"{n} ({ref.pooled:.2f}, {100 * ref.visible:.1f} %)"
        for n, ref in r.references.items()
        if n not in beaten
    ]
    text = f"{len(beaten)} of {len(r.references)}" + (f"; not: {', '.join(missed)}" if missed else "")
    return text, not missed


CHECKS: tuple[tuple[str, str, Check], ...] = (
    ("pooled cost, `anthropic-5m`", "<= 0.40x", _pooled("anthropic-5m", 0.40)),
    ("pooled cost, `anthropic-1h`", "<= 0.50x", _pooled("anthropic-1h", 0.50)),
    ("pooled cost, `openai`", "<= 0.50x", _pooled("openai", 0.50)),
    ("median session (>= 50k chars of tool output), `anthropic-5m`", "<= 0.70x", _median),
    (f"worst session, any of {len(PRICINGS)} price lists", "<= 1.00x", _worst),
    ("later-used facts visible", ">= 95 %", _visible),
    ("recoverable, any price list", "100 %", _recoverable),
    ("reference rows it is cheaper and more visible than", "all", _references),
)


def table(tuned: SetResult, held: SetResult, settings: Sequence[str] = ()) -> str:
    changed = f" with `Economy({', '.join(settings)})`" if settings else ""
    command = "".join(f" --set {s}" for s in settings) or " --write"
    lines = [
        f"`Config()` (policy `{Config().policy}`){changed}, every request through one `Session`, as "
        f"`bench/economics/README.md` defines them. `python -m bench.economics.goals{command}`.",
        "",
        "| measure | goal | the 27 | held-out |",
        "|---|---|---|---|",
    ]
    for name, goal, check in CHECKS:
        cells = []
        for result in (tuned, held):
            text, met = check(result)
            cells.append(f"{text} {'(met)' if met else '(**not met**)'}")
        lines.append(f"| {name} | {goal} | {cells[0]} | {cells[1]} |")
        if check is _visible:
            lines += [f"| {name} | (no goal) | {_note(tuned)} | {_note(held)} |" for name, _note in NOTES]
    return "\n".join(lines)


def _hidden_line_numbers(r: SetResult) -> str:
    s = r.default["anthropic-5m"]
    hidden = round((1 - s.visible) * s.facts)
    return f"{s.hidden_line_numbers:,} of the {hidden:,} not visible"


NOTES: tuple[tuple[str, Callable[[SetResult], str]], ...] = (
    (
        "  of them, numbers their source shows only as a listing's line number",
        _hidden_line_numbers,
    ),
    (
        "  visible in the source or a later result that repeats them",
        lambda r: f"{100 * r.default['anthropic-5m'].anywhere:.1f} %",
    ),
)
"""Lines under the visibility goal that say where the facts not visible went (``facts.py``)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.economics.goals", description=__doc__)
    parser.add_argument("--write", action="store_true", help="record the table in bench/results.md")
    parser.add_argument("--no-references", action="store_true", help="skip the reference rows")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an Economy setting changed from its default (repeatable): lean=false, read_factor=1000",
    )
    args = parser.parse_args(argv)
    try:
        economy = economy_with(args.set)
    except ValueError as exc:
        parser.error(str(exc))
    if args.write and args.set:
        parser.error("--write records the default's table: no --set with it")
    tuned = measure(load_trajectories(DATA_DIR), not args.no_references, economy)
    held = measure(heldout_trajectories(), not args.no_references, economy)
    text = table(tuned, held, args.set)
    print(text)
    if args.write:
        write_subsection(GOALS_HEAD, text)
    return 0


def economy_with(settings: Sequence[str]) -> Economy | None:
    """``Economy()`` with ``NAME=VALUE`` settings, each parsed as its field's type."""
    if not settings:
        return None
    fields = {f.name: f for f in dataclasses.fields(Economy)}
    values: dict[str, object] = {}
    for setting in settings:
        name, _, text = setting.partition("=")
        default = getattr(Economy(), name, None) if name in fields else None
        if name not in fields or not text:
            raise ValueError(f"--set {setting}: not NAME=VALUE with NAME an Economy setting")
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError(f"--set {setting}: true or false")
            values[name] = text.lower() == "true"
        elif isinstance(default, (int, float)) or default is None:
            values[name] = float(text) if "." in text else int(text)
        else:
            raise ValueError(f"--set {setting}: {name} is not a number or a switch")
    return Economy(**values)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
