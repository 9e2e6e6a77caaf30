"""The shape of brrrlib: lines per module, public names, long functions, imports; and three
habits of the tests and chapters (phrase asserts, private names in tests, ``# fmt: skip``).

brrrlib is read by learners who want to see how a number was measured, so its shape is
part of the course (see the package docstring's map). Modules are split by idea, never to
meet a line count; what is held (by tests/test_library_shape.py) is what keeps the
package about measuring and easy to read:

* brrrlib in all at most 12,000 lines, and at most 150 names in the ``__all__`` lists of
  its public modules and packages (those whose path has no leading underscore): the
  package holds what a chapter, README or a learner's own code uses;
* no docstring longer than its body but the two method notes a learner reads
  (``benchmark``, ``compare``): a docstring says what a name does;
* no function over 60 lines (its docstring aside), no import cycle between modules, and
  the top-level modules (``brrrlib/*.py``) never import a folder's package (the
  explorers, the zoo, the exercises... are built on them, never the reverse);
* at most 50 test asserts that compare English text (an ``assert`` whose test holds a
  string literal of two or more words): tests check decisions and numbers, and exact
  wording only where it is the contract (an error naming the bad argument and the fix,
  which ``pytest.raises(match=...)`` checks, not an assert); the asserts that split a
  phrase into words (two or more one-word literals checked with ``in``) are counted and
  printed beside them, to be held too once they are few;
* the tests' references to private brrrlib names (``from brrrlib.x import _y``, ``mod._y``
  on a brrrlib module, a ``"brrrlib.x._y"`` patch target, ``monkeypatch.setattr(mod, "_y",
  ...)``; a private module in an import's path counts too) are printed, to be made few: a
  test calls the public API, and reaches in only where it could not run otherwise;
* the library's lines that hold English (a string literal of two or more words outside a
  docstring; a list of names such as ``"_softmax log_softmax"`` is data, not English) are
  at most 400: results are data with one table, and a chapter's explanation lives in its
  markdown;
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
import collections
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "brrrlib"
MAX_TOTAL_LINES = 12_000
MAX_PUBLIC_NAMES = 150
MAX_FUNCTION_LINES = 60
#: The functions whose docstring may outgrow their body: how they measure is the lesson.
METHOD_NOTES = frozenset({"benchmark", "compare"})
MAX_PHRASE_ASSERTS = 43
MAX_FMT_SKIPS = 10
#: The most test references to private brrrlib names (a ratchet: lower it as seams go).
MAX_PRIVATE_REFS = 23
#: The most library lines holding English (what a chapter explains lives in its markdown; the
#: library keeps errors that name the fix, labels and the tables' sources).
MAX_ENGLISH_LINES = 400
#: Why a test still reaches each private name it does: no public call gives the same.
PRIVATE_REF_REASONS = {
    "_fmt": "the one number formatter: a test finds a number as a learner reads it",
    "_MEMO": "a fresh process's ceilings cache, without starting a process",
    "_measure": "a fake measurement (the real one takes 10-30 s): the cache is under test",
    "_screen": "the matmul screen's stopping rule on fake timings, load-free",
    "_doctor": "the doctor's checks on a made-up torch, compiler and course folder",
    "_aten_ops": "the FLOP formulas alone, and one made to fail (every op prices today)",
    "_batch_explorer": "the explorer with a fake clock, and its precision rule without CUDA",
    "_precision": "the batch explorer's CUDA precision rule, on a machine without CUDA",
    "_explorer": "skips rasterising each redraw (speed only; the figure is still built)",
    "_render": "skips rasterising each redraw (speed only; the figure is still built)",
    "_png": "skips rasterising each redraw (speed only; the figure is still built)",
    "_steps": "a decode step's cache allocation made to run out of memory",
    "_launch": "a job that runs until stopped, which no public call starts (the fault tests)",
    "_measure_blocks": "the block timer on fake clocks: load-free times",
    "_CLOCKS": "fake clocks: exact, load-free times",
    "_gelu_tanh": "the block's GELU against torch's, op by op",
    "_workshop": "the hub's proxy and share, which only the workshop's own run starts",
}


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


def long_docstrings(path: Path) -> list[tuple[str, int, int]]:
    """``(name, docstring lines, body lines)`` of each function or class in ``path`` whose
    docstring is longer than the rest of its body."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        doc, *body = node.body
        if not (body and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)):
            continue
        doc_lines = doc.end_lineno - doc.lineno + 1
        body_lines = body[-1].end_lineno - body[0].lineno + 1
        if doc_lines > body_lines and node.name not in METHOD_NOTES:
            found.append((node.name, doc_lines, body_lines))
    return found


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


