"""The bad inputs the library is known to handle: each probe, and the message it must get.

A learner's typo, a stressed workshop's odd input, a GPU that is not there:
each row below is one of them, with the exception it must raise (never a raw
error from deep inside torch) and words the message must contain: the
argument's name and what to do. A new bad input that was fixed gets a row, so
the next change keeps it fixed. (Faults that need a set-up of their own, such
as a read-only cache folder or a report file that is a symlink, have tests in
the test file of their module.)
"""

import functools
import math

import numpy as np
import pytest
import torch

import brrrlib as bl
from brrrlib import widgets


def _gen():
    yield torch.ones(1)


_X = torch.ones(4)
_DECODER = bl.decoding.build(
    bl.decoding.DecoderShape("t", layers=1, d_model=8, heads=2, vocab=16, max_context=16)
)
_NO_CUDA = not torch.cuda.is_available()

# (probe, expected exception, words the message must contain)
BAD_INPUTS = {
    "benchmark: not a function": (lambda: bl.benchmark(_X.sum(), _X), TypeError, "fn must be callable"),
    "benchmark: budget_s is text": (lambda: bl.benchmark(torch.neg, _X, budget_s="1"), TypeError, "budget_s"),
    "benchmark: budget_s is 0": (lambda: bl.benchmark(torch.neg, _X, budget_s=0), ValueError, "budget_s"),
    "benchmark: warmup_s is nan": (lambda: bl.benchmark(torch.neg, _X, warmup_s=math.nan), ValueError, "warmup_s"),
    "benchmark: a device typo": (lambda: bl.benchmark(torch.neg, _X, device="cdua"), ValueError, "did you mean 'cuda'"),
    "benchmark: a generator function": (lambda: bl.benchmark(_gen), TypeError, "returned a generator"),
    "benchmark: meta tensors": (lambda: bl.benchmark(torch.neg, torch.ones(3, device="meta")), ValueError, "hold shapes but no data"),
    "benchmark: cuda_graph on a CPU": (lambda: bl.benchmark(torch.neg, _X, cuda_graph=True), ValueError, "cuda_graph=True needs a CUDA device"),
    "compare: not a function": (lambda: bl.compare(3, lambda: None), TypeError, "a must be callable"),
    "compare: a coroutine": (lambda: bl.compare(lambda: None, _coroutine), TypeError, "b returned a coroutine"),
    "sync: an unknown device": (lambda: bl.sync("tpu"), ValueError, "'tpu' is not a device brrr knows"),
    "sync: not a device at all": (lambda: bl.sync(3), TypeError, "device must be"),
    "spec: a typo": (lambda: bl.spec("A1000"), ValueError, "closest"),
    "spec_table: ceilings that are text": (lambda: bl.hardware.spec_table("fake"), TypeError, "bl.measure_ceilings"),
    "measure_ceilings: not a device": (lambda: bl.measure_ceilings(3), TypeError, "device must be"),
    "count: a generator function": (lambda: bl.count(_gen), TypeError, "generator"),
    "diagnose: a result, not a function": (lambda: bl.diagnose(_X + 1, progress=False), TypeError, "fn must be callable"),
    "diagnose: no torch work": (lambda: bl.diagnose(lambda x: 3, _X, progress=False), ValueError, "ran no torch operators"),
    "diagnose: tensors on two devices": (lambda: bl.diagnose(torch.nn.Linear(4, 4).to("meta"), torch.ones(2, 4), progress=False), ValueError, "on one device"),
    "check: ceilings that are text": (lambda: bl.check("00.ridge_a100", 12, ceilings="fake"), TypeError, "bl.measure_ceilings"),
    "check: an unknown question": (lambda: bl.check("00.nope", 1), ValueError, "00.nope"),
    "batch_explorer: input that is a list": (lambda: widgets.batch_explorer(make_input=lambda b: [torch.ones(b, 8)]), TypeError, "make_input"),
    "batch_explorer: input of the wrong width": (lambda: widgets.batch_explorer(make_input=lambda b: torch.ones(b, 7)), ValueError, "make_input must build the input this model takes"),
    "repeat_explorer: repeat not on the slider": (lambda: widgets.repeat_explorer(repeat=7, size=1024), ValueError, "repeat"),
    "profile: runs is 0": (lambda: bl.profile(torch.neg, _X, runs=0), ValueError, "runs"),
    "decode_step: not a decoder": (lambda: bl.decoding.decode_step(torch.nn.Linear(4, 4)), TypeError, "brrrlib.decoding.Decoder"),
    "decode_step: batch is 0": (lambda: bl.decoding.decode_step(_DECODER, batch=0), ValueError, "batch"),
    "decode_step: context past the model's": (lambda: bl.decoding.decode_step(_DECODER, context=999), ValueError, "max_context=16"),
    "decode_explorer: not a decoder": (lambda: widgets.decode_explorer(torch.nn.Linear(4, 4)), TypeError, "decoding.build"),
    "quantize_int8: an fp32 model": (lambda: bl.decoding.quantize_int8(_DECODER), ValueError, "dtype=torch.bfloat16"),
}  # fmt: skip
if _NO_CUDA:
    BAD_INPUTS |= {
        "benchmark: cuda without a GPU": (lambda: bl.benchmark(torch.neg, _X, device="cuda"), ValueError, "device="),
        "measure_ceilings: cuda without a GPU": (lambda: bl.measure_ceilings("cuda"), ValueError, "device="),
    }  # fmt: skip


async def _coroutine():
    return None


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_a_bad_input_gets_a_clear_error(name):
    probe, error, words = BAD_INPUTS[name]
    with pytest.raises(error) as caught:
        probe()
    assert words in str(caught.value), f"{name}: {caught.value}"


# Inputs that look odd but are fine: (probe, what its result must be), never an error.
GOOD_ODD_INPUTS = {
    "a numpy float32 budget": (lambda: bl.benchmark(torch.neg, _X, budget_s=np.float32(0.02)), lambda t: isinstance(t, bl.Timing)),
    "a numpy float64 budget": (lambda: bl.benchmark(torch.neg, _X, budget_s=np.float64(0.02)), lambda t: isinstance(t, bl.Timing)),
    "a device in capitals": (lambda: bl.benchmark(torch.neg, _X, device="CPU", budget_s=0.02), lambda t: str(t.device) == "cpu"),
    "one spec name, not a list": (lambda: bl.hardware.spec_table(names="A100"), lambda table: len(table.rows) == 1),
    "a partial to compare": (lambda: bl.compare(functools.partial(torch.neg, _X), functools.partial(torch.abs, _X), budget_s=0.05), lambda c: isinstance(c, bl.Comparison)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(GOOD_ODD_INPUTS))
def test_an_odd_but_valid_input_works(name):
    probe, expected = GOOD_ODD_INPUTS[name]
    assert expected(probe())


def test_brrr_device_in_capitals_is_understood(monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "CPU")
    assert bl.device() == torch.device("cpu")
