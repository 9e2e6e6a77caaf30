"""Tests for brrrlib.decoding (chapter 06): counts against hand arithmetic, generation against
plain PyTorch, weight-only int8, the memory check, the decode explorer and the chapter's exercises.

Nothing here asserts a time. The counts are checked against numbers worked out by hand below
and against ``bl.count``; decoding with the KV cache against recomputing the whole sequence,
and against the model zoo's GPT (benchmarks/zoo_more, a second implementation) given the
same weights.
"""

from __future__ import annotations

import pytest
import torch
from _fakes import fake_ceilings
from zoo_more.gpt import GPT, GPTConfig

import brrrlib as bl
from brrrlib import decoding, machine, widgets
from brrrlib import exercises as ex
from brrrlib.timing import Timing

# A shape small enough to work out by hand: L = 2, C = 64, V = 1000, 128 positions.
SHAPE = decoding.DecoderShape("tiny", layers=2, d_model=64, heads=4, vocab=1000, max_context=128)
# Per block 12*64^2 + 13*64 = 49,984; tokens 64,000; positions 8,192; final norm 128.
PARAMS = 64_000 + 8_192 + 2 * 49_984 + 128
# Matmul weights: 2 blocks x 12*64^2 = 98,304, the head 1000*64 = 64,000.
MATMULS = 98_304 + 64_000


@pytest.fixture(scope="module")
def model():
    return decoding.build(SHAPE)


# --------------------------------------------------------------------------- counting


def test_parameters_by_hand_and_in_the_model(model):
    assert decoding.parameters(SHAPE) == PARAMS == sum(p.numel() for p in model.parameters())


def test_weight_bytes_per_precision():
    read = PARAMS - 8_192  # every parameter but the position table
    assert decoding.weight_bytes(SHAPE, "fp32") == 4 * read == 656_384
    assert decoding.weight_bytes(SHAPE, "bf16") == 2 * read
    # int8: the matmuls in 1 byte; biases (2 x 9 x 64), norms (2 x 4 x 64 + 2 x 64) and one
    # scale per output row (2 x 9 x 64 + 1000) in 2 bytes
    assert decoding.weight_bytes(SHAPE, "int8") == MATMULS + 2 * (1_152 + 640 + 2_152) == 170_192
    with pytest.raises(ValueError, match="precision"):
        decoding.weight_bytes(SHAPE, "int4")


def test_the_recorded_h100_model_is_the_one_the_recording_counted():
    # chapter 06's recorded H100 run printed 1279.9 M parameters and 5,203.5 MB read per step
    rec = decoding.H100_RECORDED
    assert round(decoding.parameters(rec["shape"]) / 1e5) == 12799
    step_bytes = decoding.weight_bytes(rec["shape"]) + decoding.kv_cache_bytes(rec["shape"], 1, 256)
    assert round(step_bytes / 1e5) == 52035
    assert rec["decode, compiled"] < rec["decode, eager"]


def test_int8_weight_bytes_are_what_the_quantized_model_holds():
    q = decoding.quantize_int8(decoding.build(SHAPE, dtype=torch.bfloat16))
    tables = {"wte.weight", "wpe.weight", "slots"}  # looked up one row per token, or positions
    held = [*q.named_parameters(), *q.named_buffers()]
    assert sum(t.nbytes for name, t in held if name not in tables) == decoding.weight_bytes(
        SHAPE, "int8"
    )


def test_decode_flops_by_hand_and_by_bl_count(model):
    # B = 2 sequences, S = 16 positions: 2 x (2 x 162,304 + 4 x 2 x 16 x 64)
    assert decoding.decode_flops(SHAPE, batch=2, context=16) == 2 * (2 * MATMULS + 8_192) == 665_600
    step = decoding.decode_step(model, batch=2, context=16)
    counted = bl.count(step.fn, step.ids, step.pos, step.cache).by_category()["matmul"]["flops"]
    assert counted == 665_600


