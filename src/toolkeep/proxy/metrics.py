"""The proxy's metrics, in the Prometheus text format (``GET /metrics``).

One registry per process (:data:`REGISTRY`): Prometheus scrapes each replica and sums them. Every
series is labelled by ``route`` (the history format a request was prepared as, ``forwarded``
for one passed through as it is) and ``policy``:

- ``toolkeep_proxy_requests_total{route,policy,outcome}``: ``prepared``, ``failed_open``,
  ``forwarded``;
- ``toolkeep_proxy_upstream_responses_total{route,policy,status}``;
- ``toolkeep_proxy_prepare_seconds{route,policy}``: a histogram of the time preparing took;
- ``toolkeep_proxy_tokens_total{route,policy,side}``: the size of the history sent, ``side``
  ``before`` (as the agent sent it) and ``after`` (as the proxy sent it), in chars/4, as
  ``toolkeep replay --tokens chars`` counts a request;
- ``toolkeep_proxy_cache_tokens_total{route,policy,kind}``: of what the proxy sent, the tokens
  ``read`` from the provider's cache (the prefix shared with the conversation's previous request)
  and ``written`` to it (the rest), estimated as the replay estimates them;
- ``toolkeep_proxy_cost_total{route,policy,side}``: the cache-aware cost, in base input tokens,
  ``unmanaged`` (what the agent's own requests would have cost) and ``managed``;
- ``toolkeep_proxy_cost_dollars_total{route,policy,side}``: the same in dollars, where the price
  list names a dollar price;
- ``toolkeep_proxy_repairs_total``, ``toolkeep_proxy_cuts_total``;
- ``toolkeep_proxy_store_errors_total{route,policy}``: archive writes and reads that failed
  while preparing (and the statistics' own writes, route ``stats``);
- ``toolkeep_proxy_fail_open_total{route,policy}``: requests forwarded unchanged because
  preparing them failed (or took too long): :func:`fail_open`;
- ``toolkeep_proxy_conversations_live``: the conversations the proxy holds state for now.

Standard library only: counters are floats under a lock, rendered on demand.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable

__all__ = ["BUCKETS", "REGISTRY", "Registry", "fail_open"]

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds (seconds) of the prepare-time histogram's buckets."""

Labels = tuple[tuple[str, str], ...]

_HELP = {
    "toolkeep_proxy_requests_total": ("counter", "Requests by what the proxy did with them."),
    "toolkeep_proxy_upstream_responses_total": ("counter", "Upstream answers by HTTP status."),
    "toolkeep_proxy_prepare_seconds": ("histogram", "Time spent preparing a request's history."),
    "toolkeep_proxy_tokens_total": (
        "counter",
        "Size of the histories, as sent by the agent (side=before) and by the proxy (side=after); "
        "chars/4, as toolkeep replay --tokens chars counts.",
    ),
    "toolkeep_proxy_cache_tokens_total": (
        "counter",
        "Of what the proxy sent, tokens read from the provider's cache and written to it (chars/4, estimated).",
    ),
    "toolkeep_proxy_cost_total": (
        "counter",
        "Cache-aware cost in base input tokens, without toolkeep (unmanaged) and with it (managed).",
    ),
    "toolkeep_proxy_cost_dollars_total": (
        "counter",
        "Cache-aware cost in dollars at the price list's prices, unmanaged and managed.",
    ),
    "toolkeep_proxy_repairs_total": ("counter", "Pairing repairs made."),
    "toolkeep_proxy_cuts_total": ("counter", "Tool results shortened (moved to a shorter tier)."),
    "toolkeep_proxy_store_errors_total": ("counter", "Store reads and writes that failed."),
    "toolkeep_proxy_fail_open_total": ("counter", "Requests forwarded unchanged because preparing failed."),
    "toolkeep_proxy_conversations_live": ("gauge", "Conversations the proxy holds state for."),
}


class Registry:
    """Counters, histograms and gauges by name and labels (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = {}
        self._histograms: dict[str, dict[Labels, list[float]]] = {}
        self._gauges: dict[str, Callable[[], float]] = {}
        self.policy = "-"
        """The ``policy`` label of series whose caller does not name one (:func:`fail_open`)."""

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Add ``amount`` to the counter ``name`` with ``labels``."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._counters.setdefault(name, {})
            series[key] = series.get(key, 0.0) + amount

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Record ``value`` in the histogram ``name``: its buckets, then its sum and count."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._histograms.setdefault(name, {})
            counts = series.get(key)
            if counts is None:
                counts = series[key] = [0.0] * (len(BUCKETS) + 2)
            for i, bound in enumerate(BUCKETS):
                if value <= bound:
                    counts[i] += 1
            counts[-2] += value
            counts[-1] += 1

    def gauge(self, name: str, read: Callable[[], float]) -> None:
        """Make ``name`` a gauge whose value ``read()`` gives when rendered."""
        with self._lock:
            self._gauges[name] = read

    def value(self, name: str, **labels: str) -> float:
        """The counter's value (0 when never incremented); a histogram's count."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            if name in self._histograms:
                counts = self._histograms[name].get(key)
                return counts[-1] if counts else 0.0
            return self._counters.get(name, {}).get(key, 0.0)

    def render(self) -> str:
        """Every series, in the Prometheus text exposition format (version 0.0.4)."""
        lines: list[str] = []
        with self._lock:
            counters = {n: dict(s) for n, s in self._counters.items()}
            histograms = {n: {k: list(v) for k, v in s.items()} for n, s in self._histograms.items()}
            gauges = dict(self._gauges)
        for name in _HELP:
            kind, text = _HELP[name]
            if name in gauges:
                lines += _header(name, kind, text)
                lines.append(f"{name} {_number(gauges[name]())}")
            elif name in counters:
                lines += _header(name, kind, text)
                for labels, value in sorted(counters[name].items()):
                    lines.append(f"{name}{_labels(labels)} {_number(value)}")
            elif name in histograms:
                lines += _header(name, kind, text)
                for labels, counts in sorted(histograms[name].items()):
                    for bound, count in zip(
                        (*BUCKETS, math.inf), (*counts[: len(BUCKETS)], counts[-1]), strict=True
                    ):
                        le = "+Inf" if bound == math.inf else repr(bound)
                        lines.append(f"{name}_bucket{_labels((*labels, ('le', le)))} {_number(count)}")
                    lines.append(f"{name}_sum{_labels(labels)} {_number(counts[-2])}")
                    lines.append(f"{name}_count{_labels(labels)} {_number(counts[-1])}")
        return "\n".join(lines) + "\n"


def _header(name: str, kind: str, text: str) -> list[str]:
    return [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]


def _labels(labels: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}" if inner else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


REGISTRY = Registry()
"""The process's registry: what ``GET /metrics`` renders."""


def fail_open(route: str, policy: str | None = None) -> None:
    """Count one request of ``route`` forwarded unchanged because preparing it failed or took too
    long (``policy``: the proxy's, by default)."""
    REGISTRY.inc("toolkeep_proxy_fail_open_total", route=route, policy=policy or REGISTRY.policy)


def store_error(route: str, count: int = 1, policy: str | None = None) -> None:
    """Count ``count`` store reads or writes that failed (``route``: what was being done)."""
    REGISTRY.inc(
        "toolkeep_proxy_store_errors_total", float(count), route=route, policy=policy or REGISTRY.policy
    )