def _words(node: ast.AST) -> int:
    """How many words a string literal holds (0 for anything else)."""
    is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
    return len(node.value.split()) if is_text else 0


def phrase_asserts(folder: Path = ROOT / "tests", *, split: bool = True) -> list[tuple[str, int]]:
    """``(file, line)`` of each test assert whose test (not its message) holds a string of
    two or more words or, with ``split``, checks two or more lowercase words with ``in`` (a
    phrase split into words, ``"free" in s and "smaller" in s``): an assert on wording."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Assert):
                continue
            parts = list(ast.walk(node.test))
            words = {
                c.left.value
                for c in parts
                if isinstance(c, ast.Compare)
                and isinstance(c.ops[0], ast.In)
                and _words(c.left) == 1
                and re.fullmatch(r"[a-z]{3,}", c.left.value)  # a word, not a name or a flag
            }
            if (split and len(words) >= 2) or any(_words(c) >= 2 for c in parts):
                found.append((path.name, node.lineno))
    return found


#: Words a sentence has and a list of names lacks.
_SMALL_WORDS = frozenset(
    "a an the of to and or is are in on for per at by with not no from as".split()
)


def english_lines(path: Path) -> int:
    """Lines of ``path``'s code (docstrings aside) that hold a string literal of two or more
    words, an f-string's text counted without its fields: the library's English. A list of
    names (``"mm bmm _int_mm"``: identifiers, one with an underscore, no "a", "of", "to") is not."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.Constant) and id(node) not in docs | inner:
            text = node.value if isinstance(node.value, str) else ""
        else:
            continue
        words = text.split()
        names = all(w.isidentifier() and w not in _SMALL_WORDS for w in words)
        names = names and any("_" in w for w in words)
        if len(words) >= 2 and not names:
            found.update(range(node.lineno, node.end_lineno + 1))
    return len(found)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_refs(folder: Path = ROOT / "tests") -> list[tuple[str, int, str]]:
    """``(file, line, name)`` of each test reference to a private brrrlib name: an import of
    one (or from a private module), an attribute read on a brrrlib module, a patch target
    (``"brrrlib.x._y"``, or a module and ``"_y"``, as ``monkeypatch.setattr`` takes them)."""
    found = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text())
        modules = _module_names(tree)
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "brrrlib":
                names = [p for p in node.module.split(".") if _is_private(p)]
                names += [a.name for a in node.names if _is_private(a.name)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if any(map(_is_private, a.name.split(".")))]
                names = [n for n in names if n.startswith("brrrlib.")]
            elif isinstance(node, ast.Attribute) and _is_private(node.attr):
                names = [node.attr] if _on_module(node.value, modules) else []
            elif isinstance(node, ast.Call) and node.args:
                names = _patched(node, modules)
            found += [(path.name, node.lineno, name) for name in names]
    return sorted(found)