def test_prefill_flops_by_hand_and_by_bl_count(model):
    T = 16  # 2 x (2 x 2 x 768 ... ): blocks' matmuls on T tokens, causal attention, head once
    expected = 2 * 2 * 12 * 64**2 * T + 2 * 2 * 64 * T * (T + 1) + 2 * 1000 * 64
    assert decoding.prefill_flops(SHAPE, batch=1, tokens=T) == expected
    cache = decoding.new_cache(model, 1, T)
    counted = bl.count(model.prefill, torch.zeros(1, T, dtype=torch.long), cache)
    # the counter, like torch's, does not discount the causal mask: 4*T*T*C per layer
    full = expected - 2 * 2 * 64 * T * (T + 1) + 2 * 4 * 64 * T * T
    assert counted.by_category()["matmul"]["flops"] == full


def test_kv_cache_bytes_by_hand_and_allocated(model):
    assert decoding.kv_cache_bytes(SHAPE, batch=3, context=20) == 2 * 2 * 3 * 20 * 64 * 4 == 61_440
    cache = decoding.new_cache(model, 3, 20)
    assert sum(t.nbytes for t in (*cache.keys, *cache.values)) == 61_440
    assert cache.keys[0].shape == (3, SHAPE.heads, 20, SHAPE.head_size) and cache.length == 20


# --------------------------------------------------------------------------- generation


def test_kv_cache_decode_equals_recomputing_the_whole_sequence(model):
    torch.manual_seed(1)
    idx = torch.randint(0, SHAPE.vocab, (2, 24))
    cache = decoding.new_cache(model, 2, 32)
    model.prefill(idx[:, :10], cache)
    for t in range(10, 24):
        cached = model.decode(idx[:, t : t + 1], torch.tensor([t]), cache)
        recomputed = model.prefill(idx[:, : t + 1], decoding.new_cache(model, 2, t + 1))
        torch.testing.assert_close(cached, recomputed, atol=2e-5, rtol=1e-4)


def test_the_zoo_gpt_computes_the_same_logits():
    model = decoding.build(SHAPE, seed=3)
    zoo = GPT(GPTConfig(layers=2, d=64, heads=4, vocab=1000, ctx=128)).eval()
    zoo.load_state_dict(model.state_dict())
    idx = torch.randint(0, SHAPE.vocab, (3, 17))
    with torch.no_grad():
        theirs = zoo(idx)[:, 0]
    ours = model.prefill(idx, decoding.new_cache(model, 3, 17))
    torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=1e-4)


