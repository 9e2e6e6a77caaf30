"""The shape of brrrlib: lines per module, public names, long functions, imports; and two
habits of the tests and chapters (phrase asserts, ``# fmt: skip``).

brrrlib is read by learners who want to see how a number was measured, so its shape is
part of the course (see the package docstring's map). Modules are split by idea, never to
meet a line count; what is held (by tests/test_library_shape.py) is what keeps the
package about measuring and easy to read:

* brrrlib in all at most 10,000 lines, and at most 150 names in the ``__all__`` lists of
  its public modules and packages (those whose path has no leading underscore): the
  package holds what a chapter, README or a learner's own code uses;
* no function over 60 lines (its docstring aside), no import cycle between modules, and
  the top-level modules (``brrrlib/*.py``) never import a folder's package (the
  explorers, the zoo, the exercises... are built on them, never the reverse);
* at most 50 test asserts that compare English text (an ``assert`` whose test holds a
  string literal of two or more words): tests check decisions and numbers, and exact
  wording only where it is the contract (an error naming the bad argument and the fix,
  which ``pytest.raises(match=...)`` checks, not an assert);
* at most 10 ``# fmt: skip`` comments in the library and the chapters: the line length
  is set once, in pyproject.toml.

This prints the numbers behind them:

    python benchmarks/library_shape.py

Lines are ``wc -l`` lines. A function's length runs from its ``def`` to its last line,
less its docstring. Imports are the ``brrrlib`` modules a module imports, at the top or
inside a function. A module is named by its dotted path below ``brrrlib`` (``timing``,
``zoo`` for ``zoo/__init__.py``, ``zoo._tally``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "brrrlib"
MAX_TOTAL_LINES = 10_000
MAX_PUBLIC_NAMES = 150
MAX_FUNCTION_LINES = 60
MAX_PHRASE_ASSERTS = 50
MAX_FMT_SKIPS = 10


def modules() -> dict[str, Path]:
    """``{"timing": path, "zoo": path, "zoo._tally": path, ...}``: every module, both layers."""
    found = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        parts = path.relative_to(LIBRARY).with_suffix("").parts
        if len(parts) > 1 and parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def library() -> dict[str, Path]:
    """The library: the top-level modules, ``brrrlib/*.py``."""
    return {m: p for m, p in modules().items() if p.parent == LIBRARY}


def packages() -> dict[str, dict[str, Path]]:
    """The chapters' packages: ``{"zoo": {"zoo": path, "zoo._tally": path, ...}, ...}``."""
    found: dict[str, dict[str, Path]] = {}
    for m, p in modules().items():
        if p.parent != LIBRARY:
            found.setdefault(m.split(".")[0], {})[m] = p
    return found


def lines(paths) -> int:
    """``wc -l`` over ``paths``."""
    return sum(len(p.read_text().splitlines()) for p in paths)


def function_lengths(path: Path) -> list[tuple[str, int]]:
    """``(qualified name, lines without the docstring)`` of every function in ``path``."""
    tree = ast.parse(path.read_text())
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = child.end_lineno - child.lineno + 1
                doc = child.body[0] if child.body else None
                if isinstance(doc, ast.Expr) and isinstance(
                    getattr(doc, "value", None), ast.Constant
                ):
                    if isinstance(doc.value.value, str):
                        length -= doc.end_lineno - doc.lineno + 1
                out.append((f"{prefix}{child.name}", length))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def imports(path: Path) -> set[str]:
    """The brrrlib modules ``path`` imports (``from brrrlib import x``, ``brrrlib.x.y``)."""
    known = set(modules())
    found: set[str] = set()

    def add(dotted: str) -> None:  # the longest known module a dotted name starts with
        parts = dotted.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        if parts:
            found.add(".".join(parts))

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "brrrlib" or node.module.startswith("brrrlib."):
                base = node.module.removeprefix("brrrlib").removeprefix(".")
                for a in node.names:
                    add(f"{base}.{a.name}" if base else a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("brrrlib."):
                    add(a.name.removeprefix("brrrlib."))
    name = next(m for m, p in modules().items() if p == path)
    return found - {name}


def cycles() -> list[list[str]]:
    """Every import cycle between the library's modules (``__init__`` aside: it loads lazily)."""
    graph = {m: imports(p) - {"__init__"} for m, p in modules().items() if m != "__init__"}
    found: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycle = path[path.index(nxt) :]
                if min(cycle) == cycle[0] and cycle not in found:
                    found.append(cycle)
            elif len(path) < 12:
                walk(nxt, [*path, nxt])

    for start in graph:
        walk(start, [start])
    return found


def upward_imports() -> dict[str, set[str]]:
    """Library modules that import a chapters' package (the front door and ``__main__`` aside).

    Data flows one way: the chapters' packages build on the library, never the
    reverse, so a learner reading the library never has to open a chapter's code.
    """
    found = {}
    for m, p in library().items():
        if m in ("__init__", "__main__"):
            continue
        up = {i for i in imports(p) if i.split(".")[0] in packages()}
        if up:
            found[m] = up
    return found


def public_names() -> dict[str, list[str]]:
    """``{module: its __all__}`` for every public module and package (no ``_`` in its path)."""
    found = {}
    for m, p in modules().items():
        if m == "__init__" or any(part.startswith("_") for part in m.split(".")):
            continue
        for node in ast.parse(p.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                found[m] = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return found


def phrase_asserts(folder: Path = ROOT / "tests") -> list[tuple[str, int]]:
    """``(file, line)`` of each test assert whose test (not its message) holds a string of
    two or more words: an assert on wording."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assert) and any(
                isinstance(c, ast.Constant)
                and isinstance(c.value, str)
                and len(c.value.split()) >= 2
                for c in ast.walk(node.test)
            ):
                found.append((path.name, node.lineno))
    return found


def fmt_skips() -> dict[str, int]:
    """``# fmt: skip`` comments per file, in the library and the chapters."""
    paths = [*LIBRARY.rglob("*.py"), *(ROOT / "course").glob("*.ipynb")]
    counts = {str(p.relative_to(ROOT)): p.read_text().count("# fmt: skip") for p in sorted(paths)}
    return {k: v for k, v in counts.items() if v}


def main() -> int:
    mods = modules()
    print(f"brrrlib: {lines(mods.values())} lines in {len(mods)} modules "
          f"(at most {MAX_TOTAL_LINES:,})")  # fmt: skip
    print(f"  {'module':<34}{'lines':>6}  longest function (lines, docstring aside)")
    for m in sorted(mods, key=lambda m: -len(mods[m].read_text().splitlines())):
        n = len(mods[m].read_text().splitlines())
        fn, longest = max(function_lengths(mods[m]), key=lambda f: f[1], default=("-", 0))
        print(f"  {m:<34}{n:>6}  {fn} ({longest})")
    names = public_names()
    print(f"\npublic names (__all__ of public modules and packages): "
          f"{sum(map(len, names.values()))} (at most {MAX_PUBLIC_NAMES})")  # fmt: skip
    for m, listed in sorted(names.items(), key=lambda kv: -len(kv[1])):
        print(f"  {m:<34}{len(listed):>4}")
    long_fns = [(m, f, n) for m, p in mods.items() for f, n in function_lengths(p)
                if n > MAX_FUNCTION_LINES]  # fmt: skip
    print(f"\nfunctions over {MAX_FUNCTION_LINES} lines: {long_fns or 'none'}")
    print(f"the library importing a folder's package: {upward_imports() or 'none'}")
    print(f"import cycles: {cycles() or 'none'}")
    phrases = phrase_asserts()
    print(f"test asserts on wording: {len(phrases)} (at most {MAX_PHRASE_ASSERTS})")
    skips = fmt_skips()
    print(f"# fmt: skip in the library and the chapters: {sum(skips.values())} "
          f"(at most {MAX_FMT_SKIPS}) {skips or ''}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
