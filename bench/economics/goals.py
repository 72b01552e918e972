"""The cache-aware default against its goals, on the 27 and on the held-out sessions.

``python -m bench.economics.goals [--write] [--no-references]`` replays both sets through
``Config()`` (no arguments: the default policy, deciding with each price list in turn) and through
every reference row, and prints one line per goal with its figure on each set. ``--write`` also
measures the setting that opts back in to shortening results smaller than 3,000 chars
(``Config(compact_min_chars=1_200)``, the default's threshold before small results were kept
whole) and puts both, with the trade-off between them, in the ``## Economics`` section of
``bench/results.md`` ("### Goals of the default"). ``--compact-min-chars N`` measures the default
with another threshold alone, as ``--set NAME=VALUE`` does with an ``Economy`` setting.

The definitions are those of ``bench/economics/README.md``; the median is over the sessions with at
least 50,000 chars of tool output. The goals are issue 15's; none of them was tuned on the
held-out set.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
OPT_IN: Mapping[str, Any] = {"compact_min_chars": 1_200}
"""The setting that opts back in to shortening results of 1,201-3,000 chars (``--write`` measures
it beside the default): what the default did before small results were kept whole."""


@dataclass
class SetResult:
    """One set's figures: the default under each price list, and each reference row."""

    default: dict[str, Summary]
    big_median: dict[str, float]
    references: dict[str, Summary]


def measure(
    trajectories: Sequence[Trajectory],
    references: bool,
    economy: Economy | None = None,
    config: Mapping[str, Any] | None = None,
) -> SetResult:
    """Both sets' figures for ``Config()``, or for its economy policy with ``economy``'s settings,
    or with other ``Config`` values (``config``: ``{"compact_min_chars": 1_200}``)."""
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
        settings = {**(config or {}), **({} if economy is None else {"economy": economy})}
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


def table(
    tuned: SetResult,
    held: SetResult,
    settings: Sequence[str] = (),
    opted: tuple[SetResult, SetResult] | None = None,
    config: Mapping[str, Any] | None = None,
) -> str:
    """The goals on both sets; with ``opted`` (both sets under :data:`OPT_IN`) two more columns
    and the trade-off between keeping small results whole and shortening them."""
    changed = [f"`Economy({', '.join(settings)})`"] if settings else []
    changed += [f"`{k}={v}`" for k, v in (config or {}).items()]
    command = "".join(f" --set {s}" for s in settings)
    command += "".join(f" --{k.replace('_', '-')} {v}" for k, v in (config or {}).items())
    opt = ", ".join(f"`{k}={v}`" for k, v in OPT_IN.items())
    head = "| measure | goal | the 27 | held-out |"
    if opted is not None:
        head += f" the 27, {opt} | held-out, {opt} |"
    lines = [
        f"`Config()` (policy `{Config().policy}`){' with ' + ', '.join(changed) if changed else ''}, "
        "every request through one `Session`, as `bench/economics/README.md` defines them. "
        f"`python -m bench.economics.goals{command or ' --write'}`.",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    results = (tuned, held, *(opted or ()))
    for name, goal, check in CHECKS:
        cells = []
        for result in results:
            text, met = check(result)
            cells.append(f"{text} {'(met)' if met else '(**not met**)'}")
        lines.append(f"| {name} | {goal} | {' | '.join(cells)} |")
        if check is _visible:
            lines += [
                f"| {note} | (no goal) | {' | '.join(_note(r) for r in results)} |" for note, _note in NOTES
            ]
    if opted is not None:
        lines += ["", *tradeoff(tuned, held, *opted)]
    return "\n".join(lines)


def tradeoff(tuned: SetResult, held: SetResult, opt_tuned: SetResult, opt_held: SetResult) -> list[str]:
    """What keeping results of at most 3,000 chars whole costs and keeps, against
    :data:`OPT_IN` (shortening them from 1,200 chars), at ``anthropic-5m`` prices."""
    opt = ", ".join(f"`{k}={v}`" for k, v in OPT_IN.items())
    lines = [
        f"Small results kept whole (the default, `compact_min_chars={Config().compact_min_chars}`) "
        f"against shortening them from {OPT_IN['compact_min_chars']:,} chars ({opt}, the setting "
        "that opts back in), `anthropic-5m`:",
        "",
        "| set | setting | pooled cost | median (>= 50k chars of tool output) | later-used facts visible |",
        "|---|---|---:|---:|---:|",
    ]
    for name, default, opted in (("the 27", tuned, opt_tuned), ("held-out", held, opt_held)):
        for setting, r in ((opt, opted), ("default", default)):
            s = r.default["anthropic-5m"]
            lines.append(
                f"| {name} | {setting} | {s.pooled:.3f} | {r.big_median['anthropic-5m']:.3f} | "
                f"{100 * s.visible:.1f} % |"
            )
    return lines


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
    parser.add_argument(
        "--compact-min-chars",
        type=int,
        metavar="N",
        help="measure the default with Config(compact_min_chars=N) (--write measures 1200 beside it)",
    )
    args = parser.parse_args(argv)
    try:
        economy = economy_with(args.set)
    except ValueError as exc:
        parser.error(str(exc))
    if args.write and (args.set or args.compact_min_chars is not None):
        parser.error("--write records the default's table: no --set or --compact-min-chars with it")
    config = {} if args.compact_min_chars is None else {"compact_min_chars": args.compact_min_chars}
    sets = (load_trajectories(DATA_DIR), heldout_trajectories())
    tuned, held = (measure(t, not args.no_references, economy, config) for t in sets)
    opted = None
    if args.write:
        # the same reference rows: they do not read toolkeep's settings
        opted = (
            dataclasses.replace(measure(sets[0], False, config=OPT_IN), references=tuned.references),
            dataclasses.replace(measure(sets[1], False, config=OPT_IN), references=held.references),
        )
    text = table(tuned, held, args.set, opted, config)
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