def test_generate_is_greedy_decoding_by_full_recompute(model):
    zoo = GPT(GPTConfig(layers=2, d=64, heads=4, vocab=1000, ctx=128)).eval()
    zoo.load_state_dict(model.state_dict())
    prompt = torch.randint(0, SHAPE.vocab, (2, 5))
    out = decoding.generate(model, prompt, new_tokens=6)
    expected = prompt
    with torch.no_grad():
        for _ in range(6):  # plain PyTorch: run the whole sequence again for every token
            expected = torch.cat([expected, zoo(expected)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, expected)
    with pytest.raises(ValueError, match="max_context"):
        decoding.generate(model, prompt, new_tokens=200)
    with pytest.raises(ValueError, match="new_tokens"):
        decoding.generate(model, prompt, new_tokens=0)


def test_prefill_needs_a_cache_long_enough(model):
    with pytest.raises(ValueError, match="new_cache"):
        model.prefill(torch.zeros(1, 9, dtype=torch.long), decoding.new_cache(model, 1, 8))
    with pytest.raises(ValueError, match="max_context"):
        decoding.new_cache(model, 1, 129)
    with pytest.raises(ValueError, match="batch"):
        decoding.new_cache(model, 0, 8)


def test_build_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b = decoding.build(SHAPE, seed=5), decoding.build(SHAPE, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not any(p.requires_grad for p in a.parameters()) and not a.training


def test_shape_rejects_nonsense():
    with pytest.raises(ValueError, match="heads"):
        decoding.DecoderShape("x", layers=1, d_model=60, heads=8, vocab=10, max_context=8)
    with pytest.raises(ValueError, match="layers"):
        decoding.DecoderShape("x", layers=0, d_model=64, heads=4, vocab=10, max_context=8)


# --------------------------------------------------------------------------- int8


def test_int8_linear_is_the_dequantized_product():
    torch.manual_seed(0)
    half = decoding.build(SHAPE, dtype=torch.bfloat16, seed=2)
    layer, w = decoding.quantize_int8(half).blocks[0].fc, half.blocks[0].fc.weight  # (256, 64)
    assert layer.q.dtype == torch.int8 and layer.q.shape == w.shape
    # each row's largest weight becomes +-127
    assert torch.equal(layer.q.abs().amax(dim=1), torch.full((256,), 127, dtype=torch.int8))
    dequantized = layer.q.float() * layer.scales.float()[:, None]
    torch.testing.assert_close(dequantized, w.float(), atol=w.abs().max().item() / 127, rtol=0)
    if not decoding.int8_kernel("cpu", torch.bfloat16):
        pytest.skip("this torch has no CPU kernel for _weight_int8pack_mm")
    x = torch.randn(5, 64, dtype=torch.bfloat16)
    want = x.float() @ dequantized.T + layer.bias.float()
    torch.testing.assert_close(layer(x).float(), want, atol=0.05, rtol=0.02)


def test_quantized_model_stays_close_and_leaves_the_original_alone():
    half = decoding.build(SHAPE, dtype=torch.bfloat16)
    q = decoding.quantize_int8(half)
    assert isinstance(half.blocks[0].qkv, torch.nn.Linear) and half.head is None
    assert decoding.precision_of(q) == "int8" and decoding.precision_of(half) == "bf16"
    if not decoding.int8_kernel("cpu", torch.bfloat16):
        pytest.skip("this torch has no CPU kernel for _weight_int8pack_mm")
    idx = torch.randint(0, SHAPE.vocab, (2, 12))
    a = half.prefill(idx, decoding.new_cache(half, 2, 12)).float()
    b = q.prefill(idx, decoding.new_cache(q, 2, 12)).float()
    assert (a - b).norm() / a.norm() < 0.05
    with pytest.raises(ValueError, match="16-bit"):
        decoding.quantize_int8(decoding.build(SHAPE))


def test_int8_kernel_is_no_on_a_device_without_one():
    assert decoding.int8_kernel("meta") is False  # a device without the kernel


# --------------------------------------------------------------------------- sizes and steps


def test_shapes_follow_the_bandwidth_and_stay_small_on_a_cpu(monkeypatch):
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 64 * 2**30)
    slow = fake_ceilings(mem_bandwidth_bytes_per_s=2e9)
    fast_cpu = fake_ceilings(mem_bandwidth_bytes_per_s=2e12)
    fast_gpu = fake_ceilings(device="cuda", mem_bandwidth_bytes_per_s=2e12)
    small, tiny_large = decoding.shapes(slow)
    assert small == decoding.SMALL and tiny_large == decoding.LADDER[0]
    assert decoding.shapes(fast_cpu)[1] == decoding.LADDER[2]  # a CPU stops at tens of millions
    assert decoding.shapes(fast_gpu)[1] == decoding.LADDER[-1]
    mid = fake_ceilings(device="cuda", mem_bandwidth_bytes_per_s=100e9)
    large = decoding.shapes(mid)[1]
    bigger = decoding.LADDER[decoding.LADDER.index(large) + 1]
    budget = decoding.TARGET_STEP_S * 100e9
    assert decoding.weight_bytes(large) <= budget < decoding.weight_bytes(bigger)
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 2**30)
    assert decoding.weight_bytes(decoding.shapes(fast_gpu)[1]) <= 2**30 / 8  # memory decides


def test_half_precision_is_the_faster_measured_one():
    bf16 = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 4e11, "fp16": 2e9})
    fp16 = fake_ceilings(matmul_flops_per_s_by_dtype={"fp16": 6e13})
    assert decoding.half_precision(bf16) == "bf16" and decoding.half_precision(fp16) == "fp16"
    assert decoding.half_precision(fake_ceilings()) == "bf16"
    equal = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 2.7e9, "fp16": 2.8e9})
    assert decoding.half_precision(equal) == "bf16"  # slow at both: no reason to leave bf16


def test_measured_step_counts_what_it_reads(model):
    s = decoding.measure_step(model, batch=2, context=16, budget_s=0.02)
    assert isinstance(s.timing, Timing) and s.seconds > 0
    assert s.tokens_per_s == pytest.approx(2 / s.seconds)
    assert s.weight_bytes == decoding.weight_bytes(SHAPE) and s.kv_bytes == 2 * 2 * 2 * 16 * 64 * 4
    assert s.bytes_per_s == pytest.approx((s.weight_bytes + s.kv_bytes) / s.seconds)
    assert s.flops == decoding.decode_flops(SHAPE, 2, 16)