def _patched(call: ast.Call, modules: set[str]) -> list[str]:
    """The private name a call patches or reads: ``patch("brrrlib.x._y")``, or
    ``monkeypatch.setattr(mod, "_y", ...)`` (and ``getattr``, ``patch.object``...) on a module.
    """
    first = call.args[0]
    if _words(first) == 1 and first.value.split(".")[0] == "brrrlib":
        return [first.value] if any(map(_is_private, first.value.split("."))) else []
    name = getattr(call.func, "attr", getattr(call.func, "id", ""))
    if name in ("setattr", "getattr", "hasattr", "delattr", "object") and len(call.args) >= 2:
        attr = call.args[1]
        if _on_module(first, modules) and _words(attr) == 1 and _is_private(attr.value):
            return [attr.value]
    return []


def _on_module(node: ast.AST, modules: set[str]) -> bool:
    """True when ``node`` is a brrrlib module: a name bound to one, or an attribute of one."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in modules


def _module_names(tree: ast.AST) -> set[str]:
    """The names a test file binds to brrrlib modules (``bl``, ``diagnosis``, ``ex``...)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "brrrlib" or a.name.startswith("brrrlib."):
                    bound.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "brrrlib":
            folder = LIBRARY.joinpath(*node.module.split(".")[1:])
            for a in node.names:
                if (folder / f"{a.name}.py").exists() or (folder / a.name).is_dir():
                    bound.add(a.asname or a.name)
    return bound


def fmt_skips() -> dict[str, int]:
    """``# fmt: skip`` comments per file, in the library and the chapters."""
    paths = [*LIBRARY.rglob("*.py"), *(ROOT / "course").glob("*.ipynb")]
    counts = {str(p.relative_to(ROOT)): p.read_text().count("# fmt: skip") for p in sorted(paths)}
    return {k: v for k, v in counts.items() if v}


def main() -> int:
    mods = modules()
    print(f"brrrlib: {lines(mods.values())} lines in {len(mods)} modules "
          f"(at most {MAX_TOTAL_LINES:,})")  # fmt: skip
    english = {m: english_lines(p) for m, p in mods.items()}
    print(f"  lines holding English: {sum(english.values())} (at most {MAX_ENGLISH_LINES:,})")
    print(f"  {'module':<34}{'lines':>6}{'English':>8}  longest function (lines, docstring aside)")
    for m in sorted(mods, key=lambda m: -len(mods[m].read_text().splitlines())):
        n = len(mods[m].read_text().splitlines())
        fn, longest = max(function_lengths(mods[m]), key=lambda f: f[1], default=("-", 0))
        print(f"  {m:<34}{n:>6}{english[m]:>8}  {fn} ({longest})")
    names = public_names()
    print(f"\npublic names (__all__ of public modules and packages): "
          f"{sum(map(len, names.values()))} (at most {MAX_PUBLIC_NAMES})")  # fmt: skip
    for m, listed in sorted(names.items(), key=lambda kv: -len(kv[1])):
        print(f"  {m:<34}{len(listed):>4}")
    long_fns = [(m, f, n) for m, p in mods.items() for f, n in function_lengths(p)
                if n > MAX_FUNCTION_LINES]  # fmt: skip
    print(f"\nfunctions over {MAX_FUNCTION_LINES} lines: {long_fns or 'none'}")
    docs = [(m, *d) for m, p in mods.items() for d in long_docstrings(p)]
    print(f"docstrings longer than their body: {docs or 'none'}")
    print(f"the library importing a folder's package: {upward_imports() or 'none'}")
    print(f"import cycles: {cycles() or 'none'}")
    phrases, split = len(phrase_asserts(split=False)), len(phrase_asserts())
    print(f"test asserts on wording: {phrases} (at most {MAX_PHRASE_ASSERTS}); "
          f"with those that split a phrase into words: {split}")  # fmt: skip
    refs = collections.Counter(f for f, _, _ in private_refs())
    print(f"test references to private brrrlib names: {refs.total()} (at most "
          f"{MAX_PRIVATE_REFS}) {dict(refs.most_common())}")  # fmt: skip
    skips = fmt_skips()
    print(f"# fmt: skip in the library and the chapters: {sum(skips.values())} "
          f"(at most {MAX_FMT_SKIPS}) {skips or ''}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
