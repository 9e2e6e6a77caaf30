"""A model zoo: real architectures in plain PyTorch, each at two sizes, counted by hand.

``bl.count`` and ``bl.diagnose`` are meant for the models you train, not only
for the course's own workloads. The zoo is the proof: three architectures
people run (a ResNet-50, a ViT-Ti/16 and a Llama-style decoder, in prefill
and in decode), each with its FLOPs written out by hand and the regime it
should be in::

    from brrrlib import zoo

    e = zoo.entry("llama_decode", "big")
    fn, args = e.factory()            # the model in eval mode, called under torch.no_grad
    bl.count(fn, *args).flops         # == e.hand_flops
    bl.diagnose(fn, *args)            # expected on a laptop CPU: e.expected_cpu
    e.prediction("H100")              # what the roofline predicts there, and why

**Your own model** joins the same way: a :class:`Row` says how to build it,
how to count it by hand (a :class:`Tally`, op by op) and what regime to
expect; ``ZooEntry.from_row(row)`` makes it an entry. So the repository's
``benchmarks/zoo_more`` adds ten workloads from nine more architectures (a
GPT-2-style decoder in prefill and in decode; a BERT-style encoder, an
MLP-Mixer, a U-Net, an LSTM, a DLRM-style recommender, a graph network, a
mixture of experts, an MLP), and the tests hold all fourteen to ``bl.count``.

**Two sizes.** ``"tiny"``: a few kilobytes of work per op, so each op's fixed
cost (Python, module calls, dispatch) is the time: overhead-bound on any
machine. ``"big"``: sized so one call takes 5-200 ms on a 2-core laptop CPU,
where the work itself sets the pace.

**Hand counts** (:mod:`brrrlib.zoo._tally`) walk each model's ``forward`` with
the counter's conventions: ``2*M*K*N`` per matmul, one FLOP per element of an
elementwise op, 7 per element of a layer or batch norm, 5 of a softmax, none
for indexing or copies; bytes as the unfused eager run moves them. Each
workload's formula is the first line of its count's docstring (``formula``).

**Expected regimes.** On a CPU: tiny ones overhead; big ones by the roofline
with a wide margin (the ResNet, the ViT and prefill sit at 19-27 FLOP/byte,
far above a CPU's ridge of a few FLOP/byte; decode at 0.5, far below it). On
an A100 and an H100 the roofline (``bl.spec``) predicts from the hand counts
alone, at the model's own precision: intensity against the ridge point. LLM
decode is the classic memory-bound case (every weight read for 2 FLOPs per
token), prefill the compute-bound one. A roofline knows nothing of launches:
where its floor is below a microsecond per op, the reason says that overhead,
not the roofline, will set the time.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _fmt
from brrrlib.zoo import _rows
from brrrlib.zoo._rows import Row
from brrrlib.zoo._tally import HandCount, Tally

__all__ = ["HandCount", "Row", "Tally", "ZooEntry", "entry", "names"]

SIZES = ("tiny", "big")
GPUS = ("A100", "H100")
_ITEMSIZE = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
#: A roofline floor below this per op means launches, not the roofline, set a GPU's time:
#: the H100 recorded with the course (brrrlib/recordings) paid 7.4 µs per tiny op.
_LAUNCH_BOUND_S_PER_OP = 1e-6


@dataclass(frozen=True)
class Prediction:
    """What the roofline predicts for a workload on a spec-sheet device, from hand counts alone.

    ``regime`` is ``"compute"`` when the intensity reaches the ridge point of
    the precision (``peak / bandwidth``), else ``"memory"``; ``floor_s`` is the
    roofline's least time, ``max(FLOPs / peak, bytes / bandwidth)``;
    ``launch_bound`` that this floor is under a microsecond per op, less than
    one kernel launch costs: on the real device overhead will set the time.
    """

    device: str
    precision: str
    intensity_flops_per_byte: float
    ridge_flops_per_byte: float
    floor_s: float
    regime: str
    launch_bound: bool
    reason: str


@dataclass(frozen=True)
class ZooEntry:
    """One workload of the zoo at one size: how to build it, its hand count, its regimes.

    ``factory()`` returns ``(fn, args)``: ``fn(*args)`` runs the model
    (seeded weights, eval mode, ``torch.no_grad``) on CPU tensors whose first
    dimension is the batch, so ``bl.diagnose``'s batch probe can double it;
    ``factory(device="cuda")`` builds the same on another device (the model
    and every tensor of ``args``, nested ones such as a KV cache included).
    ``hand`` is the hand count (FLOPs, bytes by kind, ops that do work),
    ``formula`` its FLOP formula; ``expected_cpu`` the regime on a laptop CPU
    and ``cpu_reason`` why; ``predictions`` the roofline's regime on each of
    :data:`GPUS` at ``precision``. :meth:`from_row` makes one from a :class:`Row`.
    """

    name: str
    size: str
    summary: str
    factory: Callable[[], tuple[Callable[..., Any], tuple]]
    hand: HandCount
    formula: str
    expected_cpu: str
    cpu_reason: str
    predictions: tuple[Prediction, ...]
    precision: str = "fp32"

    @property
    def label(self) -> str:
        """``"name/size"``, e.g. ``"llama_decode/big"``."""
        return f"{self.name}/{self.size}"

    @property
    def hand_flops(self) -> int:
        """FLOPs of one call, counted by hand."""
        return self.hand.flops

    @property
    def hand_bytes(self) -> int:
        """Bytes one call moves (unfused eager), counted by hand."""
        return self.hand.bytes_moved

    @classmethod
    def from_row(cls, row: Row) -> ZooEntry:
        """The entry of ``row``: its hand count taken, the CPU reason filled in, the
        roofline's predictions made (nothing is built until ``factory()``)."""
        hand = row.count()
        return cls(
            name=row.name,
            size=row.size,
            summary=row.summary,
            factory=functools.partial(_build, row.build, f"{row.name}_{row.size}"),
            hand=hand,
            formula=inspect.getdoc(row.formula_of).splitlines()[0],
            expected_cpu=row.expected_cpu,
            cpu_reason=row.cpu_reason.format(intensity=f"{hand.intensity_flops_per_byte:.2g}")
            or _tiny_reason(hand),
            predictions=tuple(predict(hand, gpu) for gpu in GPUS),
        )

    def prediction(self, gpu: str) -> Prediction:
        """The stored prediction for ``gpu`` (``"A100"`` or ``"H100"``)."""
        for p in self.predictions:
            if p.device.lower().startswith(gpu.lower()):
                return p
        raise KeyError(f"no prediction for {gpu!r}; the zoo predicts for {', '.join(GPUS)}")

    def __repr__(self) -> str:
        gpus = ", ".join(f"{g} {p.regime}" for g, p in zip(GPUS, self.predictions, strict=True))
        return (
            f"ZooEntry({self.label}: {self.summary}; {_fmt.si(self.hand_flops, 'FLOP')}, "
            f"{_fmt.si(self.hand_bytes, 'B')}; CPU {self.expected_cpu}; {gpus})"
        )


