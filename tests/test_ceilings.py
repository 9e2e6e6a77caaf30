"""ceilings: the Ceilings record, measuring in rounds, and the cache (measured once per session)."""

import dataclasses
import functools
import json
import math
import os
import re
import socket
import stat
import tempfile

import pytest
import torch
from _fakes import fake_ceilings

import brrrlib as bl
from brrrlib import ceilings
from brrrlib.ceilings import Ceilings

# -------------------------------------------------------------- the record ---


def test_ceilings_ridge_point_repr_and_round_trip():
    c = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 8e11})
    assert c.ridge_point_flops_per_byte() == pytest.approx(10.0)
    assert c.ridge_point_flops_per_byte("bf16") == pytest.approx(40.0)
    text = repr(c)
    for piece in ("200 GFLOP/s", "150 GFLOP/s", "20 GB/s", "1 µs", "Test CPU",
                  "matmul bf16", "800 GFLOP/s"):  # fmt: skip
        assert piece in text
    assert "FLOP/byte" not in text  # ridge points are the chapters' arithmetic, not the table's
    by_pattern = dataclasses.replace(c, bandwidth_by_form_bytes_per_s={"sum (read)": 13e9})
    assert "13 GB/s" in repr(by_pattern)  # each measured pattern's roof
    assert "<table>" in c._repr_html_()
    assert Ceilings.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_matmul_peak_per_precision_and_no_invented_numbers():
    c = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 8e11, "tf32": 4e11})
    assert c.matmul_peak() == c.matmul_peak("fp32") == 200e9
    assert c.matmul_peak(torch.bfloat16) == c.matmul_peak("bfloat16") == 8e11
    with pytest.raises(ValueError, match="precision .*fp32, bf16, tf32"):
        c.matmul_peak("fp16")
    # fp32 is always the matmul_flops_per_s field, whatever the mapping says
    assert dict(c.matmul_flops_per_s_by_dtype)["fp32"] == 200e9


def test_noisy_names_the_number_and_by_how_much():
    assert not fake_ceilings().noisy
    phases = fake_ceilings(spread={"matmul": 0.02, "memory": 0.35})
    assert phases.noisy and len(phases.noise_notes()) == 1 and "35%" in phases.noise_notes()[0]
    assert not fake_ceilings(spread={"memory": 0.08}).noisy  # within the limit
    assert fake_ceilings(spread={"matmul_bf16": 0.2}).noisy
    wild = fake_ceilings(spread={"overhead": 0.6})
    (note,) = wild.noise_notes()
    assert "UNTRUSTED" in note and "UNTRUSTED" not in phases.noise_notes()[0]
    assert "60% UNTRUSTED" in repr(wild)  # the spread column says it too


def test_a_precision_without_a_fast_path_is_read_from_the_measurement():
    avx2 = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 40e9, "fp16": 1.3e9},
                         precision_notes={"bf16": "no bf16 matrix instructions"})  # fmt: skip
    assert not avx2.fast_path("bf16") and not avx2.fast_path("fp16") and avx2.fast_path("fp32")
    assert avx2.fast_precision == "fp32"
    assert avx2.precision_note("bf16") and not avx2.precision_note("fp32")
    text = repr(avx2)
    assert "no fast path" in text  # bf16's row says it has none
    amx = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 800e9, "fp16": 2e9})
    assert amx.fast_path("bf16") and amx.fast_precision == "bf16" and not amx.precision_note("bf16")
    t4 = fake_ceilings(device="cuda", matmul_flops_per_s=8e12,
                       matmul_flops_per_s_by_dtype={"fp16": 60e12})  # fmt: skip
    assert t4.fast_precision == "fp16"


