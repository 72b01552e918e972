"""Which provider a request is for, and which of its requests the proxy prepares: one table.

Each provider names the base URL its requests go to by default, the paths and request headers
that are its own, and the paths (``POST``) whose body holds a history to prepare, with that
history's format (also part of a conversation's key). The table is read from the formats: each
declares its provider's API and its route (:attr:`toolkeep.formats.Format.request`), and the
body's keys are the request object's (:mod:`toolkeep.requests`: ``messages``, ``input``,
``contents``). Everything else (Anthropic's ``count_tokens``, OpenAI's
``/v1/responses/compact``, Gemini's ``countTokens``, model lists, ...) goes to its provider as it
is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..formats import FORMATS, ProviderAPI

__all__ = ["DEFAULT_UPSTREAMS", "PROVIDERS", "Provider", "prepared_route", "provider_for"]


@dataclass(frozen=True)
class Provider:
    """One provider's share of the proxy's routes."""

    name: str
    upstream: str
    """The base URL its requests go to unless ``toolkeep proxy`` is told another."""
    paths: re.Pattern[str] | None
    """Matches the paths that are its own (a match from the start); ``None``: the default
    provider, which claims no path of its own."""
    headers: tuple[str, ...]
    """Request headers (lower case) only its clients send."""
    prepared: tuple[tuple[re.Pattern[str], str], ...]
    """The paths whose POST bodies are prepared (a whole match), each with its history's format."""


def _providers() -> tuple[Provider, ...]:
    """A provider for each API the formats' routes name, with those routes, in the formats'
    order; the default provider (the API that claims no path) last."""
    routes: dict[str, tuple[ProviderAPI, list[tuple[re.Pattern[str], str]]]] = {}
    for fmt in FORMATS.values():
        shape = fmt.request
        if shape is None or shape.api is None or shape.route is None:
            continue
        api, prepared = routes.setdefault(shape.api.name, (shape.api, []))
        if api != shape.api:
            raise AssertionError(f"two formats describe the {api.name} API apart")  # a bug of ours
        prepared.append((shape.route, fmt.name))
    providers = [Provider(a.name, a.upstream, a.paths, a.headers, tuple(p)) for a, p in routes.values()]
    return tuple(sorted(providers, key=lambda p: p.paths is None))


PROVIDERS: tuple[Provider, ...] = _providers()
"""Every provider; a request none claims by path or header goes to the last (OpenAI's API, and
the OpenAI-compatible servers, have the widest range of paths)."""

DEFAULT_UPSTREAMS: Mapping[str, str] = {p.name: p.upstream for p in PROVIDERS}
"""Each provider's default base URL, by its name."""


def provider_for(path: str, headers: Mapping[str, str]) -> Provider:
    """The provider of a request: the first whose paths hold ``path``, else the first whose own
    header it carries (Claude Code's ``GET /v1/models`` is Anthropic's), else OpenAI's."""
    for provider in PROVIDERS:
        if provider.paths is not None and provider.paths.match(path):
            return provider
    for provider in PROVIDERS:
        if any(name in headers for name in provider.headers):
            return provider
    return PROVIDERS[-1]


def prepared_route(method: str, path: str) -> str | None:
    """The format of the history a ``method`` request to ``path`` holds when the proxy prepares
    it, else ``None`` (forwarded as it is)."""
    if method != "POST":
        return None
    for provider in PROVIDERS:
        for pattern, route in provider.prepared:
            if pattern.fullmatch(path):
                return route
    return None
