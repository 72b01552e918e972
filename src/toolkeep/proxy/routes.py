"""Which provider a request is for, and which of its requests the proxy prepares: one table.

Each provider names the base URL its requests go to by default, the paths and request headers
that are its own, and the paths (``POST``) whose body holds a history to prepare, with that
history's format (also part of a conversation's key). The body's keys are the request object's
(:mod:`toolkeep.requests`: ``messages``, ``input``, ``contents``). Everything else (Anthropic's
``count_tokens``, OpenAI's ``/v1/responses/compact``, Gemini's ``countTokens``, model lists, ...)
goes to its provider as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

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


def _exact(path: str) -> re.Pattern[str]:
    return re.compile(re.escape(path))


PROVIDERS: tuple[Provider, ...] = (
    Provider(
        "anthropic",
        "https://api.anthropic.com",
        re.compile(r"/v1/messages(?:/|$)"),
        ("anthropic-version", "x-api-key"),
        ((_exact("/v1/messages"), "anthropic"),),
    ),
    Provider(
        "gemini",
        "https://generativelanguage.googleapis.com",
        # every path of the Gemini API is versioned v1beta or v1alpha (uploads under /upload/),
        # but for its v1 models and tuned models, called as ``name:method``
        re.compile(r"(?:/upload)?/v1(?:alpha|beta)\d*/|/v1/(?:models|tunedModels)/[^/]+:"),
        ("x-goog-api-key",),
        (
            (
                re.compile(
                    r"/v1(?:alpha|beta\d*)?/(?:models|tunedModels)/[^/:]+:(?:generateContent|streamGenerateContent)"
                ),
                "gemini",
            ),
        ),
    ),
    Provider(
        "openai",
        "https://api.openai.com",
        None,
        (),
        ((_exact("/v1/chat/completions"), "openai-chat"), (_exact("/v1/responses"), "openai-responses")),
    ),
)
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
