"""ceilings: the Ceilings record, measuring in rounds, and the cache (measured once per session)."""

import dataclasses
import json
import math
import os
import stat

import pytest
import torch
from _fakes import fake_ceilings

import brrrlib as bl
from brrrlib import _files, ceilings
from brrrlib.ceilings import Ceilings

# -------------------------------------------------------------- the record ---


def test_ceilings_ridge_point_repr_and_round_trip():
    c = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 8e11})
    assert c.ridge_point_flops_per_byte() == pytest.approx(10.0)
    assert c.ridge_point_flops_per_byte("bf16") == pytest.approx(40.0)
    text = repr(c)
    for piece in ("200 GFLOP/s", "150 GFLOP/s", "20 GB/s", "1 µs", "Test CPU",
                  "matmul (bf16)", "800 GFLOP/s"):  # fmt: skip
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
    with pytest.raises(KeyError, match="no fp16 matmul ceiling was measured.*fp32, bf16, tf32"):
        c.matmul_peak("fp16")
    # fp32 is always the matmul_flops_per_s field, whatever the mapping says
    assert dict(c.matmul_flops_per_s_by_dtype)["fp32"] == 200e9


def test_noisy_names_the_number_and_by_how_much():
    assert not fake_ceilings().noisy
    phases = fake_ceilings(spread={"matmul": 0.02, "memory": 0.35},
                           bandwidth_rounds_bytes_per_s=(13e9, 20e9))  # fmt: skip
    assert phases.noisy and phases.bandwidth_phases and len(phases.noise_notes()) == 1
    assert not fake_ceilings(spread={"memory": 0.15}).noisy  # within a phase's wobble
    assert fake_ceilings(spread={"matmul_bf16": 0.2}).noisy
    # the op overhead is a floor (the fastest round): rounds that disagree are not noise
    floor = fake_ceilings(spread={"overhead": 0.6}, overhead_rounds_s=(1e-6, 1.6e-6))
    assert not floor.noisy and floor.op_overhead_s == min(floor.overhead_rounds_s)


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
        ({"avx2", "fma"}, {}, "no bf16 matrix instructions"),  # a laptop without AVX-512 BF16
        ({"avx2", "avx512_bf16"}, {"ATEN_CPU_CAPABILITY": "avx2"}, "ATEN_CPU_CAPABILITY=avx2"),
        ({"avx2", "avx512_bf16"}, {}, "does not use them"),
        (set(), {}, "no bf16 matrix instructions that torch uses"),  # no /proc/cpuinfo
    ],
)
def test_why_a_precision_is_slow_comes_from_the_cpu_flags(flags, overrides, says):
    # the flags are handed in: the same answer on any machine, whatever its own CPU has
    assert says in ceilings.precision_reason("bf16", "cpu", frozenset(flags), "AVX2", overrides)


def test_steal_time_is_read_as_a_share_and_disturbed_rounds_are_dropped():
    assert ceilings._steal_share((10, 1000), (60, 2000)) == pytest.approx(0.05)
    assert ceilings._steal_share(None, (60, 2000)) == 0.0
    rounds = [(20e9, 0.0), (15e9, 0.30), (21e9, 0.01)]  # the middle round lost its CPU
    assert ceilings._Phases._kept(rounds) == [20e9, 21e9]
    assert ceilings._Phases._kept([(15e9, 0.3)]) == [15e9]  # nothing better to keep


def test_a_shared_cpu_is_said_but_is_not_noise():
    busy = fake_ceilings(cpu_share=0.6)  # disturbed samples were dropped: the numbers stand
    assert busy.shared_cpu and not busy.noisy
    assert "60%" in repr(busy) and "NOISY" not in repr(busy)  # the share it got, said
    assert not fake_ceilings(device="cuda", cpu_share=0.6).shared_cpu
    swamped = fake_ceilings(cpu_share=0.25)  # too few quiet samples left to keep
    assert swamped.noisy and "25%" in swamped.noise_notes()[0]


