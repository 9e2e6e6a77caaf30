"""Solvers of chapter 05's questions: bus bandwidth, all-reduce time, the data-parallel crossover."""

from brrrlib.distributed._comm_model import FLOPS_PER_PARAM_PER_SAMPLE, ring_factor
from brrrlib.exercises._bank import Context, Worked, solves
from brrrlib.hardware import link, node

__all__: list[str] = []  # the solvers register themselves with the bank


def _gradient_bytes(ctx: Context) -> float:
    return ctx.note("7e9 parameters x 2 bytes (bf16)", 7e9 * 2, "B")


def _nvlink(ctx: Context) -> float:
    label = "bl.hardware.link('NVLink 4'), each way (the sheet adds both)"
    return ctx.note(label, link("NVLink 4").bandwidth_bytes_per_s, "B/s")


@solves("05.bus_bandwidth")
def _bus_bandwidth(ctx: Context) -> Worked:
    algbw = ctx.note("algorithm bandwidth = 1 GB / 10 ms", 1e9 / 10e-3, "B/s")
    factor = ctx.note("ring factor 2(n-1)/n, n = 8", ring_factor(8))
    slips = {"algorithm_bandwidth": 1 / factor, "divided_by_factor": 1 / factor**2}
    return Worked(algbw * factor / 1e9, ("busbw = algbw x factor, in GB/s",), slips)


@solves("05.nvlink_allreduce_ms")
def _nvlink_allreduce_ms(ctx: Context) -> Worked:
    factor = ctx.note("each byte crosses a link 2(n-1)/n times, n = 8", ring_factor(8))
    ms = factor * _gradient_bytes(ctx) / _nvlink(ctx) * 1e3
    return Worked(ms, slips={"no_ring_factor": 1 / factor})


@solves("05.fsdp_step_ms")
def _fsdp_step_ms(ctx: Context) -> Worked:
    one_s = 7 / 8 * _gradient_bytes(ctx) / _nvlink(ctx)
    ctx.note("an all-gather or reduce-scatter sends (n-1)/n of it, n = 8", one_s, "s")
    steps = ("per step: all-gather (forward), all-gather (backward), reduce-scatter",)
    return Worked(3 * one_s * 1e3, steps, {"ddp": 2 / 3, "one_collective": 1 / 3})


@solves("05.crossover_tokens")
def _crossover_tokens(ctx: Context) -> Worked:
    box = node("DGX H100")
    nic, nvlink = link(box.nic_link).bandwidth_bytes_per_s, link(box.gpu_link).bandwidth_bytes_per_s
    n = box.nics_per_node
    nics = ctx.note(f"{n} NICs leave the node at once (a ring each)", n * nic, "B/s")
    busbw = ctx.note(f"busbw: the narrower of them and {box.gpu_link}", min(nics, nvlink), "B/s")
    # per parameter per step: 6 x tokens FLOPs at the peak against 2 (ring) x 2 bytes at busbw
    tokens = 2 * 2 * ctx.peak("H100", "bf16") / (FLOPS_PER_PARAM_PER_SAMPLE * busbw)
    steps = ("6 x tokens / peak = 2 x 2 bytes / busbw",)
    return Worked(tokens, steps, {"one_nic": busbw / nic, "nvlink": busbw / nvlink})


@solves("05.overlap_step_ms")
def _overlap_step_ms(ctx: Context) -> Worked:
    fwd, bwd, allreduce = 10.0, 20.0, 25.0  # ms
    step = fwd + max(bwd, allreduce)
    steps = (f"without overlap: {fwd:g} + {bwd:g} + {allreduce:g} ms",)
    slips = {"no_overlap": (fwd + bwd + allreduce) / step, "backward_alone": (fwd + bwd) / step}
    return Worked(step, steps, slips)
