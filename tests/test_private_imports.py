"""A private module (``_name.py``, or a ``_name`` package) is imported only by modules of its own
package: what another package needs of it, its package hands on in ``__init__`` (or the module
is made public).

Every module under ``src/toolkeep`` is parsed (not imported) and each import resolved to the
module it names: ``from ..x._y import a``, ``from toolkeep.x._y import a``, ``import
toolkeep.x._y`` and ``from ..x import _y`` all name ``toolkeep.x._y``. A private name inside a
module (``from ..session import _helper``) is not a module and is not judged here.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "toolkeep"

ALLOWED: dict[tuple[str, str], str] = {
    # (importing file, private module): why it is still there. The list may only shrink: an
    # entry whose import is gone fails the test until it is removed.
}


def _is_module(dotted: list[str], src: Path) -> bool:
    where = src.joinpath(*dotted)
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def _named_modules(node: ast.Import | ast.ImportFrom, package: list[str]) -> list[list[str]]:
    """The dotted names an import statement may name as modules (the ``from`` part, and each
    imported name under it, which may be a submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name.split(".") for alias in node.names]
    base = package[: len(package) - node.level + 1] if node.level else []
    target = base + (node.module.split(".") if node.module else [])
    return [target, *([*target, alias.name] for alias in node.names if alias.name != "*")]


def private_imports(relative: str, source: str, src: Path = SRC) -> list[tuple[int, str]]:
    """``(line, private module)`` for each import in module file ``relative`` (a path under
    ``src``, as ``toolkeep/x/y.py``) of a private module of a package other than its own."""
    parts = relative.removesuffix(".py").split("/")
    package = parts[:-1]  # an __init__.py's package is its folder, as any module's
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for dotted in _named_modules(node, package):
            if not dotted or dotted[0] != "toolkeep":
                continue
            for i, name in enumerate(dotted[1:], start=1):
                if not (name.startswith("_") and not name.startswith("__")):
                    continue
                if _is_module(dotted[: i + 1], src) and dotted[:i] != package:
                    found.append((node.lineno, ".".join(dotted[: i + 1])))
                break
    return sorted(set(found))


def _offenders() -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        for line, module in private_imports(relative, path.read_text(encoding="utf-8")):
            out.setdefault((relative, module), []).append(line)
    return out


def test_no_package_imports_another_packages_private_module() -> None:
    offenders = _offenders()
    new = {key: lines for key, lines in offenders.items() if key not in ALLOWED}
    assert not new, (
        "private modules imported from another package (hand the names on in its __init__):\n"
        + "\n".join(
            f"  src/{path}:{','.join(map(str, lines))} imports {module}"
            for (path, module), lines in sorted(new.items())
        )
    )


def test_the_allow_list_only_names_imports_still_there() -> None:
    stale = sorted(set(ALLOWED) - set(_offenders()))
    assert not stale, "remove these from ALLOWED, their import is gone:\n" + "\n".join(
        f"  src/{path} -> {module}" for path, module in stale
    )


def test_the_check_sees_each_way_of_naming_a_private_module(tmp_path: Path) -> None:
    text = (
        "from ..formats._base import text_chars\n"
        "from toolkeep.formats._sdk import plain_view\n"
        "import toolkeep.steps._context\n"
        "from ..formats import _sdk\n"
        "from ..formats import get_format\n"  # public
        "from ..session import _conversation_key\n"  # a private name, not a module
        "from ._base import Format\n"  # its own package's
    )
    assert private_imports("toolkeep/proxy/x.py", text) == [
        (1, "toolkeep.formats._base"),
        (2, "toolkeep.formats._sdk"),
        (3, "toolkeep.steps._context"),
        (4, "toolkeep.formats._sdk"),
    ]
    assert private_imports("toolkeep/formats/x.py", text) == [(3, "toolkeep.steps._context")]
    # a package's __init__ is of that package; a subpackage's modules are not
    # (in a tree with a private module at the top: toolkeep has none of its own now)
    tree = tmp_path / "src"
    (tree / "toolkeep" / "stores").mkdir(parents=True)
    (tree / "toolkeep" / "_closing.py").write_text("")
    assert private_imports("toolkeep/__init__.py", "from ._closing import Closing\n", tree) == []
    assert private_imports("toolkeep/stores/x.py", "from .._closing import Closing\n", tree) == [
        (1, "toolkeep._closing")
    ]
