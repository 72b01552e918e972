"""Prompt-cache price lists: what a cached token, a written token and the cache's lifetime cost.

The cache-aware policy decides with the prices it is given, and ``toolkeep replay`` and
``bench/economics`` price requests with them. A price list is a :class:`Pricing`: the price of a
token read from the cache and of one written to it, as multiples of the base input price, how
long the cache lives after its last use, and a base input price in dollars per million tokens
(of one representative model, named in :attr:`Pricing.model`) for the money figures.

Presets, one per provider family (:data:`PRESETS`), as their price pages gave them:

======================  =====  =====  ======  ===========================================
preset                  read   write  TTL     base input price ($/MTok)
======================  =====  =====  ======  ===========================================
``anthropic-5m``        0.1    1.25   300 s   3.00 (Claude Sonnet 4.5)
``anthropic-1h``        0.1    2.0    3600 s  3.00 (Claude Sonnet 4.5)
``bedrock``             0.1    1.25   300 s   3.00 (Claude Sonnet 4.5 on Bedrock)
``openai``              0.25   1.0    300 s   2.00 (GPT-4.1)
``gemini``              0.1    1.0    300 s   1.25 (Gemini 2.5 Pro, prompts up to 200k)
``deepseek``            0.125  1.0    3600 s  0.56 (deepseek-chat, cache miss)
======================  =====  =====  ======  ===========================================

A custom list is written ``read=0.1,write=1.25,ttl=300`` (and optionally ``price=3.0``, the base
input price in $/MTok; without it money figures are in units of the base price per million
tokens)::

    >>> parse_pricing("read=0.1,write=1.25,ttl=300").cache_write
    1.25
    >>> parse_pricing("openai").cache_read
    0.25

A price list whose writes cost the base price (``write=1``) is a provider that caches on its own
and bills no write: what is not read from its cache is uncached input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .exceptions import ConfigError

__all__ = [
    "DEFAULT_PRICING",
    "PRESETS",
    "CacheExpiry",
    "CacheTimes",
    "Pricing",
    "parse_pricing",
    "resolve_pricing",
]


@dataclass(frozen=True, kw_only=True)
class Pricing:
    """One price list (see the module docstring). Multipliers are of the base input price."""

    cache_read: float
    """Price of a token read from the cache."""
    cache_write: float
    """Price of a token written to the cache (1.0: the provider bills no write premium)."""
    ttl_seconds: float
    """How long the cache lives after its last use: a request sent after a longer gap finds
    nothing cached, so rewriting the history then costs nothing extra."""
    input_price: float = 1.0
    """Base input price in dollars per million tokens, of :attr:`model`, for money figures."""
    name: str = "custom"
    model: str = ""
    """The representative model whose base input price :attr:`input_price` is."""
    source: str = ""
    """Where the figures come from."""

    def __post_init__(self) -> None:
        for name in ("cache_read", "cache_write", "ttl_seconds", "input_price"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
                raise ConfigError(f"pricing {name} must be a number, got {value!r}")
            if value < 0 or (math.isinf(value) and name != "ttl_seconds"):
                raise ConfigError(f"pricing {name} must be a finite number not below 0, got {value!r}")
        if self.cache_write <= 0:
            raise ConfigError(f"pricing cache_write must be positive, got {self.cache_write!r}")
        if self.ttl_seconds <= 0:
            raise ConfigError(f"pricing ttl_seconds must be positive, got {self.ttl_seconds!r}")
        if self.cache_read > self.cache_write:
            raise ConfigError(
                f"pricing: a cached read ({self.cache_read}) must not cost more than a write "
                f"({self.cache_write})"
            )

    @property
    def write_premium(self) -> bool:
        """True when tokens not read from the cache are billed as cache writes (above the base
        price); else they are uncached input at the base price."""
        return self.cache_write != 1.0

    def dollars(self, tokens: float, multiplier: float = 1.0) -> float:
        """What ``tokens`` cost at ``multiplier`` times the base input price, in dollars."""
        return tokens * multiplier * self.input_price / 1_000_000

    def describe(self) -> str:
        """One line: the name and the figures."""
        return (
            f"{self.name}: cache reads {self.cache_read:g}x, cache writes {self.cache_write:g}x, "
            f"TTL {self.ttl_seconds:g} s, base input ${self.input_price:g}/MTok"
            + (f" ({self.model})" if self.model else "")
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form reports and the CLI give."""
        return {
            "name": self.name,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "ttl_seconds": self.ttl_seconds,
            "input_price_per_mtok": self.input_price,
            "model": self.model,
        }


