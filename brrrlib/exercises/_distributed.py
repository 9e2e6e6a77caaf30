"""Questions beyond one device: bus bandwidth, all-reduce time, data-parallel crossover (chapter 05).

Each :class:`~brrrlib.exercises._bank.Exercise` pairs its hints with a solver
that computes the expected answer and its working from the spec tables:
devices (``bl.spec``), links (``bl.hardware.link``) and nodes
(``bl.hardware.node``). Typed-in numbers are the ones a prompt states (a
message size, a measured time).
"""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.distributed._comm_model import FLOPS_PER_PARAM_PER_SAMPLE, ring_factor
from brrrlib.exercises._bank import Context, Exercise, Question, Worked, given_peak, peak

__all__ = ["EXERCISES"]

# 05.bus_bandwidth: an all-reduce of this many bytes over this many GPUs took this long.
_BUSBW_BYTES, _BUSBW_RANKS, _BUSBW_S = 1e9, 8, 10e-3
# 05.nvlink_allreduce_ms: bf16 gradients of a 7-billion-parameter model, one 8-GPU node.
_NVLINK_PARAMS, _NVLINK_RANKS, _BF16_BYTES = 7e9, 8, 2
# 05.overlap_step_ms: a step's forward and backward time and its all-reduce.
_FORWARD_MS, _BACKWARD_MS, _ALLREDUCE_MS = 10.0, 20.0, 25.0


def _link(name: str):
    from brrrlib.hardware import link

    return link(name)


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
    )


def _nvlink_allreduce_ms(ctx: Context) -> Worked:
    wire = _link("NVLink 4")
    nbytes = _NVLINK_PARAMS * _BF16_BYTES
    factor = ring_factor(_NVLINK_RANKS)
    return Worked(
        factor * nbytes / wire.bandwidth_bytes_per_s * 1e3,
        (
            f"gradients: {_fmt.si(_NVLINK_PARAMS)} parameters x 2 bytes (bf16) = {_fmt.si(nbytes, 'B')}",
            f"{wire.name}, bl.hardware.link('NVLink 4'): {_fmt.si(wire.bandwidth_bytes_per_s, 'B/s')} "
            f"each way (the sheet's {_fmt.si(wire.sheet_bytes_per_s, 'B/s')} adds both directions)",
            f"each byte crosses a link 2(n-1)/n = {factor:g} times",
            "time = factor x bytes / bandwidth, in milliseconds",
        ),
    )


def _node_busbw(ctx: Context) -> tuple[float, list[str]]:
    """The all-reduce bus bandwidth across DGX H100 nodes: the narrower of the NICs and NVLink."""
    from brrrlib.hardware import node

    box = node("DGX H100")
    nic, nvlink = _link(box.nic_link), _link(box.gpu_link)
    nics = box.nics_per_node * nic.bandwidth_bytes_per_s
    steps = [
        f"{box.name}, bl.hardware.node: {box.nics_per_node} x {nic.name} at 400 Gb/s = "
        f"{box.nics_per_node} x {_fmt.si(nic.bandwidth_bytes_per_s, 'B/s')} = {_fmt.si(nics, 'B/s')} "
        "leave the node at once (one ring per NIC)",
        f"the other hops of each ring stay on {nvlink.name}: "
        f"{_fmt.si(nvlink.bandwidth_bytes_per_s, 'B/s')} per GPU",
        "bus bandwidth = the narrower of the two",
    ]
    return min(nics, nvlink.bandwidth_bytes_per_s), steps


def _crossover_tokens(ctx: Context) -> Worked:
    flops = peak(ctx, "H100", "bf16")
    busbw, steps = _node_busbw(ctx)
    per_param_bytes = 2 * _BF16_BYTES  # ring factor -> 2 for many GPUs, 2 bytes per gradient
    return Worked(
        per_param_bytes * flops / (FLOPS_PER_PARAM_PER_SAMPLE * busbw),
        (
            given_peak(ctx, "H100", "bf16"),
            *steps,
            "per parameter per step: compute 6 x tokens FLOPs; send 2 (ring factor) x 2 bytes",
            "equal times: 6 x tokens / peak = 4 / busbw, so tokens = 4 x peak / (6 x busbw)",
        ),
    )