@pytest.mark.parametrize(
    ("flags", "overrides", "says"),
    [
        ({"avx2", "fma"}, {}, "CPU lacks avx512_bf16/amx_bf16/bf16"),  # a laptop without them
        ({"avx2", "avx512_bf16"}, {"ATEN_CPU_CAPABILITY": "avx2"}, "ATEN_CPU_CAPABILITY=avx2"),
        ({"avx2", "avx512_bf16"}, {}, "torch AVX2 ignores avx512_bf16"),
        (set(), {}, ""),  # no /proc/cpuinfo: no evidence either way
    ],
)
def test_why_a_precision_is_slow_comes_from_the_cpu_flags(flags, overrides, says):
    # the flags are handed in: the same answer on any machine, whatever its own CPU has
    assert ceilings.precision_reason("bf16", "cpu", frozenset(flags), "AVX2", overrides) == says


def test_a_cpu_process_whose_calls_waited_for_cores_is_noisy():
    busy = fake_ceilings(cpu_share=0.9)  # disturbed samples were dropped: the numbers stand
    assert not busy.noisy and "90%" in repr(busy)
    swamped = fake_ceilings(cpu_share=0.25)  # every number may read low by that much
    assert swamped.noisy and "25%" in swamped.noise_notes()[0]
    assert not fake_ceilings(device="cuda", cpu_share=0.25).noisy  # a GPU's host may wait


def test_ceilings_reject_nonsense():
    with pytest.raises(ValueError, match="mem_bandwidth_bytes_per_s"):
        fake_ceilings(mem_bandwidth_bytes_per_s=0)
    with pytest.raises(ValueError, match="op_overhead_s"):
        fake_ceilings(op_overhead_s=float("nan"))
    with pytest.raises(TypeError, match="matmul_flops_per_s"):
        fake_ceilings(matmul_flops_per_s=True)
    with pytest.raises(TypeError):
        Ceilings.from_dict({**fake_ceilings().to_dict(), "bogus": 1})
    with pytest.raises(TypeError, match="ceilings"):
        Ceilings.from_dict([1, 2])


def test_nearest_spec_by_name_on_a_gpu_else_by_numbers():
    a100 = fake_ceilings(
        device="cuda", device_name="NVIDIA A100-SXM4-80GB", matmul_flops_per_s=19e12
    )
    assert a100.nearest_spec().mem_bytes == 80 * 2**30 and "A100" in a100.nearest_spec().name
    slow = fake_ceilings()  # a CPU is far below every GPU: the nearest is the slowest row
    assert slow.nearest_spec() is min(bl.hardware.all_specs(), key=lambda s: s.peak("fp32"))


# ------------------------------------------------------------- the cache ---


def new_process(monkeypatch):
    """A seam: a test cannot start a process, so empty what this one remembers."""
    monkeypatch.setattr(ceilings, "_MEMO", {})


@pytest.fixture
def queued():
    """What the stand-in measurement returns next, in order (a plain CPU's once empty)."""
    return []


@pytest.fixture
def fake_measure(tmp_path, monkeypatch, queued):
    """measure_ceilings in a fresh cache and process, with a counting stand-in measurement."""
    monkeypatch.setenv("BRRR_CACHE_DIR", str(tmp_path))
    new_process(monkeypatch)
    calls = []

    def measure(dev, name, progress):
        calls.append(dev)
        return queued.pop(0) if queued else fake_ceilings(device=dev.type, device_name=name)

    # a seam: the real measurement takes 10-30 s, and the cache is what these tests check
    monkeypatch.setattr(ceilings, "_measure", measure)
    return calls


def test_measured_once_per_machine_then_read(fake_measure, tmp_path, monkeypatch):
    first = bl.measure_ceilings(progress=False)
    assert bl.measure_ceilings(progress=False) is first and len(fake_measure) == 1
    new_process(monkeypatch)  # it reads the file
    assert bl.measure_ceilings(progress=False) == first and len(fake_measure) == 1
    bl.measure_ceilings(refresh=True, progress=False)
    assert len(fake_measure) == 2
    (path,) = tmp_path.glob("ceilings-*.json")
    path.write_text("{not json")
    new_process(monkeypatch)
    bl.measure_ceilings(progress=False)
    assert len(fake_measure) == 3
    assert not list(tmp_path.glob("*.tmp"))  # temporary files renamed or removed


