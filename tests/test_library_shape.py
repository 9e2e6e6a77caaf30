"""The library stays readable: short functions, no import cycles, data flowing one way.

The rules and the code that measures them live in ``benchmarks/library_shape.py``
(run it to see the numbers); these tests hold the library (``brrrlib/*.py``) and
the chapters' packages (``brrrlib/zoo/``, ...) to them.
"""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "library_shape.py"
_spec = importlib.util.spec_from_file_location("library_shape", _PATH)
shape = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shape)


def test_no_function_is_over_60_lines_docstring_aside():
    long = [
        (m, f, n)
        for m, p in shape.modules().items()
        for f, n in shape.function_lengths(p)
        if n > shape.MAX_FUNCTION_LINES
    ]
    assert long == []


def test_the_function_measure_counts_a_long_function(tmp_path):
    # the rule can fail: a 70-line body is found, its docstring is not counted
    body = "\n".join(f"    x{i} = {i}" for i in range(70))
    src = tmp_path / "m.py"
    src.write_text(f'def f():\n    """Doc.\n\n    More.\n    """\n{body}\n')
    assert shape.function_lengths(src) == [("f", 71)]


def test_the_library_stays_small():
    assert shape.lines(shape.modules().values()) <= shape.MAX_TOTAL_LINES


def test_no_docstring_outgrows_its_body():
    assert [(m, *d) for m, p in shape.modules().items() for d in shape.long_docstrings(p)] == []


def test_the_docstring_measure_finds_a_long_one(tmp_path):
    # the rule can fail: a three-line docstring over a one-line body is found; the notes are not
    doc = '    """One.\n\n    Two.\n    """\n'
    src = tmp_path / "m.py"
    src.write_text(f"def f():\n{doc}    return 1\n\n\ndef benchmark():\n{doc}    return 1\n")
    assert shape.long_docstrings(src) == [("f", 4, 1)]


def test_no_import_cycles():
    assert shape.cycles() == []


def test_every_module_is_counted_in_one_layer():
    packaged = {m for mods in shape.packages().values() for m in mods}
    assert set(shape.library()) | packaged == set(shape.modules())
    assert not set(shape.library()) & packaged
    assert {"zoo", "zoo._tally", "distributed._launch", "cli._doctor"} <= packaged


def test_imports_are_resolved_to_package_modules():
    # the layer rule below can fail: a package's own imports are seen, module by module
    assert {"zoo._rows", "zoo._tally", "_fmt"} <= shape.imports(shape.modules()["zoo"])
    assert "distributed._comm_model" in shape.imports(shape.modules()["exercises._distributed"])


def test_the_library_never_imports_a_chapters_package():
    # data flows one way: the chapters build on the library, never the reverse
    assert shape.upward_imports() == {}


def test_public_names_stay_few():
    # the names a chapter, README or a learner's own code uses, and no more
    assert sum(map(len, shape.public_names().values())) <= shape.MAX_PUBLIC_NAMES


def test_tests_assert_decisions_not_wording():
    # verdict fields and numbers; exact phrases only where the wording is the contract
    # (a phrase split into one-word checks counts as a phrase)
    assert len(shape.phrase_asserts()) <= shape.MAX_PHRASE_ASSERTS


def test_the_formatter_sets_the_line_length_once():
    assert sum(shape.fmt_skips().values()) <= shape.MAX_FMT_SKIPS


def test_the_wording_count_can_fail(tmp_path):
    # two words in the test count, and so do two one-word strings looked for with `in` (a
    # phrase split into words); one word, the same word twice, or a message, do not
    (tmp_path / "test_x.py").write_text(
        'def test():\n    assert "too noisy" in s\n    assert "steal" in s\n'
        '    assert x, "a message"\n'
        '    assert "free" in s and "smaller" in s.error\n'
        '    assert "free" in s or "free" in t\n'
        '    assert "fp32" in s and "--port" in s\n'  # names and flags, not words
    )
    assert shape.phrase_asserts(tmp_path) == [("test_x.py", 2), ("test_x.py", 5)]
    assert shape.phrase_asserts(tmp_path, split=False) == [("test_x.py", 2)]


def test_the_private_name_count_can_fail(tmp_path):
    # each way a test reaches a private brrrlib name is found; public names and private
    # attributes of objects that are not brrrlib modules are not
    (tmp_path / "test_x.py").write_text(
        "import brrrlib as bl\n"
        "from brrrlib import diagnosis, timing\n"
        "from brrrlib.diagnosis import _weigh, diagnose\n"
        "from brrrlib.exercises._bank import Context\n"
        "def test(monkeypatch, result):\n"
        "    diagnosis._weigh(1), bl.timing._measure, bl.timing.benchmark, result._x\n"
        '    monkeypatch.setattr(timing, "_clock", None)\n'
        '    monkeypatch.setattr("brrrlib.ceilings._probe", None)\n'
        '    monkeypatch.setattr(result, "_y", None)\n'
    )
    assert shape.private_refs(tmp_path) == [
        ("test_x.py", 3, "_weigh"),
        ("test_x.py", 4, "_bank"),
        ("test_x.py", 6, "_measure"),
        ("test_x.py", 6, "_weigh"),
        ("test_x.py", 7, "_clock"),
        ("test_x.py", 8, "brrrlib.ceilings._probe"),
    ]


def test_tests_reach_few_private_names_each_for_a_stated_reason():
    refs = shape.private_refs()
    assert len(refs) <= shape.MAX_PRIVATE_REFS
    unexplained = sorted({n.split(".")[-1] for _, _, n in refs} - set(shape.PRIVATE_REF_REASONS))
    assert unexplained == []  # each name a test reaches has its reason in library_shape.py


def test_the_library_holds_less_english_each_change():
    english = sum(shape.english_lines(p) for p in shape.modules().values())
    assert english <= shape.MAX_ENGLISH_LINES


def test_the_english_count_can_fail(tmp_path):
    # a literal of two or more words counts on every line it spans, an f-string by its text;
    # a docstring, one word, a field's name or a list of op names do not
    (tmp_path / "m.py").write_text(
        'def f(x):\n    """A docstring of words."""\n    a = "one"\n    b = f"{x} is bad"\n'
        '    c = (\n        "two words "\n        "and more"\n    )\n    d = f"{x}{a} x"\n'
        '    e = "mm bmm _int_mm"\n    g = "mm and _int_mm"\n'
    )
    assert shape.english_lines(tmp_path / "m.py") == 4