def _crossover_mistakes(ctx: Context) -> dict[float, str]:
    busbw, _ = _node_busbw(ctx)
    one_nic = _link("NDR InfiniBand").bandwidth_bytes_per_s
    nvlink = _link("NVLink 4").bandwidth_bytes_per_s
    return {
        busbw / one_nic: "That is one NIC carrying a whole gradient per GPU. Inside a node the "
        "GPUs share the work over NVLink, and each ring leaves the node through "
        "its own NIC: all 8 NICs carry the all-reduce at once.",
        busbw / nvlink: "NVLink is the wider road here: what leaves the node crosses the NICs, "
        "8 of them together.",
        1 / 8: "400 Gb/s is gigabits: divide by 8 for bytes per second.",
        0.5: "Each byte crosses a link about twice in a ring all-reduce: include the factor 2.",
        3: "Training costs 6 FLOPs per parameter per token (forward 2, backward 4), not 2.",
    }


def _overlap_step_ms(ctx: Context) -> Worked:
    hidden = max(_BACKWARD_MS, _ALLREDUCE_MS)
    return Worked(
        _FORWARD_MS + hidden,
        (
            f"without overlap: {_FORWARD_MS:g} + {_BACKWARD_MS:g} + {_ALLREDUCE_MS:g} ms",
            "the buckets' all-reduce can run during the backward pass, not during the forward pass "
            "(no gradient exists yet)",
            f"step = forward + max(backward, all-reduce) = {_FORWARD_MS:g} + {hidden:g} ms",
        ),
    )


# fmt: off
EXERCISES = (
    Exercise(Question(
        "05.bus_bandwidth",
        unit="GB/s",
        hints=("First the algorithm bandwidth: size / time. Then nccl-tests' correction for an "
               "all-reduce over n ranks.",
               "busbw = algbw x 2(n-1)/n; with n = 8 the factor is 1.75."),
        explain="Bus bandwidth is what each GPU's link carried: set it beside the link's spec.",
    ), _bus_bandwidth, {
        1 / ring_factor(_BUSBW_RANKS): "That is the algorithm bandwidth (size / time): multiply by "
                                       "the ring factor 2(n-1)/n.",
        1 / ring_factor(_BUSBW_RANKS) ** 2: "The ring factor multiplies the algorithm bandwidth; "
                                            "you divided by it.",
    }),
    Exercise(Question(
        "05.nvlink_allreduce_ms",
        unit="ms",
        hints=("bl.hardware.link('NVLink 4') gives the bandwidth each way; each byte crosses a "
               "link 2(n-1)/n times.",
               "time = 2(n-1)/n x bytes / bandwidth_bytes_per_s, with n = 8."),
        explain="Tens of milliseconds per step: a step must compute at least that long to hide it.",
    ), _nvlink_allreduce_ms, {
        0.5: "You used the sheet's 900 GB/s, which adds both directions: one way is half of it.",
        1 / ring_factor(_NVLINK_RANKS): "Each byte crosses a link 2(n-1)/n times in a ring: "
                                        "multiply by that factor.",
    }),
    Exercise(Question(
        "05.crossover_tokens",
        unit="tokens",
        hints=("Per parameter: the compute is 6 x tokens FLOPs at peak FLOP/s; the communication "
               "is 2 (ring) x 2 bytes at the all-reduce's bus bandwidth. Across nodes, that "
               "bandwidth is the narrower of the node's 8 NICs together and NVLink.",
               "busbw = min(8 x bl.hardware.link('NDR').bandwidth_bytes_per_s, "
               "bl.hardware.link('NVLink 4').bandwidth_bytes_per_s); tokens = 4 x "
               "bl.spec('H100').peak('bf16') / (6 x busbw). The model's size cancels."),
        explain="Eight NICs per node bring the crossover across nodes close to the one inside a "
                "node; a node with one NIC would need eight times the tokens.",
    ), _crossover_tokens, _crossover_mistakes),
    Exercise(Question(
        "05.overlap_step_ms",
        unit="ms",
        hints=("Which part of the step can the all-reduce run beside? A gradient exists only once "
               "the backward pass has computed it.",
               "forward + max(backward, all-reduce)."),
        explain="Overlap hides communication only behind the backward pass, never the forward.",
    ), _overlap_step_ms, {
        (_FORWARD_MS + _BACKWARD_MS + _ALLREDUCE_MS) / (_FORWARD_MS + _ALLREDUCE_MS):
            "That is the step without overlap: the all-reduce runs during the backward pass.",
        (_FORWARD_MS + _BACKWARD_MS) / (_FORWARD_MS + _ALLREDUCE_MS):
            "The all-reduce (25 ms) is longer than the backward pass (20 ms): part of it shows.",
    }),
)
# fmt: on
