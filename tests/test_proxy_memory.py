"""The proxy gives back what its preparing threads freed (toolkeep.proxy.memory): glibc keeps a
thread's freed memory in that thread's arena, and only ``malloc_trim`` returns it while a block at
the top is still in use. Run in a subprocess of its own, so its resident size is the test's alone."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, threading
    from toolkeep.proxy.memory import trim

    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    kept = []

    def prepare_like():  # bodies' worth of mid-size buffers, freed but for the last one
        blocks = [bytearray(b"x" * 60_000) for _ in range(3_000)]
        kept.append(blocks[-1])

    thread = threading.Thread(target=prepare_like)
    thread.start()
    thread.join()
    before = rss_mb()
    trimmed = trim()
    print(json.dumps({"before": before, "after": rss_mb(), "trimmed": trimmed}))
    """
)


def _glibc() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return hasattr(ctypes.CDLL(None), "gnu_get_libc_version")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc(), reason="malloc_trim is glibc's: elsewhere trim() does nothing")
def test_trim_returns_what_a_thread_freed_to_the_system() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout)
    assert figures["trimmed"] is True
    # ~180 MB were freed in the thread's arena and stayed resident until the trim
    assert figures["before"] - figures["after"] > 100, figures
