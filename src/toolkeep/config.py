"""Configuration: one keyword-only object, read from the environment in one place.

Explicit values win; what is not given comes from the environment (``TOOLKEEP_*``, with ChatCLI's
``CHATCLI_*`` names accepted as fallbacks, where ChatCLI has the setting, so its users can switch),
then from the defaults::

    >>> Config(max_result_chars=10_000).max_result_chars
    10000
    >>> Config.from_env({"TOOLKEEP_TOOL_RESULT_MAX_CHARS": "5000"}).max_result_chars
    5000
    >>> Config().policy, Config(policy="default").policy, Config(policy="spec").policy
    ('economy', 'economy', 'spec')

This module is the one place the library reads its settings from the environment. The front
doors (``Session``, ``run_pipeline``, ``ToolLoop`` and the integrations) take ``trust_env``, as
httpx's clients do: given no config, they run :meth:`Config.resolve`, which reads the
environment only when ``trust_env`` is true (the default)::

    >>> Config.resolve(None, trust_env=False) == Config()
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from .exceptions import ConfigError
from .pricing import Pricing, parse_pricing

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_POLICY_ALIAS",
    "DEFAULT_PRESERVE_TOOLS",
    "DEFAULT_TOOL_CAPS",
    "ENV_VARIABLES",
    "MIN_TOOL_CAP",
    "Config",
    "Economy",
    "ToolCap",
]

DEFAULT_POLICY = "economy"
"""The policy ``Config()`` runs: the cache-aware one."""

DEFAULT_POLICY_ALIAS = "default"
"""A policy name that stands for :data:`DEFAULT_POLICY` (``Config(policy="default").policy`` is
``"economy"``), so a setting written before the default changed still picks it."""

MIN_TOOL_CAP = 100
"""The smallest cap: room for the ``[TRUNCATED N chars omitted, M kept]`` line and the archive
marker of any result, with some of its head and tail."""


def _check_chars(what: str, value: object, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        kind = "a whole number" if least <= 0 else f"a whole number of at least {least}"
        raise ConfigError(f"{what} must be {kind}, got {value!r}")


@dataclass(frozen=True)
class ToolCap:
    """One tool's settings: its cap and, optionally, the shape of its cut and its per-result limit.

    ``cap`` is the most chars the tool's result keeps, the ``[TRUNCATED ...]`` line, the way back
    and any note included: a longer result keeps a head and a tail that fill the rest. ``head``
    and ``tail`` (``None``: the config's ``cap_head_chars``/``cap_tail_chars``) are the most of
    each kept; where they are ``None`` too, head and tail fill the cap, the head five sixths of
    it. ``max_result_chars`` (``None``: the config's) is the per-result limit for this tool's
    results in ``prepare``: over it, a result becomes the budget's preview.

        >>> ToolCap(1_000).cap, ToolCap(80_000, max_result_chars=80_000).max_result_chars
        (1000, 80000)
    """

    cap: int
    head: int | None = None
    tail: int | None = None
    max_result_chars: int | None = None

    def __post_init__(self) -> None:
        _check_chars("a tool cap", self.cap, MIN_TOOL_CAP)
        for name in ("head", "tail"):
            if getattr(self, name) is not None:
                _check_chars(f"a tool cap's {name}", getattr(self, name), 0)
        if self.max_result_chars is not None:
            _check_chars("a tool cap's max_result_chars", self.max_result_chars, 1)

    @classmethod
    def of(cls, value: int | ToolCap, what: str = "a tool cap") -> ToolCap:
        """``value`` as a :class:`ToolCap` (a plain ``int`` is the cap alone)."""
        if isinstance(value, ToolCap):
            return value
        if not isinstance(value, int) or isinstance(value, bool) or value < MIN_TOOL_CAP:
            raise ConfigError(
                f"{what} must be a ToolCap or a whole number of at least {MIN_TOOL_CAP}, got {value!r}"
            )
        return cls(value)


DEFAULT_TOOL_CAPS: Mapping[str, ToolCap] = MappingProxyType(
    {"read": ToolCap(80_000), "search": ToolCap(60_000), "tree": ToolCap(50_000)}
)
"""Per-tool settings by tool name (compared case-insensitively); other tools get
``default_tool_cap``. They leave the per-result limit (``max_result_chars``, 20,000) to the
config, as SPEC 4 has it, so in ``prepare`` a result over 20,000 becomes the budget's preview
whatever its cap: these caps bind what enters a history (``Session.cap_result``, ``ToolLoop``),
and what the model sees only with ``ToolCap(80_000, max_result_chars=80_000)`` or a larger
``max_result_chars``."""

DEFAULT_PRESERVE_TOOLS: frozenset[str] = frozenset(
    {
        # writers: their result is the only record of what changed
        "write", "write_file", "create", "create_file", "edit", "edit_file", "multiedit",
        "str_replace", "str_replace_editor", "str_replace_based_edit_tool", "patch",
        "apply_patch", "notebookedit",
        # executors: their output carries the error the model must act on
        "bash", "shell", "sh", "exec", "execute", "execute_bash", "execute_command", "run",
        "run_command", "run_shell_command", "terminal", "python", "ipython",
    }
)  # fmt: skip
"""Tool names (lower case) whose results the age-based compaction of ``policy="spec"`` never
shortens; the default policy, ``economy``, tells shell commands apart instead (see
:class:`Economy`), and ``seed`` preserves nothing."""

# field name -> (primary variable, ChatCLI fallback); a setting ChatCLI never had has no fallback
ENV_VARIABLES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "max_result_chars": ("TOOLKEEP_TOOL_RESULT_MAX_CHARS", "CHATCLI_TOOL_RESULT_MAX_CHARS"),
        "turn_budget_chars": (
            "TOOLKEEP_TOOL_RESULT_BUDGET_CHARS",
            "CHATCLI_TOOL_RESULT_BUDGET_CHARS",
        ),
        "truncate_turns": (
            "TOOLKEEP_MICROCOMPACT_TRUNCATE_TURNS",
            "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS",
        ),
        "summarize_turns": (
            "TOOLKEEP_MICROCOMPACT_SUMMARIZE_TURNS",
            "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS",
        ),
        "keep_tmpdir": ("TOOLKEEP_KEEP_TMPDIR", "CHATCLI_AGENT_KEEP_TMPDIR"),
        "keep_orphans": ("TOOLKEEP_KEEP_ORPHANS",),
        "pricing": ("TOOLKEEP_PRICING",),
        "max_request_tokens": ("TOOLKEEP_MAX_REQUEST_TOKENS",),
        "policy": ("TOOLKEEP_POLICY",),
        "compact_min_chars": ("TOOLKEEP_COMPACT_MIN_CHARS",),
    }
)
_BOOLEANS = frozenset({"keep_tmpdir", "keep_orphans"})
_TEXTS = frozenset({"policy"})

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True, kw_only=True)
class Economy:
    """The cost model, tiers and levers of the economy policy. Sizes in chars, savings in tokens.
    The prices it decides with are the config's :attr:`Config.pricing`.

    The levers can be switched off one by one (``batch``, ``lean``, ``smart``, ``previews``,
    ``inputs``) to measure what each is worth; ``bench/economics`` does.
    """

    chars_per_token: float = 4.0
    batch: bool = True
    """Move tiers only in batches that pay for their rewrite (else at every request)."""
    clear_at_least: int = 1_000
    """Tokens a batch of tier moves must free to be applied (as Anthropic's ``clear_at_least``)."""
    min_horizon: int = 6
    """Requests a batch is assumed to serve at least (also how long batches stall before the
    ``lean_tail`` fallback)..."""
    horizon_share: float = 1.0
    """...else this share of the requests made so far: a session of unknown length that has
    made ``k`` requests is expected to make about ``k`` more. It only ranks batches by what they
    are likely to save; what a batch may lose if the session ends early is bounded by ``risk``."""
    risk: float = 0.0
    """A batch may cost the request that makes it no more than what the policy has saved so far
    plus this share of what the session has cost unmanaged. At 0 no session costs more than
    unmanaged, whichever request it ends after; above 0, one that ends right after a batch may
    cost up to ``1 + risk`` times unmanaged."""
    lean: bool = True
    """When what has been saved cannot pay for a batch with the summaries, make it with lean
    ones: the summary and names index cut to what lets a result's move, alone in its message,
    cost nothing (its message written at 1.25x where it was read at 0.1x: about 8 % of it),
    once batches have stalled like that for ``lean_after`` requests in a row (and from then
    on in the session, without waiting again)..."""
    lean_after: int = 6
    """...(0: at once, the earlier rule). A result moved to its lean summary keeps almost no
    names, and never gets them back: most sessions soon save enough (results cut as they enter,
    old inputs) to pay for whole summaries, while one that never does (every result under the
    per-result limit, as Codex sends them) still gets its first batch. Lean at once kept 95.8 %
    of the later-used facts of the 27 real trajectories visible, against 97.5 % after the wait,
    for 0.382x pooled against 0.384x."""
    lean_tail: bool = True
    """When even lean summaries cannot make a batch cost nothing, because of what the rewrite
    passes (a younger result held whole, the calls between), the moves and the results it passes
    that the agent has seen go together to the richest form that costs nothing, their summaries
    or else one-line stubs: a session whose every result is held a turn longer (a Codex run of
    ``cat`` s) is otherwise never shortened, as no first batch is ever free."""
    min_chars: int | None = None
    """Results no longer than this (in chars, of the original) are never shortened by the
    policy's compaction; ``None``: the config's :attr:`Config.compact_min_chars` (3,000), the
    one threshold of every policy. Only a request budget (``max_request_tokens``), as a last
    resort, shortens them. It was 1,200 until small results were promised to stay whole."""
    trim_age: int = 1
    summary_age: int = 1
    """Ages (in requests; 0 is the request a result first appears in) at which a result is due
    for its trimmed and summary forms. At age 1 the agent has seen it whole once, and the rewrite
    it causes is shortest: only the messages after it, one turn. So by default a result goes
    straight to its summary (with the names index) at age 1, and the trimmed tier serves only
    configurations with ``trim_age < summary_age``."""
    smart: bool = True
    """Classify shell commands, keep failures longer, shorten superseded reads first."""
    failure_factor: int = 3
    """Failures and errors move to each tier this many times later."""
    read_factor: int = 2
    """Reads of files (whose contents the agent goes on to edit or rewrite) move to each tier
    this many times later; output of executions and searches is usually consulted once."""
    previews: bool = True
    """Content-aware forms with a names index (else a plain head+tail and the one-line summary)."""
    trim_chars: int = 2_000
    summary_chars: int = 600
    index_share: float = 1.0
    """The names index of a shortened result (the names its original shows that nothing before
    it in the conversation did) takes at most this share of the original..."""
    index_max: int = 30_000
    """...and at most this many chars (the default tool cap: more than most results hold). A
    form that comes out no shorter than the one before it is not used: the move does not
    happen, and the batches' cost model weighs each form by its size."""
    inputs: bool = True
    """Also shorten the long strings of old tool-call inputs (file contents sent by write and
    edit calls), in formats whose rules say ``editable_arguments`` (every registered one)."""
    input_age: int = 2
    """Age (in requests) at which an old call's long input strings are due to be shortened: as a
    read of a file is due for its summary (``summary_age`` times ``read_factor``). It was 6 until
    results of at most :attr:`Config.compact_min_chars` stayed whole; at 2 the default recovers
    part of what keeping them whole costs (``bench/results.md``, "Goals of the default")."""
    input_min_chars: int = 800
    input_head: int = 300
    head_chars: int = 2_000
    tail_chars: int = 500
    entry_chars: int | None = None
    """A lower per-result limit than the config's ``max_result_chars``: longer results enter as
    the budget's persisted preview (with the names index), so they are never written whole."""


@dataclass(frozen=True, kw_only=True)
class Config:
    """Every number and switch of the pipeline. All sizes are in chars (``str`` code points)."""

    # SPEC 3: per-tool caps
    default_tool_cap: int = 30_000
    """The cap of tools ``tool_caps`` does not name: the most chars a result keeps, its marker
    included (at least :data:`MIN_TOOL_CAP`)."""
    tool_caps: Mapping[str, int | ToolCap] = field(default_factory=lambda: DEFAULT_TOOL_CAPS)
    """Per-tool caps by name: a plain ``int`` (the cap) or a :class:`ToolCap`; read back as
    ``ToolCap`` s."""
    cap_head_chars: int | None = None
    cap_tail_chars: int | None = None
    """The most head and tail a capped result keeps; ``None``: they fill the cap (the head five
    sixths of what the marker leaves). Either way the cut is never longer than the cap."""
    # SPEC 4: budget
    max_result_chars: int = 20_000
    turn_budget_chars: int = 200_000
    preview_head_chars: int = 4_000
    preview_tail_chars: int = 1_000
    # SPEC 6: microcompaction, by age (policies spec and seed; economy decides by cost, `economy`)
    truncate_turns: int = 2
    summarize_turns: int = 4
    compact_min_chars: int = 3_000
    """Results no longer than this (in chars, of the original) keep their text under every
    policy's compaction (``economy``'s batches, ``spec``'s and ``seed``'s ages): "small results
    are always preserved". Only a request budget (``max_request_tokens``), as a last resort,
    shortens them. Lower it to let compaction shorten smaller results too (``economy`` can
    override it with ``Economy(min_chars=...)``)."""
    compact_head_chars: int = 2_000
    compact_tail_chars: int = 500
    preserve_tools: frozenset[str] = DEFAULT_PRESERVE_TOOLS
    preserve_errors: bool = True
    # SPEC 2: pairing repair
    keep_orphans: bool = False
    """Leave results that answer no call of the assistant message before them where they are,
    in every format, instead of removing them as orphans: for a history known to be partial
    (trimmed at the front, or continuing calls the history does not hold). Everything else
    pairing does is unchanged: every call still gets one result, a second result for a call the
    history holds still goes, and a result inside an assistant message still goes."""
    # SPEC 5: workspace
    keep_tmpdir: bool = False
    # the request budget (toolkeep.window)
    max_request_tokens: int | None = None
    """Most tokens a prepared request may take: its messages as sent, plus the tool definitions
    and the system prompt when they are passed. ``None``: no bound. Counted offline (o200k with
    the ``tokens`` extra, else chars/4; :mod:`toolkeep.tokens`)."""
    # which step list to run: see toolkeep.policies.POLICIES
    policy: str = "economy"
    """The named policy to run (:data:`toolkeep.policies.POLICIES`): ``economy`` (the default,
    cache-aware), ``spec`` (by age, from the original) or ``seed`` (by age, on the text as it stands). ``"default"`` is
    accepted for the default and read back as the name it stands for (``economy``), so
    ``Report.policy`` always names the policy that ran."""
    economy: Economy = field(default_factory=lambda: Economy())
    """The cost model, tiers and levers of ``policy="economy"``."""
    pricing: Pricing | str | None = None
    """The prompt-cache price list the cost model decides with (:mod:`toolkeep.pricing`): a
    preset name (``anthropic-5m``, ``anthropic-1h``, ``bedrock``, ``openai``, ``gemini``,
    ``deepseek``), a custom list (``read=0.1,write=1.25,ttl=300``) or a :class:`Pricing`;
    kept as the :class:`Pricing` it names. ``None``: the one the history's format suggests."""
    # SPEC 7: archive and recall
    store_url: str | None = field(default=None, repr=False)
    """Where originals are archived (``toolkeep.stores.open_store``); ``None``: the workspace."""
    store_max_bytes: int | None = None
    store_ttl_seconds: float | None = None
    recall_protect_turns: int = 4
    """A result of a ``recall_tools`` tool is not compacted until it is this many turns old (by
    ``economy`` and ``spec``; ``seed`` knows no recall)."""
    recall_page_chars: int = 16_000
    """Most chars one recall answer holds (also kept under ``max_result_chars`` and the cap)."""
    recall_tools: frozenset[str] = frozenset({"recall", "read_result"})
    caller_store_url: str | None = field(default=None, repr=False)
    """Where a session keeps the originals of what it shortens into the caller's own history
    (``Session.cap_result``, ``ToolLoop``) when its own store does not outlive it (the default:
    an archive in a private workspace removed on close). ``None``: the per-user archive
    (:func:`toolkeep.userdirs.user_store_url`); ``""``: nowhere else (they go with the session)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or isinstance(value, bool)):
                raise ConfigError(f"{f.name} must be an integer, got {value!r}")
            if f.type == "int" and value < 0:
                raise ConfigError(f"{f.name} must not be negative, got {value}")
        if not isinstance(self.policy, str):
            raise ConfigError(f"policy must be a policy name, got {self.policy!r}")
        if self.policy == DEFAULT_POLICY_ALIAS:
            object.__setattr__(self, "policy", DEFAULT_POLICY)
        if not isinstance(self.economy, Economy):
            raise ConfigError(f"economy must be an Economy, got {type(self.economy).__name__}")
        if self.pricing is not None and not isinstance(self.pricing, Pricing):
            object.__setattr__(self, "pricing", parse_pricing(self.pricing))
        if self.summarize_turns < self.truncate_turns:
            raise ConfigError(
                f"summarize_turns ({self.summarize_turns}) must not be smaller than "
                f"truncate_turns ({self.truncate_turns})"
            )
        _check_chars("default_tool_cap", self.default_tool_cap, MIN_TOOL_CAP)
        for name in ("cap_head_chars", "cap_tail_chars"):
            if getattr(self, name) is not None:
                _check_chars(name, getattr(self, name), 0)
        if not isinstance(self.tool_caps, Mapping):
            raise ConfigError(f"tool_caps must be a mapping of tool names, got {self.tool_caps!r}")
        caps = {
            str(name).lower(): ToolCap.of(cap, f"tool_caps[{name!r}]") for name, cap in self.tool_caps.items()
        }
        object.__setattr__(self, "tool_caps", MappingProxyType(caps))
        object.__setattr__(self, "preserve_tools", frozenset(str(n).lower() for n in self.preserve_tools))
        object.__setattr__(self, "recall_tools", frozenset(str(n).lower() for n in self.recall_tools))
        limit = self.max_request_tokens
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise ConfigError(f"max_request_tokens must be a positive integer or None, got {limit!r}")
        if self.recall_page_chars < 1:
            raise ConfigError(f"recall_page_chars must be positive, got {self.recall_page_chars}")

    def cap_for(self, tool_name: str | None) -> int:
        """The per-tool cap that applies to a tool's results."""
        return self.tool_cap(tool_name).cap

    def tool_cap(self, tool_name: str | None) -> ToolCap:
        """Every setting of a tool, resolved: its cap, head, tail and per-result limit.

        >>> Config(tool_caps={"grep": 1_000}).tool_cap("Grep")
        ToolCap(cap=1000, head=None, tail=None, max_result_chars=20000)
        """
        own = self.tool_caps.get((tool_name or "").lower()) if tool_name is not None else None
        if own is None:
            own = ToolCap(self.default_tool_cap)
        assert isinstance(own, ToolCap)  # normalised in __post_init__
        return ToolCap(
            own.cap,
            own.head if own.head is not None else self.cap_head_chars,
            own.tail if own.tail is not None else self.cap_tail_chars,
            own.max_result_chars if own.max_result_chars is not None else self.max_result_chars,
        )

    def replace(self, **changes: Any) -> Config:
        """A copy with some values changed (validated again)."""
        return replace(self, **changes)

    @classmethod
    def resolve(cls, config: Config | None, *, trust_env: bool = True) -> Config:
        """The config a front door runs with: ``config`` when given (the environment is not
        read then), else :meth:`from_env` when ``trust_env`` is true, else the defaults.

            >>> Config.resolve(Config(max_result_chars=5_000), trust_env=True).max_result_chars
            5000
        """
        if config is not None:
            if not isinstance(config, Config):
                raise ConfigError(f"config must be a toolkeep.Config, got {type(config).__name__}")
            return config
        return cls.from_env() if trust_env else cls()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        """Build a config from ``overrides``, then the environment, then the defaults.

        Raises :class:`ConfigError` naming the variable when one holds an invalid value.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for name, variables in ENV_VARIABLES.items():
            if name in overrides:
                continue
            for variable in variables:
                if variable in env:
                    values[name] = _parse_env(name, variable, env[variable])
                    sources[name] = variable
                    break
        values.update(overrides)
        _check_ages(values, sources)
        return cls(**values)


def _check_ages(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """Refuse a summarize age below the truncate age, naming the variables that set them.

    ``Config`` checks this too, but by field name; a user who set only an environment variable
    must be told which one (SPEC 9).
    """
    named = [sources[n] for n in ("truncate_turns", "summarize_turns") if n in sources]
    if not named:
        return
    truncate = values.get("truncate_turns", Config.truncate_turns)
    summarize = values.get("summarize_turns", Config.summarize_turns)
    if isinstance(truncate, int) and isinstance(summarize, int) and summarize < truncate:
        raise ConfigError(
            f"{' and '.join(named)}: the summarize age ({summarize}) must not be smaller than "
            f"the truncate age ({truncate})",
            variable=named[-1],
        )


def _parse_env(name: str, variable: str, text: str) -> Any:
    """The value of the setting ``name`` written as ``text`` in ``variable`` (an environment
    variable, or the command-line flag that stands for it); :class:`ConfigError` if invalid."""
    if name == "pricing":
        return parse_pricing(text, variable=variable)
    if name in _TEXTS:
        return text.strip()
    if name in _BOOLEANS:
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(f"{variable}={text!r} is not a boolean (use true or false)", variable=variable)
    try:
        number = int(text.strip().replace("_", ""))
    except ValueError:
        raise ConfigError(f"{variable}={text!r} is not a whole number", variable=variable) from None
    if number < 0:
        raise ConfigError(f"{variable}={text!r} must not be negative", variable=variable)
    if number == 0 and name == "max_request_tokens":
        raise ConfigError(f"{variable}={text!r} must be positive", variable=variable)
    return number
