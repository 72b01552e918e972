"""Pictures of ``toolkeep inspect`` on a real session, for the docs.

Writes the inspector's page of a real session (default: a SWE-agent run from the shared bench
data) and takes, in headless Chromium (Debian ``chromium``), two PNGs under docs/images/:

- ``inspector-session.png``: the session's figures, its timeline of requests and cost;
- ``inspector-result.png``: a shortened result opened, what the model saw beside the original.

    python scripts/screenshot_inspector.py [SESSION_LOG] [--out docs/images] [--width 1280 --height 900]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from toolkeep.inspector.chromium import Chromium

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("TOOLKEEP_SHARED", HERE.parent.parent / "shared"))
DEFAULT = (
    SHARED
    / "bench-data"
    / "raw"
    / "swe-agent"
    / "msb-java__doubao-pro-128k__fasterxml__jackson-dataformat-xml-531.traj"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", nargs="?", default=str(DEFAULT), help="a session log (any format replay reads)")
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "images"))
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page_file = Path(tmp) / "report.html"
        log = Path(tmp) / Path(args.log).name  # the page names the log as given: here, by its own name
        shutil.copyfile(args.log, log)
        subprocess.run(
            [sys.executable, "-m", "toolkeep", "inspect", log.name, "-o", str(page_file), "--quiet"],
            check=True,
            cwd=tmp,
            env={**os.environ, "XDG_CACHE_HOME": tmp},
        )
        with Chromium(args.width, args.height) as browser:
            page = browser.open(page_file.as_uri())
            page.evaluate("document.querySelector('#s-0').scrollIntoView()")
            (out / "inspector-session.png").write_bytes(page.screenshot())
            # a result the policy summarized, else the first shortened one
            page.evaluate(
                "(() => { const all = [...document.querySelectorAll('#s-0 button[data-open]')];"
                " (all.find(b => b.dataset.moves.includes('summarized')) || all[0]).id = 'shot'; })()"
            )
            page.click("#shot")
            page.wait_for("!!document.querySelector('tr.panel pre.original')")
            page.evaluate(
                "window.scrollTo(0, document.querySelector('#shot').getBoundingClientRect().top + window.scrollY - 40)"
            )
            (out / "inspector-result.png").write_bytes(page.screenshot())
            if page.errors:
                raise SystemExit(f"the page logged errors: {page.errors}")
    for name in ("inspector-session.png", "inspector-result.png"):
        print(out / name)


if __name__ == "__main__":
    main()
