"""Solvers of the questions beyond one device: bus bandwidth, all-reduce time, the data-parallel
crossover (chapter 05).
"""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.distributed._comm_model import FLOPS_PER_PARAM_PER_SAMPLE, ring_factor
from brrrlib.exercises._bank import Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

# 05.bus_bandwidth: an all-reduce of this many bytes over this many GPUs took this long.
_BUSBW_BYTES, _BUSBW_RANKS, _BUSBW_S = 1e9, 8, 10e-3
# 05.nvlink_allreduce_ms: bf16 gradients of a 7-billion-parameter model, one 8-GPU node.
_NVLINK_PARAMS, _NVLINK_RANKS, _BF16_BYTES = 7e9, 8, 2
# 05.overlap_step_ms: a step's forward and backward time and its all-reduce.
_FORWARD_MS, _BACKWARD_MS, _ALLREDUCE_MS = 10.0, 20.0, 25.0


def _link(name: str):
    from brrrlib.hardware import link

    return link(name)


@solves("05.bus_bandwidth")
def _bus_bandwidth(ctx: Context) -> Worked:
    algbw = _BUSBW_BYTES / _BUSBW_S
    factor = ring_factor(_BUSBW_RANKS)
    return Worked(
        algbw * factor / 1e9,
        (
            f"algorithm bandwidth = size / time = {_fmt.si(_BUSBW_BYTES, 'B')} / "
            f"{_fmt.seconds(_BUSBW_S)} = {_fmt.si(algbw, 'B/s')}",
            f"ring factor 2(n-1)/n for n = {_BUSBW_RANKS}: {factor:g}",
            f"bus bandwidth = algbw x factor = {_fmt.si(algbw * factor, 'B/s')}, in GB/s",
        ),
        {"algorithm_bandwidth": 1 / factor, "divided_by_factor": 1 / factor**2},
    )


@solves("05.nvlink_allreduce_ms")
def _nvlink_allreduce_ms(ctx: Context) -> Worked:
    wire = _link("NVLink 4")
    nbytes = _NVLINK_PARAMS * _BF16_BYTES
    factor = ring_factor(_NVLINK_RANKS)
    return Worked(
        factor * nbytes / wire.bandwidth_bytes_per_s * 1e3,
        (
            f"gradients: {_fmt.si(_NVLINK_PARAMS)} parameters x 2 bytes (bf16) = "
            f"{_fmt.si(nbytes, 'B')}",
            f"{wire.name}, bl.hardware.link('NVLink 4'): "
            f"{_fmt.si(wire.bandwidth_bytes_per_s, 'B/s')} each way (the sheet's "
            f"{_fmt.si(wire.sheet_bytes_per_s, 'B/s')} adds both directions)",
            f"each byte crosses a link 2(n-1)/n = {factor:g} times",
            "time = factor x bytes / bandwidth, in milliseconds",
        ),
        {"no_ring_factor": 1 / factor},
    )


@solves("05.fsdp_step_ms")
def _fsdp_step_ms(ctx: Context) -> Worked:
    wire = _link("NVLink 4")
    nbytes = _NVLINK_PARAMS * _BF16_BYTES
    half = (_NVLINK_RANKS - 1) / _NVLINK_RANKS * nbytes / wire.bandwidth_bytes_per_s
    return Worked(
        3 * half * 1e3,
        (
            f"weights and gradients: {_fmt.si(_NVLINK_PARAMS)} parameters x 2 bytes (bf16) = "
            f"{_fmt.si(nbytes, 'B')}",
            f"one all-gather or reduce-scatter over {_NVLINK_RANKS} GPUs sends (n-1)/n of it "
            f"per GPU at {_fmt.si(wire.bandwidth_bytes_per_s, 'B/s')}: {half * 1e3:.1f} ms",
            "FSDP per step: all-gather (forward), all-gather (backward), reduce-scatter: 3 of them",
        ),
        {"ddp": 2 / 3, "one_collective": 1 / 3},
    )


@solves("05.crossover_tokens")
def _crossover_tokens(ctx: Context) -> Worked:
    """Across DGX H100 nodes the all-reduce's bus bandwidth is the narrower of the node's NICs together
    and NVLink.
    """
    from brrrlib.hardware import node

    box = node("DGX H100")
    nic, nvlink = _link(box.nic_link), _link(box.gpu_link)
    nics = box.nics_per_node * nic.bandwidth_bytes_per_s
    busbw = min(nics, nvlink.bandwidth_bytes_per_s)
    flops = ctx.peak("H100", "bf16")
    per_param_bytes = 2 * _BF16_BYTES  # ring factor -> 2 for many GPUs, 2 bytes per gradient
    return Worked(
        per_param_bytes * flops / (FLOPS_PER_PARAM_PER_SAMPLE * busbw),
        (
            ctx.peak_step("H100", "bf16"),
            f"{box.name}, bl.hardware.node: {box.nics_per_node} x {nic.name} at 400 Gb/s = "
            f"{box.nics_per_node} x {_fmt.si(nic.bandwidth_bytes_per_s, 'B/s')} = "
            f"{_fmt.si(nics, 'B/s')} leave the node at once (one ring per NIC)",
            f"the other hops of each ring stay on {nvlink.name}: "
            f"{_fmt.si(nvlink.bandwidth_bytes_per_s, 'B/s')} per GPU",
            "bus bandwidth = the narrower of the two",
            "per parameter per step: compute 6 x tokens FLOPs; send 2 (ring factor) x 2 bytes",
            "equal times: 6 x tokens / peak = 4 / busbw, so tokens = 4 x peak / (6 x busbw)",
        ),
        {
            "one_nic": busbw / _link("NDR InfiniBand").bandwidth_bytes_per_s,
            "nvlink": busbw / _link("NVLink 4").bandwidth_bytes_per_s,
        },
    )


@solves("05.overlap_step_ms")
def _overlap_step_ms(ctx: Context) -> Worked:
    hidden = max(_BACKWARD_MS, _ALLREDUCE_MS)
    right = _FORWARD_MS + hidden
    return Worked(
        right,
        (
            f"without overlap: {_FORWARD_MS:g} + {_BACKWARD_MS:g} + {_ALLREDUCE_MS:g} ms",
            "the buckets' all-reduce can run during the backward pass, not during the forward pass "
            "(no gradient exists yet)",
            f"step = forward + max(backward, all-reduce) = {_FORWARD_MS:g} + {hidden:g} ms",
        ),
        {
            "no_overlap": (_FORWARD_MS + _BACKWARD_MS + _ALLREDUCE_MS) / right,
            "backward_alone": (_FORWARD_MS + _BACKWARD_MS) / right,
        },
    )