def test_a_noisy_cached_result_is_kept_until_refreshed(fake_measure, queued, monkeypatch):
    queued += [fake_ceilings(spread={"memory": 0.5, "matmul": 0.3}, measured_at="first"),
               fake_ceilings(spread={"memory": 0.5}, measured_at="second")]  # fmt: skip
    first = bl.measure_ceilings(progress=False)
    assert len(fake_measure) == 1 and first.noisy  # its rounds already were the best of them
    new_process(monkeypatch)  # the file says noisy, and says by how much: it is read
    assert bl.measure_ceilings(progress=False) == first and len(fake_measure) == 1
    second = bl.measure_ceilings(refresh=True, progress=False)
    assert len(fake_measure) == 2 and second.measured_at == "second"


def test_an_unwritable_cache_keeps_the_measurement_and_warns_once(
    fake_measure, tmp_path, monkeypatch
):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BRRR_CACHE_DIR", str(blocker))
    with pytest.warns(UserWarning, match="could not cache the ceilings.*BRRR_CACHE_DIR"):
        first = bl.measure_ceilings(progress=False)
    assert bl.measure_ceilings(progress=False) is first and len(fake_measure) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_a_read_only_cache_folder_warns(fake_measure, tmp_path, monkeypatch):
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.warns(UserWarning, match="could not cache"):
            bl.measure_ceilings(progress=False)
    finally:
        tmp_path.chmod(stat.S_IRWXU)


