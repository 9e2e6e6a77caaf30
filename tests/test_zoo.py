"""Tests for brrrlib.zoo and the workloads built on it in benchmarks/zoo_more: every
workload's FLOPs against its hand formula, the published ResNet-50 anchor, the roofline's
predictions on spec-sheet GPUs, and on this CPU the shares (never above the measured time)
and a subset of verdicts chosen to hold on a busy machine."""

from __future__ import annotations

import dataclasses
import functools

import _fakes
import pytest
import torch
import zoo_more

import brrrlib as bl
from brrrlib import zoo
from brrrlib.diagnosis import Diagnosis

ENTRIES = zoo_more.every()  # brrrlib.zoo's entries, then the ten more of benchmarks/zoo_more
LABELS = [e.label for e in ENTRIES]
REGIMES = ("compute", "memory", "overhead")

#: A share is a floor over the measured time, so it cannot pass 1; the measured ceilings are
#: medians, so a workload may beat them by a little: 5% for that noise.
SHARE_NOISE = 0.05
#: Bytes may differ from the hand count by this much. The hand count charges ``zeros_like``
#: only the tensor it writes; the counter also charges the tensor it takes the shape from
#: (the graph network and the mixture of experts: 1-2%). The others agree to the byte today.
BYTES_TOLERANCE = 0.03


def _entry(label: str) -> zoo.ZooEntry:
    name, size = label.split("/")
    return zoo_more.entry(name, size)


@functools.cache
def _built(label: str):
    """Each workload built once per test session (the big decoders take a second to build)."""
    return _entry(label).factory()


@functools.cache
def _counted(label: str):
    fn, args = _built(label)
    return bl.count(fn, *args)


