"""The shape of brrrlib: lines per module, the longest functions, imports between modules.

The library is read by learners who want to see how a number was measured,
so its shape is kept to a few rules (checked by tests/test_library_shape.py):
no module over 600 lines, no function over 60 lines (its docstring aside), no
import cycle between modules. This prints the numbers behind them:

    python benchmarks/library_shape.py

Lines are ``wc -l`` lines. A function's length runs from its ``def`` to its
last line, less its docstring. Imports are the ``brrrlib`` modules a module
imports, at the top or inside a function.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "brrrlib"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
#: What a learner reads to see how a number is measured: timing, the counting core,
#: the roofline's arithmetic, the ceilings.
READING_PATH = ("timing.py", "counting.py", "roofline.py", "ceilings.py")


def modules() -> dict[str, Path]:
    """``{"timing": path, ...}`` for every module of the library."""
    return {p.stem: p for p in sorted(LIBRARY.glob("*.py"))}


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
    """The brrrlib modules ``path`` imports (``from brrrlib import x``, ``brrrlib.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "brrrlib":
                found |= {a.name for a in node.names}
            elif node.module.startswith("brrrlib."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("brrrlib.")}
    return found & set(modules()) - {path.stem}


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


def main() -> int:
    rows = []
    for name, path in modules().items():
        lines = len(path.read_text().splitlines())
        longest = max(function_lengths(path), key=lambda f: f[1], default=("-", 0))
        rows.append((name, lines, longest))
    total = sum(r[1] for r in rows)
    print(f"{'module':<24}{'lines':>7}  longest function (lines, docstring aside)")
    for name, lines, (fn, n) in sorted(rows, key=lambda r: -r[1]):
        flag = "  <- over 600" if lines > MAX_MODULE_LINES else ""
        print(f"{name:<24}{lines:>7}  {fn} ({n}){flag}")
    reading = sum(len((LIBRARY / f).read_text().splitlines()) for f in READING_PATH)
    long_fns = [(m, f, n) for m, p in modules().items() for f, n in function_lengths(p)
                if n > MAX_FUNCTION_LINES]  # fmt: skip
    print(f"\n{len(rows)} modules, {total} lines; reading path {' + '.join(READING_PATH)}: "
          f"{reading} lines")  # fmt: skip
    print(f"functions over {MAX_FUNCTION_LINES} lines: {long_fns or 'none'}")
    print(f"import cycles: {cycles() or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
