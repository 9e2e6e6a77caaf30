"""Tests for brrrlib.exercises: right answers pass, wrong ones get the right nudge,
the expected value never leaks into feedback or hints.

Expected values are computed here the same way the course computes them (from
``bl.spec`` and a fake ``Ceilings``), never typed in.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from _fakes import fake_ceilings

from brrrlib import exercises as ex

# A fake machine: round numbers so the hand computation below is easy to read.
FAKE = fake_ceilings(
    device_name="fake",
    matmul_flops_per_s=2.0e11,
    vector_flops_per_s=5.0e10,
    mem_bandwidth_bytes_per_s=2.5e10,
    op_overhead_s=5e-6,
)


def _spec(name):
    from brrrlib.hardware import spec

    try:
        return spec(name)
    except NotImplementedError:
        pytest.skip("bl.spec is still a placeholder")


def _peak(name, dtype):
    return _spec(name).peak_flops_per_s[dtype]


def _bw(name):
    return _spec(name).mem_bandwidth_bytes_per_s


# Each right answer computed independently of the checker's helpers.
def _expected(qid):
    return {
        "00.ridge_a100": lambda: _peak("A100", "fp32") / _bw("A100"),
        "00.ridge_here": lambda: FAKE.matmul_flops_per_s / FAKE.mem_bandwidth_bytes_per_s,
        "00.growth": lambda: (
            (_peak("H100", "fp16") / _peak("V100", "fp16")) / (_bw("H100") / _bw("V100"))
        ),
        "00.regime_tiny": lambda: "overhead",
        "01.matmul_flops": lambda: 2 * 512 * 1024 * 256,
        # the T4's tensor cores take fp16 only
        "01.tensor_core_ratio": lambda: _peak("T4", "fp16") / _peak("T4", "fp32"),
        "01.matmul_time_here": lambda: 2 * 2048**3 / FAKE.matmul_flops_per_s,
        # Linear(8192, 8192) in bf16: intensity ~ B, so B reaches the H100's bf16 ridge point
        "01.critical_batch": lambda: _peak("H100", "bf16") / _bw("H100"),
        # FLOP/s per class = % of FLOPs / % of runtime (the essay's BERT table)
        "01.bert_gap": lambda: (99.80 / 61.0) / (0.17 / 25.5),
        "02.ridge": lambda: _peak("A100", "fp32") / (_bw("A100") / 8),
        "02.fusion_speedup": lambda: 3.0,
        "02.unary_time_here": lambda: 2**24 * 8 / FAKE.mem_bandwidth_bytes_per_s,
        "02.gelu_vs_relu": lambda: _spec("A100") and "same",
        # x and y, 4 bytes each per element, plus 1024 weights and 1024 biases read once
        "02.layernorm_bytes": lambda: (8 * 4096 * 1024 + 8 * 1024) / (4096 * 1024),
    }[qid]()


Q = {q.id: q for q in ex.questions()}
OURS = [q.id for q in ex.questions() if q.chapter in ("00", "01", "02")]
NUMERIC = [qid for qid in OURS if Q[qid].kind == "number"]


# Numbers that are part of the checker's own wording, not values: hint counters,
# question ids, band edges ("1.5x"), powers of ten in unit nudges, device and dtype names.
_BOILERPLATE = re.compile(
    r"\b\d\d\.[a-z_]+|Hint \d+/\d+|level=\d+|\d+(?:\.\d+)?x\b|1e-?\d+|\b(?:fp|bf)\d+\b|\b[AHV]100\b"
)


def _numbers_in(text):
    text = _BOILERPLATE.sub(" ", text)
    return [float(m) for m in re.findall(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", text)]


def _leaks(text, value):
    """True when ``text`` contains a number within 5% of ``value`` (the answer leaked)."""
    return any(abs(n - value) <= 0.05 * abs(value) for n in _numbers_in(text) if value)


def test_each_chapter_has_three_to_five_questions():
    for chapter in ("00", "01", "02"):
        assert 3 <= len(ex.questions(chapter)) <= 5
    assert set(ex.questions(2).ids) == set(ex.questions("02").ids)


@pytest.mark.parametrize("qid", OURS)
def test_right_answer_passes(qid, capsys):
    assert ex.check(qid, _expected(qid), ceilings=FAKE) is True
    assert "Correct" in capsys.readouterr().out


@pytest.mark.parametrize("qid", NUMERIC)
def test_rounded_answer_passes_and_far_answer_fails(qid):
    want = _expected(qid)
    tol = Q[qid].rel_tol
    assert ex.check(qid, want * (1 + tol / 2), ceilings=FAKE) is True
    assert ex.check(qid, want * (1 - tol / 2), ceilings=FAKE) is True
    assert ex.check(qid, want * 5, ceilings=FAKE) is False


@pytest.mark.parametrize("qid", OURS)
def test_wrong_answers_never_print_the_answer(qid, capsys):
    want = _expected(qid)
    q = Q[qid]
    wrongs = (
        [c for c in q.choices if c != want]
        if isinstance(want, str)
        else [want * f for f in (0.5, 0.9 / 1.2, 2.5, 7, 1e3, 1e-9, 1 / want**2)]
    )
    for wrong in wrongs:
        assert ex.check(qid, wrong, ceilings=FAKE) is False
    for level in (1, 2, 3):
        ex.hint(qid, level=level)
    out = capsys.readouterr().out
    assert out.count("bl.hint(") >= len(wrongs)  # a reply to each, pointing to the hints
    if isinstance(want, str):
        # the nudges for wrong options must not name the right one as the answer
        assert f"'{want}'" not in out
    else:
        # Wrong answers printed by the learner themselves are fine; strip nothing,
        # just make sure no number near the right answer appears.
        assert not _leaks(out, want), out


def test_right_answer_shows_the_computed_value(capsys):
    want = _expected("01.matmul_flops")
    ex.check("01.matmul_flops", want)
    assert f"{want:.4g}" in capsys.readouterr().out


def test_none_prompts_without_raising(capsys):
    assert ex.check("02.ridge", None) is False
    out = capsys.readouterr().out  # a reminder naming what to write, in which unit
    assert out.startswith("02.ridge") and Q["02.ridge"].unit in out


# The checker's decision: check() prints the reply, and the slip it names only in words.
def _verdict(qid, answer, ceilings=None):
    """What check() decides for ``answer``, unprinted."""
    return Q[qid].judge(answer, ceilings)


def _slip(qid, answer, ceilings=None):
    """The slip the checker diagnoses in ``answer`` ("" when it is right)."""
    return _verdict(qid, answer, ceilings).slip


def test_units_slip_is_named():
    want = _expected("02.unary_time_here")
    verdict = _verdict("02.unary_time_here", want * 1e3, FAKE)  # answered in ms
    assert verdict.slip == "units" and "1e3" in verdict.reply
    verdict = _verdict("00.ridge_here", _expected("00.ridge_here") / 1e12, FAKE)
    assert verdict.slip == "units" and "tera" in verdict.reply  # answered in TFLOP/byte


def test_common_mistakes_get_their_own_nudge():
    assert _slip("02.ridge", _expected("02.ridge") / 2) == "0.5"  # forgot the write
    assert _slip("01.matmul_flops", _expected("01.matmul_flops") / 2) == "0.5"  # FMA as one
    tensor_core = _peak("A100", "bf16") / _peak("A100", "fp32")
    assert _slip("02.ridge", _expected("02.ridge") * tensor_core) == "bf16_peak"
    # no bank entry: the checker spots a flip
    assert _slip("00.ridge_here", 1 / _expected("00.ridge_here"), FAKE) == "upside_down"
    verdict = _verdict("02.ridge", _expected("02.ridge") / 2)
    assert Q["02.ridge"].nudges["0.5"] in verdict.reply  # the bank's nudge is the reply


def test_the_t4_ratio_is_its_fp16_tensor_cores_not_the_essays_a100():
    assert _spec("T4").fast_precision == "fp16"  # no bf16 or TF32 tensor cores on a T4
    want = _expected("01.tensor_core_ratio")
    assert 7 < want < 9
    a100 = _peak("A100", "bf16") / _peak("A100", "fp32")
    assert ex.check("01.tensor_core_ratio", a100) is False
    assert _slip("01.tensor_core_ratio", a100) == "a100_ratio"


def test_critical_batch_is_the_bf16_ridge_point():
    ridge = _expected("01.critical_batch")
    assert 250 < ridge < 350  # hundreds of rows on an H100
    d = 8192  # the exact crossing of 2BD^2 / (2(2BD + D^2)) with the ridge is a few % higher
    assert ex.check("01.critical_batch", ridge * d / (d - 2 * ridge)) is True
    assert _slip("01.critical_batch", 2 * ridge) == "2"  # fp32 bytes
    assert _slip("01.critical_batch", _peak("H100", "fp32") / _bw("H100")) == "fp32_ridge"


def test_generic_band_says_direction():
    want = _expected("01.tensor_core_ratio")
    for factor, slip, band in ((2.6, "too_high", ["1.5", "3"]), (1 / 20, "too_low", ["10", "100"])):
        verdict = _verdict("01.tensor_core_ratio", want * factor)
        assert verdict.slip == slip and re.findall(r"([\d.]+)x\b", verdict.reply) == band


def test_choice_synonyms_and_case():
    for spelling in ("Overhead-bound", " overhead bound ", "OVERHEAD_BOUND"):
        assert ex.check("00.regime_tiny", spelling) is True, spelling
    assert ex.check("00.regime_tiny", "compute") is False


def test_answer_tracks_the_machine():
    # the same answer is right on one machine and wrong on another twice as fast
    right_here = _expected("01.matmul_time_here")
    faster = SimpleNamespace(**{**vars(FAKE), "matmul_flops_per_s": 2 * FAKE.matmul_flops_per_s})
    assert ex.check("01.matmul_time_here", right_here, ceilings=FAKE) is True
    assert ex.check("01.matmul_time_here", right_here, ceilings=faster) is False


def test_accepts_numpy_and_tensor_scalars():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    want = _expected("01.matmul_flops")
    assert ex.check("01.matmul_flops", np.float64(want)) is True
    assert ex.check("01.matmul_flops", torch.tensor(float(want))) is True


def test_bad_input_errors_name_the_argument(capsys):
    with pytest.raises(ValueError, match="02.ridge"):  # lists valid ids
        ex.check("02.rigde", 1.0)
    with pytest.raises(TypeError, match="question_id"):
        ex.check(2, 1.0)
    with pytest.raises(TypeError, match="ceilings must be what bl.measure_ceilings"):
        ex.check("00.ridge_here", 1.0, ceilings="fake")
    # A learner's answer of the wrong type is not an exception: the reply says what to write.
    words = "a hundred"
    assert ex.check("02.ridge", words) is False and _slip("02.ridge", words) == "not_a_number"
    verdict = _verdict("00.regime_tiny", 3)
    assert not verdict.right and verdict.slip == "not_an_option"
    assert all(repr(c) in verdict.reply for c in Q["00.regime_tiny"].choices)
    with pytest.raises(ValueError, match="level"):
        ex.hint("02.ridge", level=0)
    with pytest.raises(ValueError, match="chapter"):
        ex.questions("99")


def test_choice_outside_options_is_explained():
    verdict = _verdict("00.regime_tiny", "latency")
    assert not verdict.right and verdict.slip == "not_an_option"
    # the answer given, then every option
    assert "latency" in verdict.reply
    assert all(repr(c) in verdict.reply for c in Q["00.regime_tiny"].choices)


def test_question_listing_does_not_carry_answers():
    for q in ex.questions():
        assert not hasattr(q, "answer")
        assert q.hints, q.id
    html = ex.questions("02")._repr_html_()
    assert "02.ridge" in html and html.count("<tr") == 1 + len(ex.questions("02"))


def test_the_bank_is_well_formed():
    """Each id once in questions.json and once among the solvers, each question with hints."""
    folder = Path(ex.__file__).parent
    pairs = json.loads((folder / "questions.json").read_text(), object_pairs_hook=lambda p: p)
    assert len({k for k, _ in pairs}) == len(pairs) == len(Q)
    written = re.findall(
        r'solves\("([\w.]+)"\)', "".join(p.read_text() for p in folder.glob("*.py"))
    )
    assert len(written) == len(set(written)) and set(written) <= set(Q)  # a second never runs
    for q in Q.values():
        q.solve(FAKE)  # a question without a solver raises KeyError
    assert all(q.hints and q.explain for q in Q.values())


def test_every_nudge_is_a_slip_the_checker_diagnoses():
    for q in ex.questions():
        worked = q.solve(FAKE)
        if q.kind == "choice":
            assert worked.value in q.choices, q.id
            assert set(q.choices) >= set(q.nudges) >= set(q.choices) - {worked.value}, q.id
            continue
        assert set(worked.slips) <= set(q.nudges), q.id  # every named slip has its words
        for key in q.nudges:  # a ratio the solver names, or one the key is
            ratio = worked.slips[key] if key in worked.slips else float(key)
            assert _slip(q.id, float(worked.value) * ratio, FAKE) == key, (q.id, key)


# --------------------------------------------------------------------------- extreme answers

ALL = list(ex.questions().ids)
ALL_NUMERIC = [qid for qid in ALL if Q[qid].kind == "number"]
CHOICE = [qid for qid in ALL if Q[qid].kind == "choice"]
HUGE_TEXT = "9" * 1_000_000
OUT_OF_RANGE = [5e-324, 10**400, -(10**400), float("inf"), float("-inf"), 1e-310]


def _extreme_numbers():
    from fractions import Fraction

    np = pytest.importorskip("numpy")
    return [
        *OUT_OF_RANGE, float("nan"), -0.0, 0.0, Fraction(10**400), np.float32("inf"),
        np.float64(5e-324), np.array(1.5), HUGE_TEXT, "1e3", [1.0], object(), True, b"12",
    ]  # fmt: skip


@pytest.mark.parametrize("qid", ALL_NUMERIC)
def test_extreme_numeric_answers_get_a_reply_never_an_exception(qid, capsys):
    """5e-324 once raised 'math domain error' and 10**400 an OverflowError."""
    for answer in _extreme_numbers():
        assert ex.check(qid, answer, ceilings=FAKE) is False, answer
        out = capsys.readouterr().out
        assert out.startswith("Not ") and len(out) < 1000, (answer, out[:200])
    for answer in OUT_OF_RANGE:
        assert _slip(qid, answer, FAKE) == "out_of_range", answer


def test_extreme_answers_to_a_tensor_without_a_value_are_a_reply(capsys):
    torch = pytest.importorskip("torch")
    meta = torch.empty((), device="meta")
    assert ex.check("00.ridge_here", meta, ceilings=FAKE) is False
    out = capsys.readouterr().out
    assert out.startswith("Not ") and _slip("00.ridge_here", meta, FAKE) == "no_value"


@pytest.mark.parametrize("qid", CHOICE)
def test_extreme_choice_answers_get_a_short_reply(qid, capsys):
    for answer in [HUGE_TEXT, " " * 10_000, "\x00", 10**400, 5e-324, float("nan"), ["memory"]]:
        assert ex.check(qid, answer, ceilings=FAKE) is False
        out = capsys.readouterr().out
        assert out.startswith("Not ") and len(out) < 1000, out[:200]


def test_near_extremes_still_get_the_usual_nudges():
    # a huge but finite answer is "too high", in log space, without overflow
    verdict = _verdict("00.ridge_here", 1e299, FAKE)
    assert verdict.slip == "too_high" and "100x" in verdict.reply
    verdict = _verdict("01.matmul_time_here", 1e-299, FAKE)
    assert verdict.slip == "too_low" and "100x" in verdict.reply
    assert _slip("00.ridge_here", -_expected("00.ridge_here"), FAKE) == "sign"


# --------------------------------------------------------------------------- solutions

MACHINE_DEPENDENT = {
    "00.ridge_here", "01.matmul_time_here", "02.unary_time_here", "03.break_even_numel",
    "04.block_lower_bound_us",
}  # fmt: skip


@pytest.mark.parametrize("qid", ALL)
def test_solution_shows_working_and_the_answer_the_checker_accepts(qid, capsys):
    worked = Q[qid].solve(FAKE)
    ex.solution(qid, ceilings=FAKE)
    out = capsys.readouterr().out
    assert qid in out.splitlines()[0] and "answer: " in out
    # the working: the method (the last hint), then each number it uses
    assert f"method: {Q[qid].hints[-1]}" in out and worked.steps
    assert all(f"{i}. {step}" in out for i, step in enumerate(worked.steps, 1))
    answer_line = next(line for line in out.splitlines() if "answer: " in line)
    shown = answer_line.split("answer: ", 1)[1]
    if isinstance(worked.value, str):
        assert shown.startswith(repr(worked.value))
    else:
        typed = float(shown.split()[0])  # what a learner would copy from the solution
        assert ex.check(qid, typed, ceilings=FAKE) is True
    assert ("machine" in answer_line) == (qid in MACHINE_DEPENDENT)


def test_solution_computes_from_the_spec_table(capsys):
    ex.solution("00.ridge_a100")
    out = capsys.readouterr().out
    quoted = re.findall(r"bl.spec\('A100'\)\S*: ([\d.]+) ([TG])", out)  # the peak, the bandwidth
    scale = {"T": 1e12, "G": 1e9}
    assert [float(x) * scale[p] for x, p in quoted] == pytest.approx(
        [_peak("A100", "fp32"), _bw("A100")], rel=0.01
    )
    assert f"{_expected('00.ridge_a100'):.4g} FLOP/byte" in out
    ex.solution("00.ridge_here", ceilings=FAKE)
    out = capsys.readouterr().out
    measured = re.search(r"matmul_flops_per_s: ([\d.]+) GFLOP/s", out)
    assert float(measured[1]) * 1e9 == FAKE.matmul_flops_per_s and "fake" in out


def test_the_last_hint_points_to_the_solution(capsys):
    for qid in ALL:
        ex.hint(qid, level=len(Q[qid].hints))
        assert f"bl.solution('{qid}')" in capsys.readouterr().out


def test_only_a_question_on_this_machine_measures_it(monkeypatch, capsys):
    calls = []

    def fake_measure(*args, **kwargs):
        calls.append(1)
        return FAKE

    monkeypatch.setattr("brrrlib.ceilings.measure_ceilings", fake_measure)
    ex.solution("00.ridge_a100")  # from the spec table: nothing to measure
    assert ex.check("02.ridge", "twelve") is False  # unreadable: nothing is solved
    assert calls == []
    ex.solution("02.unary_time_here")
    assert calls == [1] and "fake" in capsys.readouterr().out  # this machine's, named
    with pytest.raises(TypeError, match="ceilings"):
        ex.solution("02.ridge", ceilings=3)


# --------------------------------------------------------------------------- the chapters ask them

CHAPTERS = {
    "00": "00_the_factory",
    "01": "01_compute",
    "02": "02_memory_bandwidth",
    "03": "03_overhead",
    "04": "04_diagnose",
    "05": "05_beyond_one_device",
    "06": "06_one_model",
}


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_each_exercise_asks_its_question_where_it_is_checked(chapter):
    """The question is in the cell above its check, not only in the bl.questions() table.

    One question per cell (**Exercise `id`.**), or a group the cell checks together
    (**Exercises `a`, `b`, `c`.**, as chapter 04's three mysteries).
    """
    import nbformat

    from brrrlib import exercises

    path = Path(__file__).resolve().parent.parent / "course" / f"{CHAPTERS[chapter]}.ipynb"
    cells = nbformat.read(path, as_version=4).cells
    checked = []
    for above, cell in zip(cells, cells[1:], strict=False):
        qids = re.findall(r'bl\.check\("([\w.]+)"', cell.source) if cell.cell_type == "code" else []
        if not qids:
            continue
        assert above.cell_type == "markdown", qids
        if len(qids) == 1:
            title = f"**Exercise `{qids[0]}`.**"
        else:
            title = "**Exercises " + ", ".join(f"`{q}`" for q in qids[:-1]) + f", `{qids[-1]}`.**"
        assert title in above.source, (title, above.source[:200])
        question = above.source.split(title, 1)[1]
        assert "?" in question and len(question.split()) >= 8, (qids, question)
        assert f'bl.hint("{qids[0]}")' in cell.source and f'bl.solution("{qids[0]}")' in cell.source
        checked += qids
    assert len(checked) >= 3 and sorted(checked) == sorted(exercises.questions(chapter).ids)


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).resolve().parent.parent / "course").glob("0*.ipynb")),
    ids=lambda p: p.stem,
)
def test_each_chapter_states_goals_and_reads_back_three_predictions(path):
    import nbformat

    cells = nbformat.read(path, as_version=4).cells
    assert any("By the end of this chapter you can" in c.source for c in cells)
    guesses = [
        (i, name)
        for i, c in enumerate(cells)
        if c.cell_type == "code"
        for name in re.findall(r"^(predict\w*) = ", c.source, flags=re.MULTILINE)
    ]
    assert len(guesses) >= 3, guesses
    for i, name in guesses:  # read back by a measuring call, in its own cell or a later one
        later = [cells[i].source.split(f"{name} = ", 1)[1]] + [c.source for c in cells[i + 1 :]]
        assert any(re.search(rf"\b{name}\b", s) for s in later), name


def test_every_question_is_worded_in_its_chapter():
    """The chapter is the one place a question is worded; the bank quotes it from there."""
    for q in ex.questions():
        assert q.prompt, f"{q.id} is asked in no chapter (**Exercise `{q.id}`.** ...)"
        assert repr(q).startswith(f"{q.id}: {q.prompt}")


def test_gelu_vs_relu_answer_follows_the_erf_forms_cost_against_the_a100_budget():
    """The worked answer counts gelu's default (erf) form, the one chapter 02 times."""
    worked = Q["02.gelu_vs_relu"].solve(FAKE)
    assert worked.value == "same"
    (gelu,) = [step for step in worked.steps if step.startswith("gelu")]
    flops = float(gelu.rsplit(": ", 1)[1])
    assert 20 <= flops < _expected("02.ridge")  # an erf: tens of FLOPs, under the A100's budget