@pytest.fixture(scope="module")
def cpu_ceilings(ceilings_cache_dir):
    """This CPU's ceilings on one thread, measured once (the zoo runs on CPU tensors).

    The timing tests below run torch on one thread, as the ceilings were measured: on a
    2-core machine with another program busy on a core, a second OpenMP thread waits for
    the descheduled one at every barrier, noise about the machine rather than the model.
    Ceilings measured while other programs held this core (the fp32 ones' rounds did not
    agree, or the process got under 80% of its CPU time) read low by an unknown factor, so
    no floor made from them is a floor: the tests that need them are skipped, saying why.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield _fakes.measured_for_verdicts()
    finally:
        torch.set_num_threads(threads)


def _floors_for(ceilings, regime: str | None):
    """``ceilings`` when they can serve as floors for a verdict of ``regime``; else a skip."""
    why = _fakes.disturbed(ceilings, regime)
    if why:
        pytest.skip(f"this CPU's ceilings were measured twice while other programs ran: {why}")
    return ceilings


# ------------------------------------------------------------------------- the zoo as data


def test_the_zoo_has_twelve_workloads_and_more_each_at_two_sizes():
    names = tuple(dict.fromkeys(e.name for e in ENTRIES))
    assert len(names) >= 12
    for name in names:
        assert {e.size for e in ENTRIES if e.name == name} == set(zoo.SIZES)
    families = {"mlp", "gpt_prefill", "gpt_decode", "bert", "resnet", "lstm", "dlrm", "unet", "moe"}
    assert families <= set(names) and {"vit", "mixer"} & set(names)
    assert len(set(LABELS)) == len(LABELS)
    # the package holds the three chapter 04 diagnoses; the rest are benchmarks' fixtures
    assert {"resnet", "vit", "llama_decode"} <= set(zoo.names())
    assert set(zoo.names()).isdisjoint(e.name for e in zoo_more.entries())


def test_each_entry_is_frozen_data_with_its_formula_and_regimes():
    for e in ENTRIES:
        with pytest.raises(dataclasses.FrozenInstanceError):
            e.expected_cpu = "compute"  # type: ignore[misc]
        assert "FLOPs" in e.formula and e.cpu_reason and e.summary
        assert e.expected_cpu in REGIMES
        assert [p.regime for p in e.predictions] == [e.prediction(g).regime for g in zoo.GPUS]
        assert all(p.regime in ("compute", "memory") for p in e.predictions)
        if e.size == "tiny":
            assert e.expected_cpu == "overhead", e.label
    with pytest.raises(ValueError, match="name"):
        zoo.entry("alexnet")
    with pytest.raises(ValueError, match="size"):
        zoo.entry("vit", "huge")
    with pytest.raises(ValueError, match="name"):
        zoo_more.entry("alexnet")
    assert repr(zoo.entry("vit")).startswith("ZooEntry(vit/big")
    assert repr(_entry("mlp/big")).startswith("ZooEntry(mlp/big")


# ------------------------------------------------------------------------- counts by hand


@pytest.mark.parametrize("label", LABELS)
def test_count_equals_the_hand_formula(label):
    e, counts = _entry(label), _counted(label)
    assert counts.flops == e.hand_flops, label
    assert counts.bytes_moved == pytest.approx(e.hand_bytes, rel=BYTES_TOLERANCE), label
    assert not counts.notes, counts.notes  # every op was priced


def test_decoder_formulas_in_closed_form():
    """The formulas in the docstrings, evaluated here independently of the tally."""
    for label, (L, C, V, B, T, S) in {
        "gpt_prefill/big": (4, 512, 50257, 1, 256, 256),
        "gpt_decode/big": (8, 1024, 50257, 1, 1, 1024),
        "gpt_decode/tiny": (2, 64, 1024, 1, 1, 8),
    }.items():
        flops = L * (24 * B * T * C**2 + 4 * B * T * S * C + 20 * B * T * C) + B * T * C
        assert _entry(label).hand_flops == flops + 7 * B * C + 2 * B * C * V, label
    # Llama decode: GQA shrinks the K/V projections (Ckv = 4 heads x 64), not attention
    L, C, Ckv, F, V, S = 8, 1024, 256, 2816, 32000, 1024
    per_layer = 2 * C * (2 * C + 2 * Ckv + 3 * F) + 4 * S * C + 10 * C + 4 + 3.5 * (C + Ckv) + 2 * F
    assert _entry("llama_decode/big").hand_flops == L * per_layer + 4 * C + 2 + 2 * C * V


def test_vision_formulas_in_closed_form():
    B, T, C, L, p, classes = 1, 196, 192, 12, 16, 1000  # ViT-Ti/16: T patches + a class token
    Tc, patches = T + 1, 2 * B * T * C * 3 * p**2
    layers = L * (24 * B * Tc * C**2 + 4 * B * Tc**2 * C + 20 * B * Tc * C)
    vit = patches + B * Tc * C + layers + 7 * B * Tc * C + 2 * B * C * classes
    assert _entry("vit/big").hand_flops == vit
    C, Ft, F, L = 512, 256, 2048, 8  # Mixer-S/16
    patches = 2 * B * T * C * 3 * p**2
    per_layer = 4 * B * C * T * Ft + 4 * B * T * C * F + 16 * B * T * C + 2 * B * C * Ft + B * T * F
    mixer = patches + L * per_layer + 7 * B * T * C + B * T * C + 2 * B * C * classes
    assert _entry("mixer/big").hand_flops == mixer


def test_encoder_mlp_moe_and_lstm_formulas_in_closed_form():
    L, C, B, T = 2, 64, 1, 8  # the small encoder: BERT's formula with F = 4C
    bert = L * (24 * B * T * C**2 + 4 * B * T**2 * C + 20 * B * T * C) + 9 * B * T * C
    assert _entry("bert/tiny").hand_flops == bert + 2 * B * C**2 + B * C
    assert (
        _entry("mlp/big").hand_flops
        == 2 * 256 * (1024 * 2048 + 2048 * 2048 + 2048 * 1024) + 2 * 256 * 2048
    )
    N, C, E, F, k = 4 * 256, 512, 8, 1024, 2  # every token through k experts, however routed
    moe = 2 * N * C * E + N * k * (4 * C * F + F + C) + 8 * N * C + 5 * N * E + E * N * k
    assert _entry("moe/big").hand_flops == moe
    B, T, H, D = 32, 64, 256, 256  # two layers, the second fed the first's H outputs
    lstm = 2 * B * T * (4 * H * (D + H) + 4 * H * (H + H)) + 2 * B * H * 10
    assert _entry("lstm/big").hand_flops == lstm


def test_resnet50_counts_within_two_percent_of_the_published_8_18_gflops():
    """torchvision's model table lists ResNet-50 at 4.09 GMACs (224 x 224): 8.18 GFLOPs."""
    counts = _counted("resnet/big")
    assert abs(counts.flops / 8.18e9 - 1) < 0.02
    # the convolutions and the classifier alone are the published MACs x 2 (to 0.1%)
    assert counts.by_category()["matmul"]["flops"] == pytest.approx(8.18e9, rel=1e-3)
    fn, _ = _built("resnet/big")
    params = sum(p.numel() for p in fn.model.parameters())
    assert params == 25_557_032  # torchvision's resnet50: 25.6 M parameters