def test_the_batch_sweep_meets_every_batch_early_and_late(model, monkeypatch):
    seen = []  # the batch of each decode call, in order
    real = model.decode
    monkeypatch.setattr(
        model, "decode", lambda ids, *a, **k: (seen.append(len(ids)), real(ids, *a, **k))[1]
    )
    sweep = decoding.batch_sweep(model, [4, 1, 2], context=16, budget_s=0.02)
    runs = [b for i, b in enumerate(seen) if i == 0 or seen[i - 1] != b]  # batch changes
    assert runs == [1, 2, 4, 2, 1]  # smallest first, then largest first (4 twice in a row)
    assert sweep.batches == (1, 2, 4)
    for p in sweep.points:  # each batch keeps both passes' samples
        assert len(p.timing.samples_s) >= 2 * 5  # bl.benchmark's five at least, per pass


def test_a_step_that_does_not_fit_is_refused_before_allocating(model, monkeypatch):
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 2**20)
    with pytest.raises(decoding.DoesNotFit, match="smaller batch"):
        decoding.decode_step(model, batch=64, context=128)
    sweep = decoding.batch_sweep(model, [1, 64], context=16, budget_s=0.02)
    assert sweep.batches == (1,) and sweep.skipped[0][0] == 64 and "free" in sweep.skipped[0][1]
    assert sweep.skipped[0][1] in repr(sweep)  # why 64 was not measured, said


def test_an_allocation_that_fails_is_reported_and_released(model, monkeypatch):
    released = []

    def no_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    # a seam: an allocation that fails needs a device whose memory runs out
    monkeypatch.setattr(decoding._steps, "new_cache", no_memory)
    monkeypatch.setattr(machine, "release_cached_memory", lambda dev=None: released.append(dev))
    with pytest.raises(decoding.DoesNotFit, match="given back"):
        decoding.decode_step(model, batch=1, context=16)
    assert released


def test_decode_step_wants_a_decoder():
    with pytest.raises(TypeError, match="Decoder"):
        decoding.decode_step(torch.nn.Linear(4, 4), 1, 16)


# --------------------------------------------------------------------------- the explorer


class FakeMeasure:
    """Measures nothing: each step 'takes' the memory floor of a 10 GB/s machine, or is refused."""

    def __init__(self, refuse_above: int = 10**9) -> None:
        self.calls, self.refuse_above = [], refuse_above

    def __call__(self, model, batch, context):
        self.calls.append((batch, context))
        if batch * context > self.refuse_above:
            raise decoding.DoesNotFit(f"batch {batch} at context {context} needs more than is free")
        shape = model.shape
        kv = decoding.kv_cache_bytes(shape, batch, context)
        seconds = (decoding.weight_bytes(shape) + kv) / 10e9
        return decoding.StepTiming(shape, "fp32", batch, context, Timing((seconds,) * 5, "cpu"),
                                   decoding.weight_bytes(shape), kv,
                                   decoding.decode_flops(shape, batch, context))  # fmt: skip


def _explorer(model, fake, **kw):
    ceilings = fake_ceilings(mem_bandwidth_bytes_per_s=10e9, matmul_flops_per_s=2e10)
    return widgets.decode_explorer(model, ceilings=ceilings, measure=fake, **kw)


def test_explorer_measures_once_per_point_and_displays_without_widgets(model):
    import base64

    fake = FakeMeasure()
    ex_ = _explorer(model, fake, prediction=8)
    ex_.set(batch=4)
    ex_.set(batch=1)  # back: measured already
    assert fake.calls == [(1, 64), (4, 64)]
    assert ex_.current.batch == 1 and ex_.error is None
    bundle = ex_._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    text = bundle["text/plain"]
    name, _, words = text.partition(": ")
    assert "decode" in name and "<" not in words and "tokens/s" in words
    ex_.remeasure()
    assert fake.calls[-1] == (1, 64)


def test_explorer_floors_and_knee_follow_the_counts(model):
    ex_ = _explorer(model, FakeMeasure())
    memory_s, compute_s = ex_.floors(8, 64)
    nbytes = decoding.weight_bytes(SHAPE) + 8 * decoding.kv_cache_bytes(SHAPE, 1, 64)
    assert memory_s == pytest.approx(nbytes / 10e9)
    assert compute_s == pytest.approx(decoding.decode_flops(SHAPE, 8, 64) / 2e10)
    knee = ex_.knee(64)
    assert ex_.floors(knee, 64)[0] == pytest.approx(ex_.floors(knee, 64)[1])
    assert ex_.knee(128) > knee  # more context per sequence: more bytes per FLOP


