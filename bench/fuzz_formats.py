"""Coverage-guided fuzzing of the format loaders (atheris), for a bounded time.

Each input is bytes, read as the CLI reads a file (UTF-8, JSON), then given to every format's
``detect``/``load``/``validate``/``dump``, to auto-detection, and to the whole pipeline with a
workspace and an in-memory store. Anything but a result or a ``ToolkeepError`` is a finding: atheris
stops and writes the input as ``crash-*`` in the working directory. The seed corpus is the repo's
own bad-input corpus and golden inputs. Without atheris (it needs a compiler to build), the same
target runs on inputs drawn by hypothesis for the same time.

    python bench/fuzz_formats.py [--seconds 120] [--write] [--hypothesis]

``--write`` records runs, executions and findings in bench/results.md, section "Reliability".
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

try:
    import atheris  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - depends on the machine
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["toolkeep"]):
        import toolkeep
        from toolkeep.formats import FORMATS, detect_format
        from toolkeep.pipeline import run_pipeline
else:
    import toolkeep
    from toolkeep.formats import FORMATS, detect_format
    from toolkeep.pipeline import run_pipeline

WORKSPACE = toolkeep.Workspace()
CONFIG = toolkeep.Config(
    max_result_chars=200, default_tool_cap=400, compact_min_chars=50, turn_budget_chars=500
)


def target(data: bytes) -> None:
    """One fuzz input: bytes a user could hand the CLI."""
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return  # the CLI turns each of these into one line, exit 2 (tests/test_bad_input.py)
    messages: Any = document.get("messages") if isinstance(document, dict) else document
    if not isinstance(messages, list):
        return
    for fmt in FORMATS.values():
        fmt.detect(messages)
        try:
            history = fmt.load(messages)
        except toolkeep.ToolkeepError:
            continue
        # a valid history comes back as it went in (an invalid one may be normalized on the way
        # out: Bedrock, for one, makes roles alternate)
        if not fmt.validate(history) and fmt.dump(history) != messages:
            raise AssertionError(f"{fmt.name}: a valid, unchanged history did not dump back to itself")
    try:
        detect_format(messages)
        run_pipeline(messages, config=CONFIG, workspace=WORKSPACE, store=toolkeep.MemoryStore())
    except toolkeep.ToolkeepError:
        pass


def seeds() -> list[Path]:
    files = sorted((REPO / "tests" / "corpus").glob("*.json"))
    files += sorted((REPO / "tests" / "golden").glob("*/*.input.json"))
    return files


def run_atheris(seconds: int, workdir: Path) -> dict[str, Any]:
    """Run libFuzzer through atheris for ``seconds`` in a child process; its statistics."""
    corpus = workdir / "corpus"
    corpus.mkdir()
    for path in seeds():
        shutil.copy(path, corpus / f"{path.parent.name}-{path.name}")
    log = workdir / "fuzz.log"
    libfuzzer = [str(corpus), f"-max_total_time={seconds}", "-max_len=65536", "-rss_limit_mb=4096",
                 f"-artifact_prefix={workdir}/", "-print_final_stats=1"]  # fmt: skip
    with log.open("wb") as sink:
        done = subprocess.run([sys.executable, __file__, "--libfuzzer", *libfuzzer], stderr=sink, stdout=sink)
    text = log.read_text(errors="replace")
    stats = {
        line.split(":")[2].strip(): line.split(":")[3].strip()
        for line in text.splitlines()
        if line.startswith("stat::") and line.count(":") >= 3
    }
    cov = [line for line in text.splitlines() if " cov: " in line]
    return {
        "engine": "atheris (libFuzzer)",
        "seconds": seconds,
        "executions": int(stats.get("number_of_executed_units", "0") or 0),
        "coverage": cov[-1].split(" cov: ")[1].split()[0] if cov else "?",
        "corpus": len(list(corpus.iterdir())),
        "findings": sorted(p.name for p in workdir.glob("crash-*")),
        "exit": done.returncode,
        "log_tail": "\n".join(text.splitlines()[-25:]),
    }


def run_hypothesis(seconds: int) -> dict[str, Any]:
    """The fallback: inputs from the fuzz strategies in tests/strategies.py, for ``seconds``."""
    sys.path.insert(0, str(REPO))
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from tests.strategies import json_values, mutated_histories

    done = {"executions": 0}
    deadline = time.monotonic() + seconds
    values = st.one_of(json_values(40), mutated_histories().map(lambda case: case[1]))

    @settings(max_examples=10**9, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(value=values)
    def run(value: Any) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError
        done["executions"] += 1
        target(json.dumps(value).encode("utf-8", "surrogatepass"))

    findings: list[str] = []
    try:
        run()
    except TimeoutError:
        pass
    except Exception as exc:  # a finding: hypothesis has shrunk it already
        findings.append(f"{type(exc).__name__}: {exc}")
    return {"engine": "hypothesis (atheris unavailable)", "seconds": seconds, **done, "findings": findings}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--libfuzzer":  # the child run_atheris starts
        atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
        atheris.Fuzz()
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--write", action="store_true", help="record the result in bench/results.md")
    parser.add_argument("--hypothesis", action="store_true", help="use the hypothesis fallback")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if atheris is not None and not args.hypothesis:
            result = run_atheris(args.seconds, Path(tmp))
        else:
            result = run_hypothesis(args.seconds)
    WORKSPACE.close()
    print(json.dumps({k: v for k, v in result.items() if k != "log_tail"}, indent=2))
    if result.get("log_tail") and (result["findings"] or result.get("exit")):
        print(result["log_tail"])
    if args.write:
        found = ", ".join(result["findings"]) or "none"
        extra = (
            f", edge coverage {result['coverage']}, corpus {result['corpus']} inputs"
            if "coverage" in result
            else ""
        )
        body = (
            f"Format loaders fuzzed by {result['engine']} for {result['seconds']} s "
            f"(`bench/fuzz_formats.py`): {result['executions']:,} inputs run{extra}; findings: {found}."
        )
        sys.path.insert(0, str(HERE))
        from load import write_subsection

        write_subsection("Fuzzing", body)


if __name__ == "__main__":
    main()