def test_the_small_encoder_of_the_bug_report_is_in_the_zoo():
    """2 layers, hidden 64, a 30k vocabulary, batch 1, 8 tokens; its lookup reads 8 rows."""
    fn, (idx,) = _built("bert/tiny")
    model = fn.model
    assert len(model.layers) == 2 and model.word.embedding_dim == 64
    assert model.word.num_embeddings == 30522 and tuple(idx.shape) == (1, 8)
    lookup = [r for r in _counted("bert/tiny").rows if r.op == "aten::embedding"]
    assert lookup and lookup[0].bytes_moved < 8 * 64 * 4 * 3  # ids + 8 rows + output, not 7.8 MB


# ------------------------------------------------------------------------- the workloads


@pytest.mark.parametrize("label", [e.label for e in ENTRIES if e.size == "tiny"])
def test_factories_build_seeded_inference_with_a_batch_to_double(label):
    fn, args = _entry(label).factory()
    again, args2 = _entry(label).factory()
    assert not fn.model.training and fn.__name__ == label.replace("/", "_")
    out = fn(*args)
    first = out[0] if isinstance(out, tuple) else out
    assert not first.requires_grad  # inference: run under no_grad
    torch.testing.assert_close(again(*args), out)  # seeded: the same weights and inputs
    doubled = _double(args)
    out2 = fn(*doubled)
    first2 = out2[0] if isinstance(out2, tuple) else out2
    assert first2.shape[0] == 2 * first.shape[0]  # the first dimension of each input is the batch


def _double(tree):
    if isinstance(tree, torch.Tensor):
        return torch.cat([tree, tree]) if tree.dim() else tree
    if isinstance(tree, (tuple, list)):
        return type(tree)(_double(x) for x in tree)
    return tree


# ------------------------------------------------------------------------- spec-sheet GPUs


def test_the_roofline_predicts_decode_memory_bound_and_prefill_compute_bound():
    for gpu in zoo.GPUS:
        for name in ("gpt_decode", "llama_decode"):
            for size in zoo.SIZES:
                assert _entry(f"{name}/{size}").prediction(gpu).regime == "memory"
        for name in ("gpt_prefill", "llama_prefill", "bert", "mlp"):
            assert _entry(f"{name}/big").prediction(gpu).regime == "compute"
        decode = _entry("gpt_decode/big")
        assert decode.hand.largest_kind()[0] == "weights"
        assert decode.prediction(gpu).intensity_flops_per_byte < 1
        assert not decode.prediction(gpu).launch_bound
    assert _entry("mlp/tiny").prediction("H100").launch_bound  # its floor: under a launch per op


def test_predictions_are_the_spec_sheets_arithmetic():
    for e in ENTRIES:
        for p, gpu in zip(e.predictions, zoo.GPUS, strict=True):
            spec = bl.spec(gpu)
            ridge = spec.peak("fp32") / spec.mem_bandwidth_bytes_per_s
            intensity = e.hand_flops / e.hand_bytes
            assert p.ridge_flops_per_byte == pytest.approx(ridge)
            assert p.intensity_flops_per_byte == pytest.approx(intensity)
            assert p.regime == ("compute" if intensity >= ridge else "memory")
    # in bf16 the bytes halve (token ids keep 8) and the ridge moves 16x up on an A100
    e = _entry("gpt_prefill/big")
    bf16 = zoo.predict(e.hand, "A100", "bf16")
    assert bf16.intensity_flops_per_byte > 1.9 * e.prediction("A100").intensity_flops_per_byte
    assert bf16.ridge_flops_per_byte == pytest.approx(312e12 / 1.555e12)