def predict(hand: HandCount, gpu: str, precision: str = "fp32") -> Prediction:
    """The roofline's regime for a hand count on spec-sheet device ``gpu`` (``bl.spec(gpu)``).

    Pure arithmetic: the FLOPs over the bytes the count moves at
    ``precision`` (bf16 halves every floating-point byte), against the
    device's ridge point for that precision.
    """
    import brrrlib
    from brrrlib import roofline

    spec = brrrlib.spec(gpu)
    peak, bandwidth = spec.peak(precision), spec.mem_bandwidth_bytes_per_s
    nbytes = hand.bytes_at(_ITEMSIZE[precision])
    intensity = roofline.arithmetic_intensity(hand.flops, nbytes)
    ridge = roofline.ridge_point(peak, bandwidth)
    regime = roofline.regime(intensity, peak, bandwidth)
    floor_s = roofline.lower_bound_s(hand.flops, nbytes, peak, bandwidth)
    kind, fraction = hand.largest_kind()
    reason = (
        f"{intensity:.3g} FLOP/B {'>=' if regime == 'compute' else '<'} {ridge:.3g}, the "
        f"{precision} ridge of the {spec.name}; {kind.replace('_', ' ')} are {fraction:.0%} of "
        "the bytes"
    )
    launch_bound = floor_s < _LAUNCH_BOUND_S_PER_OP * hand.work_ops
    if launch_bound:
        reason += (
            f"; its floor, {_fmt.seconds(floor_s)} for {hand.work_ops} ops, is below one "
            "launch per op: overhead will set its time"
        )
    return Prediction(spec.name, precision, intensity, ridge, floor_s, regime, launch_bound, reason)


# ----------------------------------------------------------------------------- the zoo


@functools.cache
def entries() -> tuple[ZooEntry, ...]:
    """Every entry, workload by workload, tiny before big (nothing is built until ``factory()``)."""
    return tuple(ZooEntry.from_row(row) for row in _rows.rows())


def names() -> tuple[str, ...]:
    """The workloads' names, in zoo order."""
    return tuple(dict.fromkeys(e.name for e in entries()))


def entry(name: str, size: str = "big") -> ZooEntry:
    """The entry for workload ``name`` at ``size`` (``"tiny"`` or ``"big"``)."""
    for e in entries():
        if e.name == name and e.size == size:
            return e
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    raise KeyError(f"no zoo workload {name!r}; the zoo has {', '.join(names())}")


def _tiny_reason(hand: HandCount) -> str:
    per_op = hand.bytes_moved / max(hand.work_ops, 1)
    return (
        f"{hand.work_ops} ops moving {_fmt.si(per_op, 'B')} each on average: each op's fixed "
        "cost (Python, module calls, dispatch) outweighs its work"
    )


def _build(
    build: Callable[[], tuple], name: str, device: str | torch.device | None = None
) -> tuple[Callable[..., Any], tuple]:
    """The model and its inputs, seeded, on ``device`` (default CPU); the model in eval mode
    and called under no_grad."""
    with torch.random.fork_rng(devices=[]):  # the same weights every time; global RNG untouched
        torch.manual_seed(0)
        model, args = build()
    model.eval().requires_grad_(False)
    if device is not None:
        from torch.utils._pytree import tree_map

        model.to(device)
        args = tree_map(lambda a: a.to(device) if isinstance(a, torch.Tensor) else a, args)

    def fn(*inputs: Any) -> Any:
        with torch.no_grad():
            return model(*inputs)

    fn.__name__ = fn.__qualname__ = name
    fn.model = model  # type: ignore[attr-defined]
    return fn, args