def test_two_writers_never_share_a_temporary_file(fake_measure, tmp_path, monkeypatch):
    names = []
    real = tempfile.mkstemp

    def spy(*a, **k):
        fd, name = real(*a, **k)
        names.append(name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", spy)  # records each temporary file's name
    bl.measure_ceilings(progress=False)
    bl.measure_ceilings(refresh=True, progress=False)
    (path,) = tmp_path.glob("ceilings-*.json")
    assert len(set(names)) == 2 and json.loads(path.read_text())["device"] == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_and_cuda_0_share_one_entry(fake_measure):
    first = bl.measure_ceilings("cuda", progress=False)
    assert bl.measure_ceilings("cuda:0", progress=False) is first and len(fake_measure) == 1


def test_measure_ceilings_validates_device():
    with pytest.raises(TypeError, match="device must be"):
        bl.measure_ceilings(3)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device="):
            bl.measure_ceilings("cuda")


# ------------------------------------------------- measure_ceilings (live) ---


def test_measured_ceilings_are_each_the_best_of_their_spaced_rounds(measured_ceilings):
    c = measured_ceilings
    assert c.device == bl.device().type
    assert c.torch_version == torch.__version__ and c.library_version == bl.__version__
    assert c.matmul_size >= 256 and c.copy_bytes >= 64 * 2**20
    assert math.isclose(
        c.ridge_point_flops_per_byte(), c.matmul_flops_per_s / c.mem_bandwidth_bytes_per_s
    )
    # every ceiling took part in every round, and is its best round: ceiling and floor
    assert set(c.rounds) == set(c.spread) >= {"matmul", "vector", "special", "memory", "overhead"}
    assert set(c.rounds.values()) == {ceilings.ROUNDS}
    assert len(c.bandwidth_rounds_bytes_per_s) == len(c.overhead_rounds_s) == ceilings.ROUNDS
    assert c.mem_bandwidth_bytes_per_s == max(c.bandwidth_rounds_bytes_per_s)
    assert c.mem_bandwidth_bytes_per_s == c.bandwidth_for("write")
    assert c.op_overhead_s == min(c.overhead_rounds_s)
    assert all(0 <= v < 1 for v in c.spread.values())  # how far the median round fell below
    assert set(c.special_per_s) == {"exp", "tanh", "erf", "cos", "log"}
    assert "bf16" in c.matmul_flops_per_s_by_dtype
    # No ordering between ceilings is asserted: on a busy 2-core machine a
    # competing process can slow any one of them (benchmarks/ceilings.py sets
    # them beside independent measurements instead).


def test_ceilings_are_cached_per_machine(measured_ceilings, ceilings_cache_dir):
    # other tests may have cached their own (one thread's, say): this one's file is there
    host = re.sub(r"[^A-Za-z0-9.]+", "_", socket.gethostname())
    names = [p.name for p in ceilings_cache_dir.glob("ceilings-*.json")]
    version = torch.__version__.split("+")[0]
    assert any(n.startswith(f"ceilings-{host}") and version in n for n in names)
    assert bl.measure_ceilings(progress=False) == measured_ceilings  # measured_at included


def _stalled_matmuls(peak=150e9, stall_s=8e-3, jump=None):
    """The matmul screen with fake kernels and clock on a busy CPU: every call waits a scheduler
    slice, however small; torch.mm runs at half F.linear's rate; ``jump[n]`` scales the rate at n."""
    sizes = []

    def kernels(n):
        sizes.append(n)
        return {"F.linear": lambda: n, "torch.mm": lambda: -n}

    def seconds(call):
        n = abs(call())
        rate = peak * (jump or {}).get(n, 1.0) / (1 if call() > 0 else 2)
        return max(stall_s, 2 * n**3 / rate)

    # a seam: a fake clock, since a real screen's sizes depend on the machine and its load
    screen = functools.partial(ceilings._screen, kernels, seconds, 256, 4096, 0.001, 6.0)
    return sizes, screen, seconds


def test_a_busy_cpus_long_small_calls_do_not_end_the_matmul_screen():
    # 8 ms a call at n=256 is 4.2 GFLOP/s: long enough, but it is waiting, not working
    sizes, screen, _ = _stalled_matmuls()
    kernel, n, _call, _method = screen()
    assert sizes[:3] == [256, 512, 1024] and n >= 1024 and kernel == "F.linear"


def test_a_quiet_screen_stops_once_calls_are_long_and_the_rate_is_flat():
    sizes, screen, seconds = _stalled_matmuls(stall_s=0.0)
    kernel, n, call, _ = screen()
    # 256 is under 1 ms; the rate is flat from 256 on: two flat doublings end it at 1024
    assert sizes == [256, 512, 1024] and 2 * n**3 / seconds(call) == pytest.approx(150e9)


def test_a_rate_that_jumps_after_a_flat_doubling_is_followed():
    jump = {256: 0.5, 512: 1.0, 1024: 1.0, 2048: 2.2, 4096: 2.2}  # bf16 on AMX, seen on a VM
    _, screen, seconds = _stalled_matmuls(stall_s=0.0, jump=jump)
    _, n, call, _ = screen()
    assert n >= 2048 and 2 * n**3 / seconds(call) == pytest.approx(2.2 * 150e9)


def test_each_access_pattern_reads_its_own_roof():
    forms = {"copy_": 18e9, "add(out=)": 19e9, "add_ (in place)": 30e9, "sum (read)": 14e9}
    c = fake_ceilings(mem_bandwidth_bytes_per_s=30e9, bandwidth_by_form_bytes_per_s=forms)
    assert c.bandwidth_for("read") == 14e9
    assert c.bandwidth_for("copy") == 19e9  # the faster of the two separate-output forms
    assert c.bandwidth_for("update") == 30e9
    older = fake_ceilings(mem_bandwidth_bytes_per_s=30e9)  # measured before the read form
    assert older.bandwidth_for("read") == 30e9
    with pytest.raises(ValueError, match="pattern"):
        c.bandwidth_for("triad")


def test_a_ceiling_s_noise_is_noted_only_for_work_that_uses_it():
    c = fake_ceilings(spread={"matmul_fp16": 0.18, "matmul": 0.01, "vector": 0.02})
    assert len(c.noise_notes()) == 1  # the fp16 matmul's rounds disagreed
    assert c.noise_notes(uses={"matmul", "vector", "memory", "overhead"}) == ()
    assert len(c.noise_notes(uses={"matmul_fp16"})) == 1
