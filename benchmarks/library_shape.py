"""The shape of brrrlib: lines per module, the longest functions, imports between modules.

brrrlib has two layers. Its top-level modules (``brrrlib/*.py``) are *the
library*: how a number is measured, counted, modelled and diagnosed. Its
folders (``brrrlib/zoo/``, ``brrrlib/distributed/``, ...) are the chapters'
packages built on it: explorers, figures, printed sentences, exercises, the
model zoo, chapter 05's collectives, the workshop tools. The library is read
by learners who want to see how a number was measured, so its shape is kept
to a few rules (checked by tests/test_library_shape.py): the library at most
8,000 lines and its reading path at most 2,000; it never imports a chapters'
package; everywhere, no module over 600 lines, no function over 60 lines
(its docstring aside), no import cycle between modules. This prints the
numbers behind them:

    python benchmarks/library_shape.py

Lines are ``wc -l`` lines. A function's length runs from its ``def`` to its
last line, less its docstring. Imports are the ``brrrlib`` modules a module
imports, at the top or inside a function. A module is named by its dotted
path below ``brrrlib`` (``timing``, ``zoo`` for ``zoo/__init__.py``,
``zoo._tally``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "brrrlib"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_LIBRARY_LINES = 8000
MAX_READING_PATH_LINES = 2000
#: What a learner reads to see how a number is measured: timing, the counting core,
#: the roofline's arithmetic, the ceilings.
READING_PATH = ("timing.py", "counting.py", "roofline.py", "ceilings.py")


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
                if isinstance(doc, ast.Expr) and isinstance(getattr(doc, "value", None), ast.Constant):
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
                cycle = path[path.index(nxt):]
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


def main() -> int:
    def row(name: str, path: Path) -> str:
        n = len(path.read_text().splitlines())
        fn, longest = max(function_lengths(path), key=lambda f: f[1], default=("-", 0))
        flag = "  <- over 600" if n > MAX_MODULE_LINES else ""
        return f"  {name:<34}{n:>6}  {fn} ({longest}){flag}"

    lib = library()
    print(f"the library, brrrlib/*.py: {lines(lib.values())} lines in {len(lib)} modules "
          f"(at most {MAX_LIBRARY_LINES})")  # fmt: skip
    print(f"  {'module':<34}{'lines':>6}  longest function (lines, docstring aside)")
    for m in sorted(lib, key=lambda m: -len(lib[m].read_text().splitlines())):
        print(row(m, lib[m]))
    for pkg, mods in sorted(packages().items(), key=lambda kv: -lines(kv[1].values())):
        print(f"\nbrrrlib/{pkg}/: {lines(mods.values())} lines in {len(mods)} modules")
        for m in sorted(mods, key=lambda m: -len(mods[m].read_text().splitlines())):
            print(row(m, mods[m]))
    reading = lines(LIBRARY / f for f in READING_PATH)
    everything = lines(modules().values())
    long_fns = [(m, f, n) for m, p in modules().items() for f, n in function_lengths(p)
                if n > MAX_FUNCTION_LINES]  # fmt: skip
    print(f"\nreading path {' + '.join(READING_PATH)}: {reading} lines "
          f"(at most {MAX_READING_PATH_LINES})")  # fmt: skip
    print(f"both layers: {everything} lines in {len(modules())} modules")
    print(f"the library importing a chapters' package: {upward_imports() or 'none'}")
    print(f"functions over {MAX_FUNCTION_LINES} lines: {long_fns or 'none'}")
    print(f"import cycles: {cycles() or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
