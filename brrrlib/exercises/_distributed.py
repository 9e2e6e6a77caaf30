"""Solvers of chapter 05's questions: bus bandwidth, all-reduce time, the data-parallel crossover."""

from brrrlib.distributed._comm_model import FLOPS_PER_PARAM_PER_SAMPLE, ring_factor
from brrrlib.exercises._bank import Context, Worked, solves
from brrrlib.hardware import link, node

__all__: list[str] = []  # the solvers register themselves with the bank


#: The node of the chapter's questions, and the link between its GPUs.
_DGX = node("DGX H100")
NVLINK = _DGX.gpu_link


def weight_bytes(ctx: Context) -> float:
    """A 7-billion-parameter model's bytes in bf16 (a step): its weights, or its gradients."""
    return ctx.note("weight_bytes", 7e9 * 2, "B")


def _nvlink(ctx: Context) -> float:
    return ctx.note(f"bl.hardware.link({NVLINK!r})", link(NVLINK).bandwidth_bytes_per_s, "B/s")


@solves("05.bus_bandwidth")
def _bus_bandwidth(ctx: Context) -> Worked:
    algbw = ctx.note("algbw", 1e9 / 10e-3, "B/s")
    factor = ctx.note("ring_factor(8)", ring_factor(8))
    slips = {"algorithm_bandwidth": 1 / factor, "divided_by_factor": 1 / factor**2}
    return Worked(algbw * factor / 1e9, slips=slips)


@solves("05.nvlink_allreduce_ms")
def _nvlink_allreduce_ms(ctx: Context) -> Worked:
    factor = ctx.note("ring_factor(8)", ring_factor(8))
    ms = factor * weight_bytes(ctx) / _nvlink(ctx) * 1e3
    return Worked(ms, slips={"no_ring_factor": 1 / factor})


@solves("05.fsdp_step_ms")
def _fsdp_step_ms(ctx: Context) -> Worked:
    one_s = ctx.note("collective_s", 7 / 8 * weight_bytes(ctx) / _nvlink(ctx), "s")
    return Worked(3 * one_s * 1e3, slips={"ddp": 2 / 3, "one_collective": 1 / 3})


@solves("05.crossover_tokens")
def _crossover_tokens(ctx: Context) -> Worked:
    nic, nvlink = link(_DGX.nic_link).bandwidth_bytes_per_s, link(NVLINK).bandwidth_bytes_per_s
    n = _DGX.nics_per_node
    nics = ctx.note(f"{n} x {_DGX.nic_link}", n * nic, "B/s")  # a ring each, at once
    busbw = ctx.note("busbw", min(nics, nvlink), "B/s")
    # per parameter per step: 6 x tokens FLOPs at the peak against 2 (ring) x 2 bytes at busbw
    tokens = 2 * 2 * ctx.peak("H100", "bf16") / (FLOPS_PER_PARAM_PER_SAMPLE * busbw)
    return Worked(tokens, slips={"one_nic": busbw / nic, "nvlink": busbw / nvlink})


@solves("05.overlap_step_ms")
def _overlap_step_ms(ctx: Context) -> Worked:
    fwd, bwd, allreduce = 10.0, 20.0, 25.0  # ms
    step = fwd + max(bwd, allreduce)
    steps = (f"{fwd:g} + max({bwd:g}, {allreduce:g}) ms",)
    slips = {"no_overlap": (fwd + bwd + allreduce) / step, "backward_alone": (fwd + bwd) / step}
    return Worked(step, steps, slips)
