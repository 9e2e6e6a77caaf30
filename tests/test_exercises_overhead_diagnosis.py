"""Tests for the questions on overhead (chapter 03) and diagnosis (chapter 04) in brrrlib.exercises.

Machine-dependent answers are checked against fake ceilings, so the expected
values are exact and the tests never depend on how busy the machine is.
"""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import brrrlib as bl
from brrrlib import exercises, workloads

CH03 = (
    "03.python_vs_h100",
    "03.break_even_numel",
    "03.sync_per_op_us",
    "03.overhead_fraction",
    "03.weight_read_us",
)
CH04 = (
    "04.mystery_a",
    "04.mystery_b",
    "04.mystery_c",
    "04.decode_token_ms",
    "04.block_lower_bound_us",
)

# A made-up machine: 2 µs per op, 12 GB/s, 100 GFLOP/s matmuls.
FAKE = SimpleNamespace(
    op_overhead_s=2e-6,
    mem_bandwidth_bytes_per_s=12e9,
    matmul_flops_per_s=100e9,
    vector_flops_per_s=10e9,
)


def _check(qid, answer, capsys, **kw):
    ok = bl.check(qid, answer, **kw)
    return ok, capsys.readouterr().out


# The checker's decision: check() prints the reply, and the slip it names only in words.
QUESTIONS = {q.id: q for q in exercises.questions()}


def _verdict(qid, answer, ceilings=None):
    """What check() decides for ``answer``, unprinted."""
    return QUESTIONS[qid].judge(answer, ceilings)


def _slip(qid, answer, ceilings=None):
    """The slip the checker diagnoses in ``answer`` ("" when it is right)."""
    return _verdict(qid, answer, ceilings).slip


def test_overhead_and_diagnosis_register_their_questions():
    assert exercises.questions("03").ids == CH03
    assert exercises.questions(4).ids == CH04


@pytest.mark.parametrize("qid", CH03 + CH04)
def test_unanswered_prints_a_reminder(qid, capsys):
    ok, out = _check(qid, None, capsys)
    assert not ok and out.startswith(qid)  # a reminder naming what to write
    (q,) = [q for q in exercises.questions() if q.id == qid]
    assert (q.unit or repr(q.choices[0])) in out


def test_python_vs_h100(capsys):
    h100 = bl.spec("H100").peak_flops_per_s
    right = h100["bf16"] / 32e6
    assert right > 1e6  # millions of FLOPs per Python addition
    assert _check("03.python_vs_h100", right * 1.05, capsys)[0]
    assert _slip("03.python_vs_h100", h100["fp32"] / 32e6) == "fp32_peak"
    a100 = bl.spec("A100").peak_flops_per_s["bf16"] / 32e6
    assert _slip("03.python_vs_h100", a100) == "a100_peak"


def test_break_even_numel_uses_this_machines_ceilings(capsys):
    right = 2e-6 * 12e9 / 12  # overhead x bandwidth / (3 x 4 bytes) = 2000 elements
    assert _check("03.break_even_numel", right, capsys, ceilings=FAKE)[0]
    assert _slip("03.break_even_numel", right * 12, FAKE) == "bytes"
    assert _slip("03.break_even_numel", 2e-6 * 12e9 / 8, FAKE) == "1.5"  # the write forgotten
    assert not _check("03.break_even_numel", right * 5, capsys, ceilings=FAKE)[0]


def test_overhead_fraction(capsys):
    assert _check("03.overhead_fraction", 0.9, capsys)[0]
    assert _slip("03.overhead_fraction", 0.1) == "work_share"


def test_weight_read_us(capsys):
    right = 4096 * 4096 * 4 / bl.spec("A100").mem_bandwidth_bytes_per_s * 1e6
    assert 10 < right < 100  # tens of microseconds on any A100 variant
    assert _check("03.weight_read_us", right, capsys)[0]
    assert _slip("03.weight_read_us", right / 4) == "0.25"  # elements, not bytes
    verdict = _verdict("03.weight_read_us", right / 1e6)  # answered in seconds
    assert verdict.slip == "units" and "1e6" in verdict.reply


@pytest.mark.parametrize(
    ("letter", "regime"), [("a", "memory"), ("b", "overhead"), ("c", "compute")]
)
def test_mysteries_accept_only_their_regime(letter, regime, capsys):
    qid = f"04.mystery_{letter}"
    assert _check(qid, regime, capsys)[0]
    assert _check(qid, regime.upper() + "-bound", capsys)[0]  # synonyms and case are fine
    for wrong in {"compute", "memory", "overhead"} - {regime}:
        # the nudge tests the learner's own claim
        assert _slip(qid, wrong) == wrong and not bl.check(qid, wrong)