def test_ceilings_reject_nonsense():
    with pytest.raises(ValueError, match="mem_bandwidth_bytes_per_s"):
        fake_ceilings(mem_bandwidth_bytes_per_s=0)
    with pytest.raises(ValueError, match="op_overhead_s"):
        fake_ceilings(op_overhead_s=float("nan"))
    with pytest.raises(ValueError, match="matmul_flops_per_s"):
        fake_ceilings(matmul_flops_per_s=True)
    with pytest.raises(TypeError):
        Ceilings.from_dict({**fake_ceilings().to_dict(), "bogus": 1})
    with pytest.raises(TypeError, match="JSON object"):
        Ceilings.from_dict([1, 2])


def test_nearest_spec_by_name_on_a_gpu_else_by_numbers():
    a100 = fake_ceilings(
        device="cuda", device_name="NVIDIA A100-SXM4-80GB", matmul_flops_per_s=19e12
    )
    assert a100.nearest_spec().mem_bytes == 80 * 2**30 and "A100" in a100.nearest_spec().name
    slow = fake_ceilings()  # a CPU is far below every GPU: the nearest is the slowest row
    assert slow.nearest_spec() is min(bl.hardware.all_specs(), key=lambda s: s.peak("fp32"))


# ----------------------------------------------------------------- rounds ---


def test_rounds_stop_once_three_agree(monkeypatch):
    seen = iter([3.0, 1.0, 1.05, 1.02, 9.0])

    class T:
        def __init__(self):
            self.median_s = next(seen)

    monkeypatch.setattr(ceilings.timing, "benchmark", lambda *a, **k: T())
    value, spread, rounds = ceilings._in_rounds(lambda: None, torch.device("cpu"), cap_s=60)
    assert rounds == 4 and value == pytest.approx(1.02) and spread == pytest.approx(0.05 / 1.02)


def test_rounds_give_up_at_the_cap_and_say_how_noisy(monkeypatch):
    seen = iter([1.0, 2.0, 1.0, 2.0, 1.0, 2.0] * 100)

    class T:
        def __init__(self):
            self.median_s = next(seen)

    clock = iter(range(1000))
    monkeypatch.setattr(ceilings.timing, "benchmark", lambda *a, **k: T())
    monkeypatch.setattr(ceilings.time, "perf_counter", lambda: float(next(clock)))
    value, spread, rounds = ceilings._in_rounds(lambda: None, torch.device("cpu"), cap_s=5)
    assert 3 <= rounds <= 10 and spread >= 0.5  # last three: 1, 2, 1 or 2, 1, 2


# ------------------------------------------------------------- the cache ---