_ANTHROPIC = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching (and /pricing)"

# name, read, write, TTL (s), base input $/MTok, representative model, source
_TABLE: tuple[tuple[str, float, float, float, float, str, str], ...] = (
    ("anthropic-5m", 0.1, 1.25, 300, 3.0, "Claude Sonnet 4.5",
     _ANTHROPIC + ": 5-minute cache writes 1.25x, reads 0.1x; the default cache lives 5 minutes "
     "after its last use"),
    ("anthropic-1h", 0.1, 2.0, 3600, 3.0, "Claude Sonnet 4.5",
     _ANTHROPIC + ': 1-hour cache writes (cache_control ttl "1h") 2x, reads 0.1x'),
    ("bedrock", 0.1, 1.25, 300, 3.0, "Claude Sonnet 4.5 on Bedrock",
     "https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html and "
     "https://aws.amazon.com/bedrock/pricing/: Claude on Bedrock caches 5 minutes, priced as "
     "Anthropic's 5-minute cache"),
    ("openai", 0.25, 1.0, 300, 2.0, "GPT-4.1",
     "https://platform.openai.com/docs/guides/prompt-caching and https://openai.com/api/pricing/: "
     "automatic caching with no write charge; cached input $0.50 against $2.00 for GPT-4.1 "
     "(0.5x on GPT-4o, 0.1x on the GPT-5 family); the in-memory cache is cleared after 5 to 10 "
     "minutes of inactivity (the lower end is taken)"),
    ("gemini", 0.1, 1.0, 300, 1.25, "Gemini 2.5 Pro, prompts up to 200k tokens",
     "https://ai.google.dev/gemini-api/docs/caching and https://cloud.google.com/vertex-ai/"
     "generative-ai/docs/context-cache/context-cache-overview: implicit caching on by default for "
     "Gemini 2.5 and newer, 90 % off cached tokens, the cache built at the standard input price; "
     "Google publishes no lifetime for the implicit cache (300 s is assumed, as OpenAI's)"),
    ("deepseek", 0.125, 1.0, 3600, 0.56, "deepseek-chat (DeepSeek-V3.1)",
     "https://api-docs.deepseek.com/quick_start/pricing and https://api-docs.deepseek.com/guides/"
     "kv_cache: input $0.07 per million tokens on a cache hit, $0.56 on a miss (8x), disk caching "
     "on by default with no write charge; unused entries are cleared within hours to days (an "
     "hour is assumed)"),
)  # fmt: skip

PRESETS: Mapping[str, Pricing] = MappingProxyType(
    {
        name: Pricing(
            name=name,
            cache_read=read,
            cache_write=write,
            ttl_seconds=ttl,
            input_price=price,
            model=model,
            source=source,
        )
        for name, read, write, ttl, price, model, source in _TABLE
    }
)
"""The price lists by name."""

DEFAULT_PRICING = "anthropic-5m"
"""The price list of a format that suggests none (and of a run that names no format)."""

_KEYS = {"read": "cache_read", "write": "cache_write", "ttl": "ttl_seconds", "price": "input_price"}