def test_explorer_reports_a_step_too_big_and_stays_usable(model):
    fake = FakeMeasure(refuse_above=1000)
    ex_ = _explorer(model, fake)
    assert ex_.set(batch=32, context=128) is None
    assert ex_.error and "free" in ex_.error and ex_.current is None  # the memory it lacked
    assert ex_.set(batch=2, context=16) is not None and ex_.error is None


def test_explorer_real_memory_refusal(model, monkeypatch):
    ex_ = _explorer(model, None)
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 2**20)
    assert ex_.set(batch=256, context=128) is None
    assert "free" in ex_.error


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"batch": 3}, ValueError, "batch"),
        ({"context": 100}, ValueError, "context"),
        ({"context": 256}, ValueError, "context"),
        ({"prediction": -1}, ValueError, "prediction"),
        ({"max_batch": 0}, ValueError, "max_batch"),
    ],
)
def test_explorer_bad_arguments(model, kwargs, error, words):
    with pytest.raises(error, match=words):
        _explorer(model, FakeMeasure(), **kwargs)


def test_explorer_wants_a_decoder():
    with pytest.raises(TypeError, match="decoding.build"):
        widgets.decode_explorer(torch.nn.Linear(4, 4))


# --------------------------------------------------------------------------- exercises


def _spec(name):
    return bl.spec(name)


RIGHT = {
    "06.decode_floor_tokens": lambda: _spec("H100").mem_bandwidth_bytes_per_s / (7e9 * 2),
    "06.prefill_over_decode": lambda: _spec("H100").peak("bf16") / _spec("H100").mem_bandwidth_bytes_per_s,
    "06.kv_context": lambda: 7e9 * 2 / (2 * 32 * 4096 * 2),
    "06.tp8_tokens_per_s": lambda: 1 / (
        7e9 * 2 / 8 / _spec("H100").mem_bandwidth_bytes_per_s
        + 2 * 32 * (10e-6 + 2 * 7 / 8 * 4096 * 2 / bl.hardware.link("NVLink 4").bandwidth_bytes_per_s)
    ),
    "06.spec_tokens_per_check": lambda: (1 - 0.7**6) / (1 - 0.7),  # 5 drafted, each kept at 0.7
}  # fmt: skip


def test_chapter_06_has_these_exercises():
    assert set(ex.questions("06").ids) == set(RIGHT)


@pytest.mark.parametrize("qid", sorted(RIGHT))
def test_a_right_answer_passes_and_a_wrong_one_fails(qid, capsys):
    right = RIGHT[qid]()
    assert ex.check(qid, right * 1.04) is True
    assert ex.check(qid, right * 1.6) is False
    assert ex.check(qid, right / 3) is False
    out = capsys.readouterr().out
    assert f"{right:.6g}" not in out.split("computed:")[0]  # never shown before it is right


def _question(qid):
    return {q.id: q for q in ex.questions()}[qid]


@pytest.mark.parametrize(
    ("qid", "ratio", "slip"),
    [
        ("06.decode_floor_tokens", 0.5, "0.5"),  # 4 bytes a weight, not bf16's 2
        ("06.kv_context", 2.0, "2"),  # a key and a value
        ("06.kv_context", 32, "one_layer"),
    ],
)
def test_typical_slips_get_their_nudge(qid, ratio, slip):  # bl.check says only yes or no
    assert ex.check(qid, RIGHT[qid]() * ratio) is False
    assert _question(qid).judge(RIGHT[qid]() * ratio).slip == slip


def test_tensor_parallel_slips_are_recognised():
    right = RIGHT["06.tp8_tokens_per_s"]()
    weights_only = _spec("H100").mem_bandwidth_bytes_per_s * 8 / (7e9 * 2)
    assert ex.check("06.tp8_tokens_per_s", weights_only) is False
    assert _question("06.tp8_tokens_per_s").judge(weights_only).slip == "weights_alone"
    assert weights_only / right > 2  # the latency is most of the step at batch 1
