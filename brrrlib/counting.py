"""Count the FLOPs and the bytes a function moves, one aten op at a time."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from brrrlib import _aten_ops, _checks, _touched
from brrrlib._aten_ops import CATEGORIES, FLOPS_PER_ELEMENT, categorize  # noqa: F401 (its FLOPs)
from brrrlib._counts import CategoryTimes, Counts, OpCount
from brrrlib._touched import tensors as _tensors

__all__ = ["CategoryTimes", "Counts", "OpCount", "count", "saved_bytes"]


def op_cost(func: torch._ops.OpOverload, args: tuple, kwargs: dict, out: Any) -> tuple:
    """The one cost rule: (op, category, precision, special function), (FLOPs, bytes, specials, written)."""
    name = func._schema.name
    base = name.split("::", 1)[1]
    category = categorize(func)
    if func.is_view or base in _aten_ops.EXTRA_VIEWS or base in _aten_ops.ALLOCATIONS:
        return (name, category, "", ""), (0, 0, 0, 0)  # an alias or fresh memory: no data moves
    rule = _touched.TOUCHED_BYTES.get(base)
    if rule is not None:  # the op touches part of a tensor (a lookup, a scatter)
        read_bytes, written_bytes = rule(args, out)
        written = _tensors(out)
    else:
        read, written = _read_and_written(func, base, args, kwargs, out)
        read_bytes, written_bytes = (sum(map(_touched.tensor_bytes, ts)) for ts in (read, written))
    flops = _flops(category, name, base, args, kwargs, out, written)
    precision = _precision(base, category, args, out) if flops else ""
    function = _aten_ops.special_function(base, kwargs)
    special = _special_count(base, args, out, written) if function else 0
    key = (name, category, precision, function)
    return key, (flops, read_bytes + written_bytes, special, written_bytes)


def _special_count(base: str, args, out, written) -> int:
    """Evaluations: one per element computed, per input element of a softmax, per attention score."""
    if base in _aten_ops.FUSED_ATTENTION:
        q, k = _tensors(args)[:2]
        return q.numel() // q.shape[-1] * k.shape[-2]  # batch x heads x L x S scores
    if base in _aten_ops.SOFTMAX or base == "logsumexp":
        return sum(t.numel() for t in _tensors(args)[:1])  # the first tensor's elements
    return sum(t.numel() for t in _results(out, written))


def _read_and_written(func, base: str, args, kwargs, out) -> tuple[list, list]:
    """The tensors an op reads and the tensors it writes, from its schema."""
    read: list[torch.Tensor] = []
    written: list[torch.Tensor] = []
    for i, arg in enumerate(func._schema.arguments):
        tensors = _tensors(args[i] if i < len(args) else kwargs.get(arg.name))
        if arg.is_out:  # out= buffers are only written
            written += tensors
        elif arg.alias_info is not None and arg.alias_info.is_write:  # in place: once each way
            written += tensors
            if not (i == 0 and base in _aten_ops.WRITE_ONLY_SELF):
                read += tensors
        elif not (i == 0 and base in _aten_ops.SHAPED_FACTORIES):  # zeros_like reads a shape
            read += tensors
    if base.endswith("_copy"):  # narrow_copy & co read what the view would show
        read = _view_of(func, base, args, kwargs) or read
    seen = {id(t) for t in written}
    written += [t for t in _tensors(out) if id(t) not in seen]
    return read, written


def _flops(category, name, base, args, kwargs, out, written) -> int:
    if category == "matmul":
        flops = _aten_ops.matmul_flops(name, args, kwargs, out) or 0
        # (a + bi)(c + di) is 4 real multiplies and 2 adds, then 2 adds to accumulate
        return 4 * flops if any(t.is_complex() for t in _tensors(args)) else flops
    # per element computed, or per element of the first tensor argument: a reduction's or a
    # normalization's input, or a backward's incoming gradient (the same shape)
    counted = _results(out, written) if category == "pointwise" else _tensors(args)[:1]
    return int(_aten_ops.flops_per_element(base, category) * sum(t.numel() for t in counted))


_PRECISIONS = {"float32": "fp32", "float64": "fp64", "bfloat16": "bf16", "float16": "fp16"}


def _precision(base: str, category: str, args, out) -> str:
    """The precision an op computes in, from its first floating-point input."""
    tensors = _tensors(args) or _tensors(out)
    t = next((x for x in tensors if x.is_floating_point() or x.is_complex()), tensors[0])
    dtype = t.dtype.to_real() if t.is_complex() else t.dtype
    if not dtype.is_floating_point:
        return "int"
    if dtype == torch.float32 and category == "matmul" and _tf32(base, t):
        return "tf32"
    name = str(dtype).removeprefix("torch.")
    return "fp8" if "float8" in name else _PRECISIONS.get(name, name)


def _tf32(base: str, t: torch.Tensor) -> bool:
    if t.device.type != "cuda" or "attention" in base:
        return False
    if "conv" in base:
        return bool(torch.backends.cudnn.allow_tf32)
    matmul = torch.backends.cuda.matmul
    return bool(matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"


class _CountingMode(TorchDispatchMode):
    """Sees each aten op as it runs; adds its cost to ``rows[(op, category, precision, special)]``."""

    def __init__(self) -> None:
        super().__init__()
        # (op, category, precision, special function) -> [calls, flops, bytes, special, written]
        self.rows: dict[tuple[str, str, str, str], list[int]] = {}
        self.uncounted: dict[str, list] = {}  # op -> [calls, first error]
        self.on_meta = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name.split("::", 1)[1] in _aten_ops.METADATA:
            return func(*args, **kwargs)
        # A composite op (e.g. aten::linear under inference_mode) reaches us
        # whole; run its decomposition under this mode so its parts are counted.
        if not _aten_ops.has_matmul_formula(name):
            with self:
                result = func.decompose(*args, **kwargs)
            if result is not NotImplemented:
                return result
        out = func(*args, **kwargs)
        try:
            key, cost = op_cost(func, args, kwargs, out)
        except Exception as error:  # an op we cannot price is a note, never an abort
            self.uncounted.setdefault(name, [0, error])[0] += 1
            return out
        row = self.rows.setdefault(key, [0, 0, 0, 0, 0])
        for i, value in enumerate((1, *cost)):
            row[i] += value
        self.on_meta = self.on_meta or any(t.device.type == "meta" for t in _tensors(out))
        return out


def count(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Counts:
    """Run ``fn(*args, **kwargs)`` once and count every aten op it executes."""
    _checks.function("fn", fn)
    mode = _CountingMode()
    # Under a dispatch mode dynamo gives up on a compiled frame and runs it eagerly from
    # then on; "force_eager" runs it eagerly for this one call and leaves its cache alone.
    with torch.compiler.set_stance("force_eager"), mode:
        result = fn(*args, **kwargs)
    if not any(flops or nbytes for _, flops, nbytes, _, _ in mode.rows.values()):
        _checks.ran(f"fn {getattr(fn, '__name__', type(fn).__name__)}", result)
    rows = sorted(
        (
            OpCount(op, category, c, f, b, precision, sp, special, written_bytes=w)
            for (op, category, precision, special), (c, f, b, sp, w) in mode.rows.items()
        ),
        key=lambda r: (CATEGORIES.index(r.category), -r.flops, -r.bytes_moved, r.op, r.precision),
    )
    return Counts(rows=tuple(rows), notes=_notes(fn, mode))


def _notes(fn: Any, mode: _CountingMode) -> tuple[str, ...]:
    notes = []
    for op, (calls, error) in mode.uncounted.items():
        s = "s" if calls > 1 else ""
        notes.append(f"{calls} op{s} uncounted: {op} ({type(error).__name__}: {error})")
    if _is_compiled(fn):
        notes.append("fn is torch.compile'd: counted op by op in its eager graph, unfused")
    if mode.on_meta:
        notes.append("on meta tensors nothing ran: data-dependent sizes are taken at their largest")
    return tuple(notes)


def _is_compiled(fn: Any) -> bool:
    """Whether ``fn``, or a function it names directly, is a ``torch.compile`` result."""
    try:
        seen = inspect.getclosurevars(fn)
        named = [*seen.nonlocals.values(), *seen.globals.values()]
    except (TypeError, ValueError):  # not a Python function, or a closure cell not yet filled
        named = []
    # the marks of a compiled function, a compiled module, a module compiled in place
    marks = ("_torchdynamo_orig_callable", "_orig_mod", "_compiled_call_impl")
    objs = [fn, getattr(fn, "__self__", None), *named]
    return any(getattr(obj, mark, None) is not None for obj in objs for mark in marks)


def _view_of(func, base: str, args, kwargs) -> list | None:
    """``narrow_copy(x, ...)`` reads what ``narrow(x, ...)`` shows, not all of ``x``."""
    packet = getattr(torch.ops.aten, base.removesuffix("_copy"), None)
    view = getattr(packet, func._overloadname, None)  # None without a packet
    return _tensors(view(*args, **kwargs)) if getattr(view, "is_view", False) else None


def _results(out: Any, written: list) -> list[torch.Tensor]:
    """The tensors an elementwise op computes: its result, not side outputs like a dropout mask."""
    first = out[0] if isinstance(out, tuple) and out else out
    if isinstance(first, torch.Tensor):
        return [first]  # one tensor, or the output of native_dropout's (output, mask)
    if isinstance(out, (list, tuple)) and out:
        return _tensors(out)  # _foreach_add returns one result per tensor
    return written  # in-place _foreach_add_ returns nothing: its results are its mutated args


def saved_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Bytes of the tensors autograd keeps from ``fn``'s forward pass for its backward."""
    kept: dict[int, torch.Tensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        kept[id(t)] = t
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args, **kwargs)
    return sum(t.numel() * t.element_size() for t in kept.values())