@pytest.fixture
def fake_measure(tmp_path, monkeypatch):
    """measure_ceilings with a counting stand-in for the 10-30 s measurement, in a fresh cache."""
    monkeypatch.setenv("BRRR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceilings, "_MEMO", {})
    calls = []

    def measure(dev, name, progress, **overrides):
        calls.append(dev)
        return fake_ceilings(device=dev.type, device_name=name, **overrides)

    monkeypatch.setattr(ceilings, "_measure", measure)
    return calls


def test_measured_once_per_machine_then_read(fake_measure, tmp_path, monkeypatch):
    first = bl.measure_ceilings(progress=False)
    assert bl.measure_ceilings(progress=False) is first and len(fake_measure) == 1
    monkeypatch.setattr(ceilings, "_MEMO", {})  # a new process reads the file
    assert bl.measure_ceilings(progress=False) == first and len(fake_measure) == 1
    bl.measure_ceilings(refresh=True, progress=False)
    assert len(fake_measure) == 2
    (path,) = tmp_path.glob("ceilings-*.json")
    path.write_text("{not json")
    monkeypatch.setattr(ceilings, "_MEMO", {})
    bl.measure_ceilings(progress=False)
    assert len(fake_measure) == 3
    assert not list(tmp_path.glob("*.tmp"))  # temporary files renamed or removed


def test_a_noisy_cached_result_is_measured_again_once_and_the_quieter_kept(
    fake_measure, monkeypatch
):
    results = iter([fake_ceilings(spread={"memory": 0.5, "matmul": 0.3}, measured_at="first"),
                    fake_ceilings(spread={"memory": 0.5}, measured_at="second")])  # fmt: skip
    monkeypatch.setattr(
        ceilings, "_measure", lambda dev, name, progress: (fake_measure.append(1), next(results))[1]
    )
    first = bl.measure_ceilings(progress=False)
    assert len(fake_measure) == 1 and first.noisy and first.attempts == 1
    bl.measure_ceilings(progress=False)  # same process: not again
    assert len(fake_measure) == 1
    monkeypatch.setattr(ceilings, "_MEMO", {})  # next process: the file says noisy
    second = bl.measure_ceilings(progress=False)
    assert len(fake_measure) == 2 and second.measured_at == "second" and second.attempts == 2
    monkeypatch.setattr(ceilings, "_MEMO", {})  # a third process: two tries are enough
    assert bl.measure_ceilings(progress=False) == second and len(fake_measure) == 2


@pytest.mark.parametrize(("cached_flops_per_s", "measured_again"), [(1e3, True), (1e18, False)])
def test_a_cached_matmul_ceiling_a_same_run_probe_beats_is_measured_again(
    fake_measure, monkeypatch, cached_flops_per_s, measured_again
):
    cached = fake_ceilings(matmul_flops_per_s=cached_flops_per_s, matmul_size=64)
    monkeypatch.setattr(
        ceilings, "_measure", lambda dev, name, progress: (fake_measure.append(1), cached)[1]
    )
    bl.measure_ceilings(progress=False)
    monkeypatch.setattr(ceilings, "_MEMO", {})  # the next process reads the file and probes it
    bl.measure_ceilings(progress=False)
    assert len(fake_measure) == 1 + measured_again


def test_an_unwritable_cache_keeps_the_measurement_and_warns_once(
    fake_measure, tmp_path, monkeypatch
):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BRRR_CACHE_DIR", str(blocker))
    monkeypatch.setattr(ceilings, "_WARNED_UNWRITABLE", set())
    with pytest.warns(UserWarning, match="could not cache the ceilings.*BRRR_CACHE_DIR"):
        first = bl.measure_ceilings(progress=False)
    assert bl.measure_ceilings(progress=False) is first and len(fake_measure) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_a_read_only_cache_folder_warns(fake_measure, tmp_path, monkeypatch):
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setattr(ceilings, "_WARNED_UNWRITABLE", set())
    try:
        with pytest.warns(UserWarning, match="could not cache"):
            bl.measure_ceilings(progress=False)
    finally:
        tmp_path.chmod(stat.S_IRWXU)


def test_two_writers_never_share_a_temporary_file(fake_measure, tmp_path, monkeypatch):
    names = []
    real = _files.tempfile.mkstemp

    def spy(*a, **k):
        fd, name = real(*a, **k)
        names.append(name)
        return fd, name

    monkeypatch.setattr(_files.tempfile, "mkstemp", spy)
    path = tmp_path / "ceilings-x.json"
    ceilings._save(path, fake_ceilings())
    ceilings._save(path, fake_ceilings())
    assert len(set(names)) == 2 and json.loads(path.read_text())["device"] == "cpu"


def test_cuda_and_cuda_0_share_one_entry():
    dev = torch.device("cpu")
    assert ceilings._cache_path(dev, "x") == ceilings._cache_path(torch.device("cpu"), "x")
    if torch.cuda.is_available():
        a = bl.machine.physical(torch.device("cuda"))
        assert ceilings._cache_path(a, "g") == ceilings._cache_path(torch.device("cuda:0"), "g")


def test_measure_ceilings_validates_device():
    with pytest.raises(TypeError, match="device must be"):
        bl.measure_ceilings(3)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            bl.measure_ceilings("cuda")


# ------------------------------------------------- measure_ceilings (live) ---


def test_measured_ceilings_are_plausible(measured_ceilings):
    c = measured_ceilings
    assert c.device == bl.device().type
    assert c.torch_version == torch.__version__ and c.library_version == bl.__version__
    # wide physical bounds (a phone to a datacenter GPU), not expected values
    assert 1e9 < c.matmul_flops_per_s < 1e16
    assert 1e8 < c.vector_flops_per_s < 1e16
    assert 1e8 < c.mem_bandwidth_bytes_per_s < 1e14
    assert 1e-8 < c.op_overhead_s < 1e-3
    assert c.matmul_size >= 256 and c.copy_bytes >= 64 * 2**20
    assert math.isclose(
        c.ridge_point_flops_per_byte(), c.matmul_flops_per_s / c.mem_bandwidth_bytes_per_s
    )
    assert {"matmul", "vector", "memory", "overhead"} <= set(c.spread)
    assert all(r >= 3 for r in c.rounds.values())
    assert set(c.special_per_s) == {"exp", "tanh", "erf", "cos", "log"}
    assert all(1e6 < v < 1e15 for v in c.special_per_s.values())
    # the bandwidth is the fastest phase, the overhead the cheapest round: ceiling and floor
    assert c.mem_bandwidth_bytes_per_s == max(c.bandwidth_rounds_bytes_per_s)
    assert c.op_overhead_s == min(c.overhead_rounds_s)
    assert 0.0 <= c.steal_share <= 1.0
    assert "bf16" in c.matmul_flops_per_s_by_dtype
    assert 0 < c.cpu_share <= 1
    # No ordering between ceilings is asserted: on a busy 2-core machine a
    # competing process can slow any one of them (benchmarks/ceilings.py sets
    # them beside independent measurements instead).


def test_ceilings_are_cached_per_machine(measured_ceilings, ceilings_cache_dir, monkeypatch):
    # other tests may have cached their own (one thread's, say): this one's file is there
    path = ceilings._cache_path(bl.machine.physical(bl.device()), measured_ceilings.device_name)
    assert path.parent == ceilings_cache_dir and path.is_file()
    assert torch.__version__.split("+")[0] in path.name

    def must_not_measure(*a, **k):
        raise AssertionError("measured again despite the cache")

    monkeypatch.setattr(ceilings, "_measure", must_not_measure)
    assert bl.measure_ceilings(progress=False) == measured_ceilings


def test_rounds_that_settle_below_the_screen_keep_the_screen_and_count_as_spread():
    # busy: every round waited a scheduler slice (34 GFLOP/s) after a screen of 455
    busy = ceilings._settled(34e9, 455e9, spread=0.02, rounds=3, extra={})
    assert busy.value == 455e9 and busy.spread > 0.9  # the best seen, flagged noisy
    quiet = ceilings._settled(450e9, 430e9, spread=0.02, rounds=3, extra={})
    assert quiet.value == 450e9 and quiet.spread == 0.02  # rounds at least as fast: as before


def _stalled_matmuls(monkeypatch, peak=150e9, stall_s=8e-3):
    """Matmul kernels on a busy CPU: every call waits a scheduler slice, however small."""
    sizes = []

    def kernels(n, dtype, dev):
        sizes.append(n)
        return {"F.linear": lambda: n, "torch.mm": lambda: -n}

    monkeypatch.setattr(ceilings, "_matmul_kernels", kernels)

    def seconds(call):  # torch.mm at half F.linear's rate
        return max(stall_s, 2 * abs(call()) ** 3 / (peak if call() > 0 else peak / 2))

    monkeypatch.setattr(ceilings, "_quick_s", lambda call, dev, budget_s=0.03: seconds(call))
    monkeypatch.setattr(ceilings, "_in_rounds", lambda call, dev, cap: (seconds(call), 0.02, 3))
    return sizes


def test_a_busy_cpus_long_small_calls_do_not_end_the_matmul_screen(monkeypatch):
    # 8 ms a call at n=256 is 4.2 GFLOP/s: long enough, but it is waiting, not working
    sizes = _stalled_matmuls(monkeypatch)
    r = ceilings._matmul(torch.device("cpu"), "fp32")
    assert (
        sizes[:3] == [256, 512, 1024] and r.extra["n"] >= 1024 and r.value == pytest.approx(150e9)
    )
    assert "F.linear" in r.extra["method"].split(";")[0]


def test_a_quiet_screen_stops_once_calls_are_long_and_the_rate_is_flat(monkeypatch):
    sizes = _stalled_matmuls(monkeypatch, stall_s=0.0)
    r = ceilings._matmul(torch.device("cpu"), "fp32")
    # 256 is under 1 ms; the rate is flat from 256 on: two flat doublings end it at 1024
    assert sizes == [256, 512, 1024] and r.value == pytest.approx(150e9)


def test_a_rate_that_jumps_after_a_flat_doubling_is_followed(monkeypatch):
    _stalled_matmuls(monkeypatch, stall_s=0.0)
    jump = {256: 0.5, 512: 1.0, 1024: 1.0, 2048: 2.2, 4096: 2.2}  # bf16 on AMX, seen on a VM

    def seconds(call):
        n = abs(call())
        return 2 * n**3 / (150e9 * jump[n] * (1 if call() > 0 else 0.5))

    monkeypatch.setattr(ceilings, "_quick_s", lambda call, dev, budget_s=0.03: seconds(call))
    monkeypatch.setattr(ceilings, "_in_rounds", lambda call, dev, cap: (seconds(call), 0.02, 3))
    r = ceilings._matmul(torch.device("cpu"), "bf16")
    assert r.extra["n"] >= 2048 and r.value == pytest.approx(2.2 * 150e9)


def test_a_matmul_ceiling_below_the_vector_rate_is_measured_again_and_else_noisy(monkeypatch):
    class Phases:  # bandwidth and overhead rounds, without the 256 MiB pass
        nbytes, by_form, steal_share = 2**28, {}, 0.0

        def __init__(self, dev):
            self.bandwidth_s = []

        def round(self):
            self.bandwidth_s.append((50e9, 0.0))

        def bandwidth(self):
            return ceilings._Rounds(50e9, 0.0, 6, {"rounds": (50e9,) * 6})

        def overhead(self):
            return ceilings._Rounds(1e-6, 0.0, 6, {"rounds": (1e-6,) * 6})

    rates = iter([4.2e9, 4.2e9, 4.2e9, 150e9])  # fp32, bf16, fp16 in a busy moment; fp32 again
    monkeypatch.setattr(ceilings, "_Phases", Phases)
    monkeypatch.setattr(
        ceilings,
        "_matmul",
        lambda dev, key: ceilings._Rounds(
            next(rates), 0.0, 3, {"n": 256, "cpu_share": 1.0, "method": "m"}
        ),
    )
    monkeypatch.setattr(
        ceilings, "_vector", lambda dev: ceilings._Rounds(60e9, 0.0, 3, {"method": "v"})
    )
    monkeypatch.setattr(ceilings, "_special", lambda dev: ({"exp": 1e9}, 0.0, "s"))
    monkeypatch.setattr(ceilings, "_parallel_op", lambda dev: {})  # not this test's subject
    c = ceilings._measure(torch.device("cpu"), "test CPU", progress=False)
    assert c.matmul_flops_per_s == 150e9 and not c.noisy  # measured again, in a quiet moment
    assert fake_ceilings(matmul_flops_per_s=4.2e9, vector_flops_per_s=60e9).noisy  # still below
    assert not fake_ceilings(matmul_flops_per_s=120e9, vector_flops_per_s=60e9).noisy
    h100 = dict(device="cuda", device_name="NVIDIA H100 80GB HBM3")  # fp32 matmul < vector there
    assert not fake_ceilings(**h100, matmul_flops_per_s=51.7e12, vector_flops_per_s=61.9e12).noisy


def test_a_parallel_op_that_waits_for_another_programs_core_is_a_stall():
    # a Jupyter kernel on a 2-core VM, one other busy process: 8 ms on two threads, 23 µs on one
    stalled = fake_ceilings(num_threads=2, parallel_op_s=8e-3, parallel_op_one_thread_s=23e-6)
    assert stalled.stalls and stalled.noisy
    quiet = fake_ceilings(num_threads=2, parallel_op_s=13e-6, parallel_op_one_thread_s=23e-6)
    slow_sync = fake_ceilings(num_threads=64, parallel_op_s=60e-6, parallel_op_one_thread_s=23e-6)
    assert not quiet.stalls and not slow_sync.stalls and not fake_ceilings().stalls
    assert not quiet.noisy


@pytest.mark.skipif(torch.get_num_threads() < 2, reason="one thread: nothing is split")
def test_the_parallel_op_probe_times_both_and_puts_the_threads_back():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)  # a busy machine may have settled this process on one
        times = ceilings._parallel_op(torch.device("cpu"))
        assert times["parallel_op_s"] > 0 and times["parallel_op_one_thread_s"] > 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


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