def parse_pricing(text: str, *, variable: str | None = None) -> Pricing:
    """The preset named ``text``, or the custom list it writes (``read=R,write=W,ttl=S`` and
    optionally ``price=P``). Raises :class:`ConfigError` (naming ``variable`` when given) for
    anything else."""
    where = f"{variable}={text!r}" if variable else f"pricing {text!r}"
    if not isinstance(text, str):
        raise ConfigError(
            "pricing must be a preset name or a list such as read=0.1,write=1.25,ttl=300, "
            f"got {type(text).__name__}"
        )
    name = text.strip()
    if name in PRESETS:
        return PRESETS[name]
    if "=" not in name:
        known = ", ".join(PRESETS)
        raise ConfigError(
            f"{where}: unknown price list (presets: {known}; or a custom list such as "
            "read=0.1,write=1.25,ttl=300)",
            variable=variable,
        )
    values: dict[str, float] = {}
    for entry in name.split(","):
        key, sep, value = entry.partition("=")
        key = key.strip().lower()
        if not sep or key not in _KEYS:
            raise ConfigError(
                f"{where}: {entry.strip()!r} is not one of read=, write=, ttl=, price=", variable=variable
            )
        if _KEYS[key] in values:
            raise ConfigError(f"{where}: {key}= is given twice", variable=variable)
        try:
            number = float(value.strip())
        except ValueError:
            raise ConfigError(
                f"{where}: {key}={value.strip()!r} is not a number", variable=variable
            ) from None
        values[_KEYS[key]] = number
    missing = [k for k in ("read", "write", "ttl") if _KEYS[k] not in values]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(k + '=' for k in missing)}", variable=variable)
    try:
        return Pricing(
            name=name,
            source="custom",
            cache_read=values["cache_read"],
            cache_write=values["cache_write"],
            ttl_seconds=values["ttl_seconds"],
            input_price=values.get("input_price", 1.0),
        )
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}", variable=variable) from None


def resolve_pricing(value: str | Pricing | None, fmt: Any = None) -> Pricing:
    """The price list to use: ``value`` (a :class:`Pricing`, a preset name or a custom list),
    else the one ``fmt`` (a :class:`~toolkeep.formats.Format`) suggests in its rules, else
    :data:`DEFAULT_PRICING`."""
    if isinstance(value, Pricing):
        return value
    if value is not None:
        return parse_pricing(value)
    suggested = getattr(getattr(fmt, "rules", None), "pricing", None)
    return (
        PRESETS.get(suggested, PRESETS[DEFAULT_PRICING])
        if isinstance(suggested, str)
        else PRESETS[DEFAULT_PRICING]
    )


@dataclass(frozen=True)
class CacheTimes:
    """What the cache-aware policy knows of when a conversation's earlier requests were sent:
    the session clock's reading at the last one (``None``: there was none) and the numbers of
    those that found the provider's cache expired (see :class:`CacheExpiry`).

    A session keeps this per conversation itself. A caller that keeps it elsewhere (the proxy
    does, so that replicas agree) reads it with ``Session.cache_times`` and passes it, with the
    time, to ``Session.prepare(..., now=..., cache=...)``.
    """

    last: float | None = None
    expired: frozenset[int] = frozenset()


@dataclass(eq=False)
class CacheExpiry:
    """Which requests of a conversation found the provider's cache expired: sent more than the
    price list's TTL after the request before them, with nothing cached, so that rewriting the
    history cost nothing extra there and every tier move that was due was made.

    A session keeps one per conversation and sets :attr:`now` before each request from its clock
    (see :class:`toolkeep.Session`); the cost model reads it through ``StepContext.expiry`` and
    records the request being prepared in :attr:`requests`, numbered by the assistant messages
    before it, so the requests after it are decided as they were. The decisions are a function
    of the history and this record: a one-off run given the same record gives the same bytes.
    """

    requests: set[int] = field(default_factory=set)
    """The numbers of the requests sent after the cache had expired."""
    now: bool = False
    """Whether the request being prepared is sent after the cache expired."""

    def expired(self, request: int) -> bool:
        """Whether request number ``request`` (an earlier one) found the cache expired."""
        return request in self.requests

    def current(self, request: int) -> bool:
        """Whether the request being prepared, number ``request``, finds the cache expired; an
        expired one is recorded (a retry of it at the same number is decided the same way)."""
        if self.now:
            self.requests.add(request)
        return request in self.requests

    def copy(self) -> CacheExpiry:
        return CacheExpiry(set(self.requests), self.now)