# ------------------------------------------------------------------------- this CPU


@functools.cache
def _weighed(label: str, ceilings):
    """diagnose's first probe alone: one count, one short benchmark, the floors and verdict."""
    fn, args = _built(label)
    timing = bl.benchmark(fn, *args, budget_s=0.05, min_samples=5, label=label)
    d = Diagnosis(timing, _counted(label), ceilings)
    return d.floors, d.shares, d.verdict


#: Workloads whose compute runs in oneDNN's convolution and LSTM kernels. On an AMD EPYC
#: (AVX-512) those reach ~2x what torch.mm reaches (210 vs 96 GFLOP/s on one core): the
#: matmul ceiling takes the faster of torch.mm and oneDNN's linear, so they stay under it.
ONEDNN_BOUND = {"resnet/big", "unet/big", "lstm/big"}


@pytest.mark.parametrize("label", LABELS)
def test_no_share_is_above_the_measured_time(label, cpu_ceilings):
    """A floor is a lower bound: a share above 1 would mean the model of the machine is wrong."""
    _fl, shares, _v = _weighed(label, _floors_for(cpu_ceilings, None))
    assert max(shares.values()) <= 1 + SHARE_NOISE, (label, shares)


#: Verdicts that hold on a busy 2-core machine of any kind. Big workloads: the verdict is
#: the roofline's, the larger of the compute and memory floors, when they differ 2.5x or
#: more (the ratio of two floors depends on the counts and this CPU's ceilings, not on the
#: time; which one is larger depends on the CPU, so the test asks this CPU's roofline).
#: Tiny ones: the overhead floor explains 2.5x or more what the next one does, and doubling
#: the batch leaves the time flat. (Others sit closer: see benchmarks/diagnose_zoo.py.)
STABLE_BIG = ("mlp/big", "gpt_prefill/big", "gpt_decode/big", "dlrm/big", "gcn/big")
STABLE_TINY = ("mlp/tiny", "llama_decode/tiny", "dlrm/tiny", "gcn/tiny", "bert/tiny")


@pytest.mark.verdict
@pytest.mark.parametrize("label", STABLE_BIG)
def test_big_workloads_get_their_roofline_regime(label, cpu_ceilings):
    fl, shares, v = _weighed(label, cpu_ceilings)
    compute, memory = fl.compute_s, fl.memory_s
    roofline = "compute" if compute > memory else "memory"
    _floors_for(cpu_ceilings, roofline)
    if max(compute, memory) < 2.5 * min(compute, memory):
        pytest.skip(f"{label}: this CPU's compute and memory floors are within 2.5x")
    assert v.regime == roofline, (label, shares)


@pytest.mark.verdict
@pytest.mark.parametrize("label", STABLE_TINY)
def test_tiny_workloads_are_diagnosed_overhead_bound(label, cpu_ceilings):
    """With every probe, as a learner runs it (bert/tiny is the encoder of the bug report)."""
    fn, args = _built(label)
    ceilings = _floors_for(cpu_ceilings, "overhead")
    d = bl.diagnose(fn, *args, ceilings=ceilings, budget_s=0.1, progress=False, label=label)
    assert d.regime == "overhead", str(d)
    assert d.batch is not None and d.batch.time_ratio < 1.5  # twice the work, not twice the time


def test_factory_builds_on_the_device_asked_for_nested_inputs_included():
    fn, (idx, caches) = _entry("llama_decode/tiny").factory(device="meta")
    assert {p.device.type for p in fn.model.parameters()} == {"meta"}
    assert idx.device.type == "meta"
    assert {t.device.type for layer in caches for t in layer} == {"meta"}
    out = fn(idx, caches)
    first = out[0] if isinstance(out, tuple) else out
    assert first.device.type == "meta" and first.shape[0] == idx.shape[0]