def test_mystery_floors_match_the_designed_regime():
    """The designed answer is what the roofline arithmetic says on this CPU."""
    cpu = torch.device("cpu")
    floors = {}
    for letter in "abc":
        fn, args = getattr(workloads, f"mystery_{letter}")(device=cpu)
        counts = bl.count(fn, *args)
        floors[letter] = {
            "compute": counts.flops / FAKE.matmul_flops_per_s,
            "memory": counts.bytes_moved / FAKE.mem_bandwidth_bytes_per_s,
            "overhead": counts.ops * FAKE.op_overhead_s,
        }
    assert max(floors["a"], key=floors["a"].get) == "memory"
    assert max(floors["b"], key=floors["b"].get) == "overhead"
    assert max(floors["c"], key=floors["c"].get) == "compute"


def test_block_lower_bound_is_the_larger_floor(capsys):
    block, args = workloads.transformer_block(batch=16)
    counts = bl.count(block, *args)
    matmul = sum(counts.flops_by_precision("matmul").values())
    # by hand: matmuls at the matmul rate, every other FLOP at the vector rate (FAKE measured
    # no special-function rates), the bytes at the bandwidth
    compute_s = matmul / FAKE.matmul_flops_per_s + (counts.flops - matmul) / FAKE.vector_flops_per_s
    memory_s = counts.bytes_moved / FAKE.mem_bandwidth_bytes_per_s
    overhead_s = counts.work_ops * FAKE.op_overhead_s
    floors_s = (compute_s, memory_s, overhead_s)
    right_us = max(floors_s) * 1e6  # if everything overlapped: the largest floor
    assert _check("04.block_lower_bound_us", right_us, capsys, ceilings=FAKE)[0]
    # the serial model's sum: an upper bound
    assert _slip("04.block_lower_bound_us", sum(floors_s) * 1e6, FAKE) == "sum_of_floors"
    smallest = min(floors_s) * 1e6
    if smallest < 0.5 * right_us:
        assert _slip("04.block_lower_bound_us", smallest, FAKE) == "smallest_floor"


def test_decode_token_is_bandwidth_bound(capsys):
    bw = bl.spec("H100").mem_bandwidth_bytes_per_s
    right_ms = 8e9 * 2 / bw * 1e3
    assert 4 < right_ms < 6  # about 200 tokens per second at best
    assert _check("04.decode_token_ms", right_ms, capsys)[0]
    assert _slip("04.decode_token_ms", 2 * right_ms) == "2"  # fp32's 4 bytes
    compute_ms = 2 * 8e9 / bl.spec("H100").peak("bf16") * 1e3
    assert _slip("04.decode_token_ms", compute_ms) == "compute_floor"


@pytest.mark.parametrize("qid", CH03 + ("04.decode_token_ms",))
def test_hints_never_give_the_number_away(qid, capsys):
    (q,) = [q for q in exercises.questions() if q.id == qid]
    expected = float(q.solve(FAKE).value)
    for level in (1, 2, 3):
        bl.hint(qid, level=level)
    text = capsys.readouterr().out
    # every number written in the hints (not inside a name such as bf16)
    shown = [float(m) for m in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?:e[+-]?\d+)?", text)]
    assert shown  # the regex does find numbers (level numbers, sizes)
    assert not [x for x in shown if abs(x - expected) <= 0.02 * abs(expected)]


# --------------------------------------------------------------------------- the chapters ask them

NOTEBOOKS = {"03": "03_overhead", "04": "04_diagnose"}


def _cells(chapter):
    import nbformat

    path = Path(__file__).resolve().parent.parent / "course" / f"{NOTEBOOKS[chapter]}.ipynb"
    return nbformat.read(path, as_version=4).cells


@pytest.mark.parametrize("chapter", sorted(NOTEBOOKS))
def test_each_exercise_asks_its_question_where_it_is_checked(chapter):
    """The markdown cell above each check names the exercise and asks its question."""
    cells = _cells(chapter)
    checked = []
    for above, cell in zip(cells, cells[1:], strict=False):
        ids = re.findall(r'bl\.check\("([\w.]+)"', cell.source) if cell.cell_type == "code" else []
        if not ids:
            continue
        assert above.cell_type == "markdown", ids
        head = re.search(r"\*\*Exercises? (`[\w.]+`(?:, `[\w.]+`)*)\.\*\*", above.source)
        assert head and re.findall(r"`([\w.]+)`", head.group(1)) == ids, (ids, above.source)
        question = above.source.split(head.group(0), 1)[1]
        assert "?" in question and len(question.split()) >= 8, (ids, question)
        assert f'bl.hint("{ids[0]}")' in cell.source and f'bl.solution("{ids[0]}")' in cell.source
        checked += ids
    assert len(checked) >= 3 and checked == list(exercises.questions(chapter).ids)
