"""distributed: the arithmetic of collectives, the link table, local process groups and their faults.

The arithmetic (ring factor, alpha-beta fit, data-parallel crossover) is
checked against hand-computed values. Process groups are started for real
(gloo on this machine's CPU) with small jobs; their timing assertions are
orderings with wide margins (a 4 MiB all-reduce against a 4-byte one), never
absolute times. Process groups start through torch's elastic launcher.
Faults are made on purpose: a port held by this test, a worker killed with
SIGKILL mid-collective, a deadline too short to start, Ctrl-C in the caller,
the caller killed; each must give its message, keep the launcher's log lines
off stderr and leave no process.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from _fakes import fake_ceilings

import brrrlib as bl
from brrrlib import _fmt, distributed, hardware
from brrrlib.distributed import _launch  # the fault tests' endless job: no public call runs it
from brrrlib.timing import Comparison, Timing

REPO = Path(__file__).resolve().parent.parent
TORCHRUN = Path(sys.executable).with_name("torchrun")
MODES = ("compute only", "all-reduce after backward", "overlapped buckets")  # chapter 05's


def _children() -> list[psutil.Process]:
    """This test process's living descendants (zombies already reaped by the launcher excluded)."""
    kids = psutil.Process().children(recursive=True)
    return [p for p in kids if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_until(condition, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _sweep(world_size=4, alpha=100e-6, bandwidth=1e9):
    """A sweep of ``t = alpha + size / bandwidth``, each size's 6 rounds spread by 3%."""
    sizes = [4**k for k in range(1, 12)]
    spread = (0.98, 1.0, 1.03, 1.01, 0.99, 1.02)
    samples = [[(alpha + s / bandwidth) * f for f in spread] for s in sizes]
    where = {"world_size": world_size, "backend": "gloo", "hosts": ("a",) * world_size}
    return distributed.CollectiveSweep(sizes, samples, verified=True, **where)


def _fit(sizes, times, world_size=2):
    """The alpha-beta fit of a sweep whose medians are ``times``."""
    sweep = distributed.CollectiveSweep(
        sizes, [[t] for t in times], world_size=world_size, backend="gloo"
    )
    return sweep.fit


# ------------------------------------------------------------------ arithmetic


def test_bus_bandwidth_is_algorithm_bandwidth_times_two_n_minus_one_over_n():
    for n, factor in ((2, 1.0), (4, 1.5), (8, 1.75)):
        s = _sweep(world_size=n)
        assert s.busbw_bytes_per_s[-1] == pytest.approx(factor * s.algbw_bytes_per_s[-1])
        assert s.fit.bus_bytes_per_s == pytest.approx(factor * s.fit.algorithm_bytes_per_s)


def test_alpha_beta_fit_recovers_known_latency_and_bandwidth():
    alpha, beta = 50e-6, 1 / 2e9  # 50 µs and 2 GB/s
    sizes = [4**k for k in range(1, 13)]
    exact = _fit(sizes, [alpha + beta * s for s in sizes], world_size=4)
    assert exact.alpha_s == pytest.approx(alpha, rel=1e-9)
    assert exact.beta_s_per_byte == pytest.approx(beta, rel=1e-9)
    assert exact.bus_bytes_per_s == pytest.approx(1.5 * 2e9)
    assert exact.half_bandwidth_bytes == pytest.approx(alpha / beta)
    assert exact.max_relative_error < 1e-9
    # +-5% noise, alternating: the relative fit stays within 10% (alpha at the 4-byte
    # point's 0.95 x alpha, its bound); an absolute least-squares fit (numpy's polyfit)
    # gets alpha wrong by far more (31%).
    noisy = [(alpha + beta * s) * (1.05 if i % 2 else 0.95) for i, s in enumerate(sizes)]
    fit = _fit(sizes, noisy)
    assert fit.alpha_s == pytest.approx(alpha, rel=0.1)
    assert fit.beta_s_per_byte == pytest.approx(beta, rel=0.1)
    _slope, intercept = np.polyfit(sizes, noisy, 1)
    assert abs(intercept - alpha) > 5 * abs(fit.alpha_s - alpha)


# Medians of a sweep over 2 gloo processes on a busy 2-core VM (4 B to 32 MiB): the small
# messages scatter between 0.46 and 1.55 ms, and an unconstrained fit put alpha at 0.73 ms.
_BUSY_SIZES = [4**k for k in range(1, 13)] + [2**25]
_BUSY_S = [455e-6, 1.48e-3, 802e-6, 1.55e-3, 817e-6, 834e-6, 766e-6, 1.07e-3, 1.03e-3,
           1.9e-3, 5.49e-3, 21.2e-3, 40.4e-3]  # fmt: skip


def test_alpha_is_the_plateaus_median_and_one_odd_point_is_named_a_misfit():
    fit = _fit(_BUSY_SIZES, _BUSY_S)
    plateau = sorted(_BUSY_S[: fit.plateau_sizes])
    assert fit.plateau_sizes >= 5  # the small messages, 4 B up to where the bytes start to count
    assert plateau[0] < fit.alpha_s < plateau[-1]  # neither the fastest nor the slowest point
    # the large messages still decide 1/beta: within 15% of the 32 MiB algorithm bandwidth
    assert 1 / fit.beta_s_per_byte == pytest.approx(2**25 / 40.4e-3, rel=0.15)
    # the 4-byte point, 455 µs against a plateau near 0.8-1 ms, is one the model misses
    assert [size for size, _ in fit.misfits] == [4]
    # one point made 10x faster moves alpha by little: a median, not the fastest point
    odd = _fit(_BUSY_SIZES, [_BUSY_S[0] / 10, *_BUSY_S[1:]])
    assert odd.alpha_s == pytest.approx(fit.alpha_s, rel=0.25)
    # random scatter above a true line: both terms >= 0, alpha inside the scatter
    rng = random.Random(5)
    for _ in range(50):
        f = _fit(_BUSY_SIZES, [(2e-4 + s / 1e9) * (1 + 3 * rng.random()) for s in _BUSY_SIZES])
        assert 2e-4 <= f.alpha_s <= 8e-4 and f.beta_s_per_byte >= 0


def test_alpha_beta_fit_never_returns_a_negative_term():
    sizes = [1000, 10**6, 10**9]
    pure_bandwidth = _fit(sizes, [s * 1e-9 * 0.9 if s < 1e6 else s * 1e-9 for s in sizes])
    assert pure_bandwidth.alpha_s >= 0 and pure_bandwidth.beta_s_per_byte > 0
    flat = _fit(sizes, [1e-3, 0.9e-3, 0.95e-3])
    assert flat.alpha_s > 0 and flat.beta_s_per_byte >= 0
    with pytest.raises(ValueError, match="at least 2"):
        _fit([4], [1e-3])
    with pytest.raises(ValueError, match="positive"):
        _fit([4, 8], [1e-3, 0.0])


def _params(shape=distributed.DEFAULT_MODEL) -> int:
    return sum(p.numel() for p in distributed.mlp(**shape).parameters())


def test_the_chapters_six_flops_per_parameter_hold_for_its_mlp():
    shape = distributed.DEFAULT_MODEL
    model = distributed.mlp(**shape)
    x = torch.randn(16, shape["d_in"])

    def step(x):
        model.zero_grad(set_to_none=True)
        model(x).square().mean().backward()

    # 2 FLOPs per weight forward, 4 backward, less the first layer's input gradient
    counted = bl.count(step, x).flops
    assert counted == pytest.approx(16 * 6 * _params(shape), rel=0.2)
    assert counted < 16 * 6 * _params(shape)


# ------------------------------------------------------------------ the link table


def test_link_rows_have_sources_and_one_direction_bandwidths():
    rows = hardware.links()
    assert len(rows) >= 9 and all(r.source and r.bandwidth_bytes_per_s > 0 for r in rows)
    assert {r.kind for r in rows} == set(hardware.LINK_KINDS)
    nvlink4, nvlink3 = hardware.link("nvlink 4"), hardware.link("NVLink 3 (A100)")  # any case
    assert nvlink4.sheet_bytes_per_s == 900e9  # the H100 sheet's number
    assert nvlink3.bandwidth_bytes_per_s == 300e9
    assert hardware.link("ndr").bandwidth_bytes_per_s == 400e9 / 8
    assert [r.kind for r in hardware.links("storage")] == ["storage"]
    with pytest.raises(ValueError, match="closest: .*NDR InfiniBand"):
        hardware.link("NDR Infiniband 400")
    with pytest.raises(ValueError, match="kind"):
        hardware.links("wormhole")
    assert bl.spec("A100").mem_bytes == 40 * 2**30  # the device table is untouched: 40GB SXM


# ------------------------------------------------------------------ results, rendered


def _table_cells(result) -> list[str]:
    """The cells of a result's HTML table, unescaped."""
    import html

    return [
        html.unescape(c)
        for c in re.findall(r"<(?:td|th)(?: [^>]*)?>(.*?)</t[dh]>", result._repr_html_())
    ]


def test_a_results_text_and_html_show_the_same_table():
    for result in (_sweep(), _sweep().fit, _run(), distributed.node_ladder()):
        cells = _table_cells(result)
        assert len(cells) > 5 and all(cell in repr(result) for cell in cells), type(result)


def test_collective_sweep_reports_as_nccl_tests_does():
    s = _sweep()
    assert s.algbw_bytes_per_s[-1] == pytest.approx(s.sizes_bytes[-1] / s.median_s[-1])
    assert s.fit.alpha_s == pytest.approx(100e-6, rel=0.05)
    assert s.peak_busbw_bytes_per_s == max(s.busbw_bytes_per_s) == s.busbw_bytes_per_s[-1]
    assert {"busbw", "algbw", "model"} <= set(_table_cells(s))
    again = distributed.CollectiveSweep.from_dict(json.loads(json.dumps(s.to_dict())))
    assert again == s
    axes = s.plot()
    assert "bytes" in axes[0].get_xlabel() and "µs" in axes[0].get_ylabel()
    assert "GB/s" in axes[1].get_ylabel()
    with pytest.raises(ValueError, match="samples_s"):
        distributed.CollectiveSweep([4, 8], [[1e-3]], world_size=2, backend="gloo")


def test_paired_ratios_say_only_what_their_interval_allows():
    base = [1.0, 1.1, 0.9, 1.0, 1.2, 0.95, 1.05, 1.0, 1.1, 0.9]
    spread = [1.5, 3.0, 2.0, 4.0, 1.2, 2.5, 3.5, 1.8, 2.2, 2.8]
    mixed = [0.5, 1.5, 0.8, 1.3, 0.7, 1.4, 0.9, 1.2, 0.6, 1.1]
    cases = [([2 * x for x in base], base, "slower", True), (spread, [1.0] * 10, "slower", False),
             (mixed, [1.0] * 10, "can't tell", False)]  # fmt: skip
    for a_s, b_s, direction, narrow in cases:
        # the same rounds as bl.compare would hold them: 8 B's time over 4 B's, round by round
        c = Comparison(a=Timing(b_s, ""), b=Timing(a_s, "", label="8 B"), ratios=tuple(
            a / b for a, b in zip(a_s, b_s, strict=True)))  # fmt: skip
        assert (c.direction, c.narrow) == (direction, narrow)
        sweep = distributed.CollectiveSweep([4, 8], [b_s, a_s], world_size=2, backend="gloo")
        assert sweep.time_ratio(8, 4) == c.says()  # one way of saying a ratio, everywhere
    s = _sweep()
    assert s.time_ratio(s.sizes_bytes[-1], 4).startswith("x")  # 6 rounds, 3% spread: decided
    with pytest.raises(ValueError, match="size_a"):
        s.time_ratio(3, 4)


def _run(compute_per_sample_s=1e-4, comm_s=4e-3, rounds=8):
    batches = (4, 16, 64, 256)
    samples = {
        MODES[0]: [[b * compute_per_sample_s] * rounds for b in batches],
        MODES[1]: [[b * compute_per_sample_s + comm_s] * rounds for b in batches],
        MODES[2]: [[max(b * compute_per_sample_s, comm_s)] * rounds for b in batches],
    }
    return distributed.DataParallelRun(
        batches, samples, [comm_s] * rounds, _params(), 4 * _params(), distributed.DEFAULT_MODEL,
        world_size=2, backend="gloo",
        buckets={MODES[1]: 1, MODES[2]: 4},
    )  # fmt: skip


def test_data_parallel_run_finds_the_crossover_batch():
    run = _run()  # compute 0.1 ms per sample, all-reduce 4 ms: equal at batch 40
    assert run.modes == MODES and run.comm_s == 4e-3
    assert run.measured_crossover_batch == pytest.approx(40)
    assert run.exposed_comm_s(MODES[1]) == pytest.approx((4e-3,) * 4)
    assert _run(comm_s=1e-5).measured_crossover_batch is None  # below the batches measured
    # batch 4, overlapped over after backward: 4 ms / 4.4 ms in every round, an exact x0.91
    says = run.ratio_says(MODES[2])[0]
    assert says.startswith("x0.91") and says.count("x0.91") == 3  # the ratio and its interval
    with pytest.raises(ValueError, match="mode"):
        run.step_s("pipelined")
    xlabel = run.plot(predicted_crossover=50).get_xlabel()
    assert "batch" in xlabel and "(samples)" in xlabel
    assert distributed.DataParallelRun.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_message_size_explorer_says_which_term_dominates():
    sweep = _sweep(alpha=100e-6, bandwidth=1e9)
    ex = distributed.message_size_explorer(sweep)
    ex.set(16)
    assert "latency-bound" in ex.readout and "EXTRAPOLATED" not in ex.readout
    ex.set(2**30)
    assert "bandwidth-bound" in ex.readout and "EXTRAPOLATED" in ex.readout
    assert ex.nbytes == 2**30
    ex._slider.value = 10  # what dragging the slider does (the widget's own control)
    measured = sweep.median_s[sweep.sizes_bytes.index(1024)]
    assert ex.nbytes == 1024 and _fmt.seconds(measured) in ex.readout  # the measured time too
    # a viewer without widgets (the static site, an exported page) gets the plot and the words
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"])[:4] == b"\x89PNG"
    assert ex.readout in bundle["text/plain"]
    with pytest.raises(ValueError, match="nbytes"):
        ex.set(-1)
    with pytest.raises(TypeError, match="all_reduce_sweep"):
        distributed.message_size_explorer("not a sweep")


# ------------------------------------------------------------------ the ladder and the host rungs


def test_a_ladder_holds_one_machine_widest_first():
    here = distributed.bandwidth_ladder(fake_ceilings(), measure_cache=False, sweep=_sweep())
    assert all(r.how == "measured" for r in here.rungs)  # no spec row among this machine's
    widths = [r.bandwidth_bytes_per_s for r in here.rungs]
    assert widths == sorted(widths, reverse=True)
    assert here.get("DRAM").bandwidth_bytes_per_s == 20e9
    # measured forms: the DRAM rung is the copy into another tensor, the cache rung's pattern
    forms = {"copy_": 12e9, "add_ (in place)": 20e9}
    copies = fake_ceilings(bandwidth_by_form_bytes_per_s=forms)
    dram = distributed.bandwidth_ladder(copies, measure_cache=False).get("DRAM")
    assert dram.bandwidth_bytes_per_s == 12e9
    busbw = here.get("all-reduce busbw")
    assert busbw.bandwidth_bytes_per_s == _sweep().peak_busbw_bytes_per_s
    node = distributed.node_ladder("DGX H100")
    assert all(r.how == "spec" for r in node.rungs)
    # HBM > NVLink > PCIe 5 > one NDR NIC > an NVMe drive
    levels = ["memory", "device-device", "host-device", "node-node", "storage"]
    assert [r.level for r in node.rungs] == levels and "HBM" in node.rungs[0].name
    links = [hardware.link("nvlink4"), hardware.host_link("H100"), hardware.link("ndr")]
    assert [r.name for r in node.rungs[1:4]] == [link.name for link in links]
    assert node.get("NDR").bandwidth_bytes_per_s == 50e9 and "ConnectX-7" in node.get("NDR").source
    with pytest.raises(ValueError, match="NVLink"):
        node.get("carrier pigeon")
    top, bottom = distributed.plot_ladders(here, node)
    assert "GB/s" in bottom.get_xlabel() and top.get_xlim() == bottom.get_xlim()
    assert top.get_xlim()[0] < 20 / 2 and top.get_xlim()[1] > 3350  # both ladders fit
    cache = distributed.bandwidth_ladder().get("cache")  # measured: a copy that stays in cache
    assert cache.how == "measured" and cache.level == "cache" and cache.source == "bl.benchmark"
    with pytest.raises(ValueError, match="nothing to put"):
        distributed.bandwidth_ladder(measure_cache=False)


def test_disk_read_drops_the_page_cache_and_deletes_its_file(tmp_path):
    disk = distributed.measure_disk_read(2**21, directory=str(tmp_path), repeats=3)
    assert len(disk.samples_s) == 3
    assert disk.evicted == hasattr(os, "posix_fadvise")
    assert list(tmp_path.iterdir()) == []
    slow, fast = disk.quartile_bytes_per_s
    assert slow <= disk.bytes_per_s <= fast
    with pytest.raises(ValueError, match="nbytes"):
        distributed.measure_disk_read(10)
    with pytest.raises(ValueError, match="directory"):
        distributed.measure_disk_read(2**21, directory=str(tmp_path / "missing"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CPU-only machine has nothing to copy to")
def test_host_device_copies_without_a_gpu_say_what_to_do_instead():
    with pytest.raises(RuntimeError, match="host link"):
        distributed.host_device_copies(2**26)
    with pytest.raises(ValueError, match="nbytes"):
        distributed.host_device_copies(10)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux says which cores")
def test_cores_decide_how_many_processes_are_measured():
    cores = len(os.sched_getaffinity(0))
    assert distributed.local_world_sizes() == ((2, 4) if cores >= 4 else (2,))
    assert distributed.cores_note(cores) == ""
    note = distributed.cores_note(cores + 2)
    assert re.findall(r"\d+", note)[:3] == [
        str(cores + 2),
        str(cores),
        "2",
    ]  # processes, cores, waiting


# ------------------------------------------------------------------ exercises


def _question(qid):
    return {q.id: q for q in bl.exercises.questions()}[qid]


def test_chapter_05_exercises_check_against_the_tables(capsys):
    assert bl.check("05.bus_bandwidth", 175) is True
    assert bl.check("05.bus_bandwidth", 100) is False
    assert _question("05.bus_bandwidth").judge(100).slip == "algorithm_bandwidth"
    nvlink_ms = 1.75 * 14e9 / hardware.link("NVLink 4").bandwidth_bytes_per_s * 1e3
    assert bl.check("05.nvlink_allreduce_ms", nvlink_ms)
    # across DGX H100 nodes: 8 NICs of 50 GB/s together (400 GB/s) are narrower than NVLink 4
    tokens = 4 * bl.spec("H100").peak("bf16") / (6 * 8 * 50e9)
    assert 1600 < tokens < 1700
    assert bl.check("05.crossover_tokens", tokens)
    assert not bl.check("05.crossover_tokens", tokens / 8)
    assert _question("05.crossover_tokens").judge(tokens / 8).slip == "0.125"  # gigabits
    assert not bl.check("05.crossover_tokens", 8 * tokens)  # one NIC per GPU: the old model
    assert _question("05.crossover_tokens").judge(8 * tokens).slip == "one_nic"
    capsys.readouterr()
    assert bl.check("05.overlap_step_ms", 35)
    assert not bl.check("05.overlap_step_ms", None)
    bl.hint("05.overlap_step_ms", level=2)
    assert _question("05.overlap_step_ms").hints[1] in capsys.readouterr().out
    with pytest.raises(ValueError, match="05.bus_bandwidth"):
        bl.check("05.nope", 1)


# ------------------------------------------------------------------ bad input, before anything starts


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"world_size": 1}, "world_size must be a whole number from 2"),
        ({"world_size": "2"}, "world_size"),
        ({"sizes_bytes": [0, 4]}, "sizes_bytes"),
        ({"sizes_bytes": 1024}, "sizes_bytes"),
        ({"sizes_bytes": [2**42]}, r"max\(sizes_bytes\)"),  # more than any memory
        ({"backend": "mpi"}, "backend must be"),
        ({"port": 70000}, "port"),
        ({"budget_s": -1}, "budget_s"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_bad_arguments_are_refused_with_the_argument_named(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        distributed.all_reduce_sweep(**kwargs)
    assert not _children()


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="this machine can run nccl")
def test_nccl_without_gpus_says_what_to_use_instead():
    with pytest.raises(ValueError, match="backend='gloo'"):
        distributed.all_reduce_sweep(backend="nccl")


def test_bad_data_parallel_arguments():
    with pytest.raises(ValueError, match="batches"):
        distributed.data_parallel_steps(batches=[0])
    with pytest.raises(ValueError, match="batches"):
        distributed.data_parallel_steps(batches=[True, 4])


# ------------------------------------------------------------------ real process groups


def test_all_reduce_sweep_over_two_local_processes():
    sweep = distributed.all_reduce_sweep([4, 16 * 2**20], budget_s=0.3, timeout_s=120)
    assert sweep.world_size == 2 and sweep.backend == "gloo" and sweep.verified
    assert sweep.launcher == distributed.CollectiveSweep.launcher  # the default: local
    assert sweep.hosts == (socket.gethostname(),) * 2
    assert sweep.sizes_bytes == (4, 16 * 2**20)
    assert all(len(row) >= 5 for row in sweep.samples_s)
    assert sweep.calls_per_sample[0] >= sweep.calls_per_sample[1]  # small messages: more per block
    small, large = sweep.median_s
    assert large > 3 * small  # 4 million times the bytes: far longer, however busy the machine
    assert sweep.busbw_bytes_per_s == sweep.algbw_bytes_per_s  # n = 2: the ring factor is 1
    assert not _children()


def test_data_parallel_steps_over_two_local_processes():
    run = distributed.data_parallel_steps([4, 256], budget_s=0.5, timeout_s=150)
    assert run.modes == MODES and run.batches == (4, 256) and run.verified
    assert all(len(r) >= 6 for rows in run.samples_s.values() for r in rows)
    compute = run.compute_s
    assert compute[1] > 3 * compute[0]  # 64x the samples
    assert run.step_s(MODES[1])[0] > compute[0]  # the all-reduce of 3 MiB is not free
    assert run.buckets[MODES[1]] in (0, 1) and run.buckets[MODES[2]] != 1
    assert not _children()


def test_torchrun_runs_the_same_benchmark(tmp_path):
    out = tmp_path / "ar.json"
    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node=2", f"--log-dir={tmp_path / 'logs'}",
           "-m", "brrrlib.distributed", "all-reduce", "--sizes", "4,1M", "--budget-s", "0.3",
           "--timeout-s", "120", "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    sweep = distributed.load(out)
    assert sweep.launcher == "torchrun" and sweep.world_size == 2 and sweep.verified
    assert sweep.sizes_bytes == (4, 2**20) and "busbw" in done.stdout
    with pytest.raises(ValueError, match="holds no"):
        (tmp_path / "other.json").write_text("[1, 2]")
        distributed.load(tmp_path / "other.json")


def test_the_module_outside_torchrun_says_how_to_start_it(monkeypatch, capsys):
    monkeypatch.delenv("RANK", raising=False)
    assert distributed.main(["all-reduce"]) == 2
    assert "torchrun --standalone --nproc-per-node=2" in capsys.readouterr().err


# ------------------------------------------------------------------ faults

# Quietness: torch's launcher logs "Sending process ... closing signal SIGTERM" and the like
# to stderr, which a notebook paints pink; none of it may reach the caller.
_LAUNCHER_NOISE = re.compile(r"torch/distributed/elastic|closing signal|ChildFailedError")


def _job(**overrides):
    """A job that runs until stopped (a million rounds of a 4 MiB all-reduce)."""
    job = {"kind": "all_reduce", "sizes_bytes": [4 * 2**20], "min_rounds": 10**6,
           "max_rounds": 10**6, "backend": "gloo", "threads": 1, "budget_s": 600.0,
           "group_timeout_s": 10.0, "launcher": "elastic_launch"}  # fmt: skip
    job.update(overrides)
    return job


def _workers(parent: int | None = None) -> dict[int, psutil.Process]:
    """The benchmark's worker processes under ``parent`` (default: this process), by rank."""
    found = {}
    for p in psutil.Process(parent).children(recursive=True):
        with contextlib.suppress(psutil.Error):  # a process that ended while being read
            if "_collectives_worker" in " ".join(p.cmdline()):
                found[int(p.environ()["RANK"])] = p
    return found


def _running(parent: int | None = None, world_size: int = 2) -> dict[int, psutil.Process]:
    """The workers under ``parent`` once every one says it is timing rounds (90 s at most)."""

    def status(p: psutil.Process) -> str:  # what the worker said last, in the launcher's log
        folder = Path(p.cmdline()[-1]).parent  # python -c CODE FOLDER/job.json
        logs = folder.glob(f"logs/*/attempt_0/{p.environ()['LOCAL_RANK']}/stderr.log")
        return "".join(log.read_text() for log in logs)

    def ready() -> bool:
        with contextlib.suppress(psutil.Error):
            found = _workers(parent)
            return len(found) == world_size and all("round" in status(p) for p in found.values())
        return False

    assert _wait_until(ready, 90), "the workers never started their rounds"
    return _workers(parent)


def test_a_port_in_use_is_refused_before_starting(capfd):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(distributed.PortInUse, match=f"port={port}"):
            distributed.all_reduce_sweep([4], port=port)
    assert not _children()
    assert not _LAUNCHER_NOISE.search(capfd.readouterr().err)


def test_a_worker_killed_mid_collective_stops_the_group_with_a_clear_message(capfd):
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    killed = []

    def kill_rank_1():
        workers = _running()
        killed.extend(p.pid for p in workers.values())
        os.kill(workers[1].pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_rank_1, daemon=True)
    killer.start()
    with pytest.raises(distributed.WorkerDied) as err:
        _launch.run(_job(), 2, timeout_s=120, port=None)
    killer.join()
    text = str(err.value)
    rank = re.search(r"rank (\d+)", text)
    assert rank and int(rank[1]) == 1 and "SIGKILL" in text and "round" in text
    assert "stopped" in text
    assert all(_gone(pid) for pid in killed) and not _children()
    assert not _LAUNCHER_NOISE.search(capfd.readouterr().err)
    # the launcher's signal handlers are gone again: Ctrl-C is the caller's own
    assert {s: signal.getsignal(s) for s in handlers} == handlers


def test_a_worker_that_raises_is_named_with_its_error():
    with pytest.raises(distributed.WorkerDied, match=r"rank \d .*exitcode=1(.|\n)*KeyError"):
        _launch.run(_job(kind="all_gather"), 2, timeout_s=120, port=None)  # no such job
    assert not _children()


def test_a_timeout_stops_every_process():
    start = time.monotonic()
    with pytest.raises(distributed.GroupTimeout, match=r"timeout_s=0.5") as err:
        distributed.all_reduce_sweep([4], timeout_s=0.5)
    assert isinstance(err.value, TimeoutError)
    assert time.monotonic() - start < 15  # the workers' start (importing torch), then the stop
    assert not _children()


# A caller that starts 2 ranks through the launcher and waits (a notebook's kernel, say).
_CALLER = f"""
from brrrlib.distributed import _launch  # the fault tests' job runs until stopped: no public call does
_launch.run({_job()!r}, 2, timeout_s=300, port=None)
"""


def _caller() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _CALLER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_ctrl_c_in_the_caller_stops_every_worker():
    caller = _caller()
    try:
        pids = [p.pid for p in _running(caller.pid).values()]
        caller.send_signal(signal.SIGINT)  # what Kernel > Interrupt sends
        _out, err = caller.communicate(timeout=30)
    finally:
        caller.kill()
    assert caller.returncode != 0 and err.rstrip().endswith("KeyboardInterrupt")
    assert not _LAUNCHER_NOISE.search(err), err[-2000:]
    assert _wait_until(lambda: all(_gone(p) for p in pids), 5), "a worker outlived Ctrl-C"


def test_workers_end_themselves_when_their_caller_is_killed():
    caller = _caller()
    workers: dict[int, psutil.Process] = {}
    try:
        workers = _running(caller.pid)
        folder = Path(workers[0].cmdline()[-1]).parent  # python -c CODE FOLDER/job.json
        caller.kill()  # no launcher left to stop them: only the workers' watchdogs
        caller.wait()
        gone = _wait_until(lambda: all(_gone(p.pid) for p in workers.values()), 15)
        assert gone, "workers outlived their caller"
        shutil.rmtree(folder)  # the killed caller could not
    finally:
        caller.kill()
        for p in workers.values():
            with contextlib.suppress(psutil.Error):
                p.kill()
