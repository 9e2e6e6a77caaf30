"""The library stays readable: small modules, short functions, no import cycles.

The rules and the code that measures them live in ``benchmarks/library_shape.py``
(run it to see the numbers); these tests hold the library to them.
"""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "library_shape.py"
_spec = importlib.util.spec_from_file_location("library_shape", _PATH)
shape = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shape)


def test_no_module_is_over_600_lines():
    sizes = {m: len(p.read_text().splitlines()) for m, p in shape.modules().items()}
    assert len(sizes) > 10  # the library was found
    assert {m: n for m, n in sizes.items() if n > shape.MAX_MODULE_LINES} == {}


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


def test_no_import_cycles():
    assert shape.cycles() == []


def test_the_reading_path_is_at_most_2000_lines():
    # timing, the counting core, the roofline's arithmetic and the ceilings: what a
    # learner opens to see how a number is measured
    lines = sum(len((shape.LIBRARY / f).read_text().splitlines()) for f in shape.READING_PATH)
    assert lines <= 2000, lines
