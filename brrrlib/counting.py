"""Count the FLOPs and the bytes a function moves, one aten op at a time.

``bl.count(fn, *args)`` runs ``fn(*args)`` once under a
:class:`~torch.utils._python_dispatch.TorchDispatchMode`: PyTorch hands every
aten op it executes (forward *and* backward, views included) to the mode
before running it, so the mode sees each op's real inputs and outputs. Per op
it adds up two costs:

* **FLOPs.** Matmul-like ops (``mm``, ``bmm``, ``addmm``, convolutions, the
  attention kernels) use the formulas registered in
  :mod:`torch.utils.flop_counter`, so they agree with ``FlopCounterMode``.
  Fused ops that counter misses (``_scaled_dot_product_flash_attention_for_cpu``
  and its backward, the inference fast paths ``_transformer_encoder_layer_fwd``
  and ``_native_multi_head_attention``, the fused RNN layers behind
  ``nn.LSTM``/``nn.GRU``) get formulas from their argument shapes here.
  Everything else follows :data:`FLOPS_PER_ELEMENT` (read its docstring: one
  FLOP per output element for an elementwise op, where ``FlopCounterMode``
  says 0).
* **Bytes.** Every tensor an op reads plus every tensor it writes, as if each op
  ran on its own and went to memory and back: the *unfused eager* cost. Views
  (``view``, ``t``, ``transpose``, ``expand``, ...) move no data and count
  0 bytes; allocations (``empty``) count 0 bytes too. A broadcast input (a
  stride-0 dimension) counts each distinct element once.

The result, :class:`Counts`, keeps one :class:`OpCount` row per aten op and
groups them into the categories of the essay's BERT table (chapter 01)::

    counts = bl.count(layer, x)
    counts.flops, counts.bytes_moved, counts.intensity_flops_per_byte
    counts.by_category()          # {"matmul": {"flops": ..., ...}, ...}
    bl.counting.breakdown(layer, x)   # the same, plus % of runtime per category

The categories (:func:`categorize`):

``matmul``
    tensor contractions: mm, bmm, addmm, baddbmm, convolutions, attention
    kernels, and the fused transformer fast-path ops (their FLOPs are matmuls).
``normalization``
    the statistical normalizations: layer/batch/group/RMS norm **and softmax**
    (forward and backward). Softmax goes here, not under reductions, because the
    essay's table (from Ivanov et al., "Data Movement Is All You Need") files
    softmax with layer norm as "statistical normalization".
``pointwise``
    elementwise ops (aten's ``pointwise`` tag: add, mul, relu, gelu, their
    backward, dropout, the optimizers' ``_foreach_*`` ops).
``reduction``
    sum, mean, amax, var, norm, argmax, cumsum, ... (aten's ``reduction`` tag).
``other``
    data movement and bookkeeping with no arithmetic: views, copies
    (``clone``, ``copy_``, ``_to_copy``, ``cat``), indexing, allocation, random
    number fills. 0 FLOPs; bytes as they move them (views: none).

What the counter cannot see: work inside a fused op is charged to that op as
one row (its FLOPs are its matmuls; its bytes only what crosses its boundary).
A ``torch.compile``'d function runs its ops eagerly under the counter (the
compiled kernels are not aten ops), so its count is the *unfused* cost; the
fused cost is what its kernels must read and write: for ``x.cos().cos()``,
one read and one write of ``x``, 8 bytes per fp32 element instead of 16.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from brrrlib._profiler import quiet_profiler

__all__ = [
    "CATEGORIES",
    "FLOPS_PER_ELEMENT",
    "CategoryTimes",
    "Counts",
    "OpCount",
    "breakdown",
    "categorize",
    "count",
    "time_by_category",
]

CATEGORIES: tuple[str, ...] = ("matmul", "normalization", "pointwise", "reduction", "other")
"""The op categories, in the order tables list them."""

FLOPS_PER_ELEMENT: Mapping[str, float] = {
    # One FLOP per output element for an elementwise op, whatever it computes:
    # relu, add, cos and gelu all count 1. (torch's FlopCounterMode counts them
    # as 0.) A gelu really costs tens of instructions per element, but it is so
    # memory-bound that the instruction count does not change its runtime;
    # what changes is the bytes, which we count exactly.
    "pointwise": 1,
    # One FLOP per *input* element: a sum of N numbers is N - 1 additions.
    "reduction": 1,
    # Statistical normalizations, per element of the normalized input, as a
    # textbook implementation computes them (per-row scalars like the rsqrt of
    # the variance are ignored):
    "softmax": 5,  # max, subtract, exp, sum, divide
    "softmax_backward": 4,  # grad * y, row sum, subtract, multiply by y
    "norm": 7,  # mean, subtract, square, sum, scale by rstd, * weight, + bias
    "norm_backward": 12,  # recompute xhat, two row sums, combine; weight/bias grads
    "rms_norm": 4,  # square, sum, scale by rstd, * weight
    "rms_norm_backward": 8,
    # Data movement (views, copies, indexing) does no arithmetic.
    "other": 0,
}
"""FLOPs charged per element to ops that are not matmuls: the one place the
counting convention is written down. Matmuls use exact formulas instead
(``2*M*K*N`` for an ``(M,K) @ (K,N)``: one multiply and one add per term)."""

_SOFTMAX = {"_softmax", "_log_softmax", "_safe_softmax", "_masked_softmax"}
_SOFTMAX_BACKWARD = {
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "_masked_softmax_backward",
}
_NORM = {
    "native_layer_norm",
    "native_group_norm",
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional",
    "_native_batch_norm_legit_no_training",
    "_batch_norm_with_update",
    "_batch_norm_no_update",
    "batch_norm_stats",
    "batch_norm_elemt",
    "cudnn_batch_norm",
    "miopen_batch_norm",
}
_NORM_BACKWARD = {
    "native_layer_norm_backward",
    "native_group_norm_backward",
    "native_batch_norm_backward",
    "batch_norm_backward",
    "cudnn_batch_norm_backward",
    "miopen_batch_norm_backward",
}
_RMS_NORM = {"_fused_rms_norm"}
_RMS_NORM_BACKWARD = {"_fused_rms_norm_backward"}

# Composite ops that wrap the ones above. The counter never charges them (it
# runs their decomposition), but the profiler lists them with a small self time
# of their own, which belongs with the work they wrap.
_MATMUL_WRAPPERS = {
    "linear",
    "matmul",
    "einsum",
    "bilinear",
    "tensordot",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "_convolution",
    "mkldnn_convolution",
    "mkldnn_linear",
    "cudnn_convolution",
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention_math",
    "lstm",
    "gru",
    "rnn_tanh",
    "rnn_relu",
}
_NORM_WRAPPERS = {
    "softmax",
    "log_softmax",
    "layer_norm",
    "group_norm",
    "batch_norm",
    "instance_norm",
    "rms_norm",
    "_batch_norm_impl_index",
    "_batch_norm_impl_index_backward",
}

# Reductions and scans without aten's "reduction" tag.
_EXTRA_REDUCTIONS = {"cumsum", "cumprod", "logcumsumexp", "cummax", "cummin", "mode", "median"}
# Ops tagged "pointwise" that only move data: a clone is a copy, not arithmetic.
_COPIES = {"clone", "copy_", "_to_copy", "contiguous", "_copy_from", "_copy_from_and_resize"}
# Ops that return an alias without being marked as views in their schema.
_EXTRA_VIEWS = {"_unsafe_view", "lift_fresh", "_reshape_alias", "_neg_view", "_conj"}
# Allocations: the memory is not touched, so no bytes move.
_ALLOCATIONS = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "empty_permuted",
    "resize_",
}
# In-place ops that overwrite `self` without reading it (a fill is a write).
_WRITE_ONLY_SELF = {
    "fill_",
    "zero_",
    "copy_",
    "uniform_",
    "normal_",
    "random_",
    "bernoulli_",
    "exponential_",
    "geometric_",
    "log_normal_",
    "cauchy_",
}
# Metadata queries: not work, not counted.
_METADATA = {
    "size",
    "sym_size",
    "stride",
    "sym_stride",
    "storage_offset",
    "sym_storage_offset",
    "numel",
    "sym_numel",
    "dim",
    "is_contiguous",
    "sym_is_contiguous",
    "is_strides_like_format",
    "is_non_overlapping_and_dense",
    "device",
    "layout",
}


# ---------------------------------------------------------------- matmul FLOPs


def _shape(t: Any) -> Any:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else t


def _sequence_lengths(t: torch.Tensor) -> list[int]:
    """Token count of each sequence in a (batch, seq, embed) tensor, nested or not."""
    if t.is_nested:
        return [int(n) for n in t._nested_tensor_size()[:, 0].tolist()]
    if t.dim() == 2:  # one unbatched sequence (seq, embed)
        return [t.shape[0]]
    return [t.shape[1]] * t.shape[0]


def _sdpa_cpu_flops(query, key, value, *args, **kwargs) -> int:
    """``_scaled_dot_product_flash_attention_for_cpu``: QK^T and PV, as torch counts SDPA."""
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(_shape(query), _shape(key), _shape(value))


def _sdpa_cpu_backward_flops(grad_out, query, key, value, *args, **kwargs) -> int:
    """Backward of CPU flash attention: recompute QK^T plus four gradient matmuls."""
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return sdpa_backward_flop_count(_shape(grad_out), _shape(query), _shape(key), _shape(value))


def _attention_block_flops(lengths_q, lengths_k, embed_dim: int) -> int:
    """Q/K/V and output projections plus QK^T and PV, summed over sequences.

    Per sequence with ``lq`` queries and ``lk`` keys (all heads together span
    ``embed_dim``): projections ``2*E*E*(lq + 2*lk)`` (Q, K, V) ``+ 2*lq*E*E``
    (out), attention ``2*lq*lk*E`` (QK^T) ``+ 2*lq*lk*E`` (PV).
    """
    e = embed_dim
    total = 0
    for lq, lk in zip(lengths_q, lengths_k, strict=True):
        total += 2 * e * e * (lq + 2 * lk) + 2 * lq * e * e + 4 * lq * lk * e
    return total


def _native_mha_flops(query, key, value, embed_dim, num_head, *args, **kwargs) -> int:
    """``_native_multi_head_attention``: the fused inference path of nn.MultiheadAttention."""
    lq = _sequence_lengths(query)
    lk = _sequence_lengths(key)
    return _attention_block_flops(lq, lk, int(embed_dim))


def _transformer_layer_flops(src, embed_dim, num_heads, *args, **kwargs) -> int:
    """``_transformer_encoder_layer_fwd``: nn.TransformerEncoderLayer's inference fast path.

    The attention block (see :func:`_attention_block_flops`) plus the feed-forward
    network, two matmuls ``2*L*E*F`` each with ``F = ffn_weight_1.shape[0]``.
    """
    ffn_weight_1 = args[11] if len(args) > 11 else kwargs["ffn_weight_1"]
    ffn_dim = int(ffn_weight_1.shape[0])
    lengths = _sequence_lengths(src)
    e = int(embed_dim)
    return _attention_block_flops(lengths, lengths, e) + sum(4 * n * e * ffn_dim for n in lengths)


def _tokens(x: torch.Tensor) -> int:
    """Rows fed to a recurrent layer: every time step of every sequence (padded or packed)."""
    return x.numel() // x.shape[-1] if x.dim() else 0


def _mkldnn_rnn_flops(input, weight0, weight1, *args, **kwargs) -> int:
    """``mkldnn_rnn_layer`` (nn.LSTM/GRU on CPU): per time step ``x @ W_ih.T`` and ``h @ W_hh.T``."""
    return 2 * _tokens(input) * (weight0.numel() + weight1.numel())


def _mkldnn_rnn_backward_flops(input, weight1, weight2, *args, **kwargs) -> int:
    """Backward of one RNN layer: gradients for the inputs and for the weights, 2x the forward."""
    return 2 * _mkldnn_rnn_flops(input, weight1, weight2)


def _cudnn_rnn_flops(input, weight, *args, **kwargs) -> int:
    """``_cudnn_rnn``: every weight matrix of every layer and direction meets every time step."""
    return 2 * _tokens(input) * sum(w.numel() for w in weight if w.dim() == 2)


def _cudnn_rnn_backward_flops(input, weight, *args, **kwargs) -> int:
    return 2 * _cudnn_rnn_flops(input, weight)


def _mv_flops(mat, vec, *args, **kwargs) -> int:
    m, n = mat.shape
    return 2 * m * n


def _addmv_flops(self, mat, vec, *args, **kwargs) -> int:
    return _mv_flops(mat, vec)


def _dot_flops(a, b, *args, **kwargs) -> int:
    return 2 * a.numel()


def _addbmm_flops(self, batch1, batch2, *args, **kwargs) -> int:
    from torch.utils.flop_counter import bmm_flop

    return bmm_flop(_shape(batch1), _shape(batch2))


def _mm_like(index: int) -> Callable[..., int]:
    """A formula for an op whose args[index], args[index+1] are the two matrices."""

    def flops(*args, **kwargs) -> int:
        from torch.utils.flop_counter import mm_flop

        return mm_flop(_shape(args[index]), _shape(args[index + 1]))

    return flops


_OUR_FORMULAS: dict[str, Callable[..., int]] = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": _sdpa_cpu_flops,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _sdpa_cpu_backward_flops,
    "aten::_scaled_dot_product_fused_attention_overrideable": _sdpa_cpu_flops,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _sdpa_cpu_backward_flops,
    "aten::_transformer_encoder_layer_fwd": _transformer_layer_flops,
    "aten::_native_multi_head_attention": _native_mha_flops,
    "aten::mkldnn_rnn_layer": _mkldnn_rnn_flops,
    "aten::mkldnn_rnn_layer_backward": _mkldnn_rnn_backward_flops,
    "aten::_cudnn_rnn": _cudnn_rnn_flops,
    "aten::_cudnn_rnn_backward": _cudnn_rnn_backward_flops,
    "aten::_addmm_activation": _mm_like(1),
    "aten::_int_mm": _mm_like(0),
    "aten::addbmm": _addbmm_flops,
    "aten::mv": _mv_flops,
    "aten::addmv": _addmv_flops,
    "aten::dot": _dot_flops,
    "aten::vdot": _dot_flops,
}


@lru_cache(maxsize=1)
def _matmul_formulas() -> dict[str, Callable[..., int]]:
    """torch's registered formulas (keyed ``aten::mm``), then ours for what it misses."""
    from torch.utils.flop_counter import flop_registry

    formulas: dict[str, Callable[..., int]] = {}
    for target, formula in flop_registry.items():
        name = getattr(target, "_qualified_op_name", None)
        if name is not None:
            formulas[name] = _torch_formula(formula)
    for name, formula in _OUR_FORMULAS.items():
        formulas.setdefault(name, formula)
    return formulas


def _torch_formula(formula: Callable[..., int]) -> Callable[..., int]:
    def flops(*args, out=None, **kwargs) -> int:
        return int(formula(*args, out_val=out, **kwargs))

    return flops


# ---------------------------------------------------------------- categories


def _op_name(op: Any) -> str:
    """``aten::mm`` from an OpOverload, a packet, or a string in any common spelling."""
    if isinstance(op, torch._ops.OpOverload):
        return op._schema.name
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op._qualified_op_name
    if not isinstance(op, str):
        raise TypeError(
            f"categorize(op): expected an aten op or its name such as 'aten::mm', got {type(op).__name__}"
        )
    name = op.strip()
    if "::" not in name:
        if name.startswith("aten."):
            name = name[len("aten.") :]
        name = "aten::" + name
    namespace, _, rest = name.partition("::")
    return f"{namespace}::{rest.split('.')[0]}"


def _tags_of(op: Any) -> frozenset:
    """The aten tags that describe ``op`` (used for ``pointwise`` and ``reduction``).

    An ``OpOverload`` describes itself; a name with an overload
    (``"aten.max.other"``) names it. A bare name (``"aten::mul"``, as the
    profiler prints it) is ambiguous: ``aten::mul.default`` multiplies two
    Python scalars and carries no tag, ``aten::max.other`` is elementwise
    while ``aten::max.dim`` reduces. The profiler times tensor ops, so a bare
    name gets the tag most of its tensor overloads (``out=`` variants aside)
    carry.
    """
    if isinstance(op, torch._ops.OpOverload):
        return frozenset(op.tags)
    name = _op_name(op)
    overload_name = None
    if isinstance(op, str):
        tail = op.strip().split("::")[-1]
        if tail.startswith("aten."):
            tail = tail[len("aten.") :]
        if "." in tail:
            overload_name = tail.split(".", 1)[1]
    namespace, _, base = name.partition("::")
    packet = (
        getattr(getattr(torch.ops, namespace, None), base, None) if namespace == "aten" else None
    )
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return frozenset()
    overloads = packet.overloads()
    if overload_name in overloads:
        return frozenset(getattr(packet, overload_name).tags)
    candidates = [getattr(packet, o) for o in overloads if "out" not in o]
    candidates = [o for o in candidates if _takes_tensor_first(o)]
    votes = {
        tag: sum(tag in o.tags for o in candidates)
        for tag in (torch.Tag.pointwise, torch.Tag.reduction)
    }
    best = max(votes, key=votes.get)
    return frozenset({best}) if votes[best] else frozenset()


def _takes_tensor_first(overload: torch._ops.OpOverload) -> bool:
    arguments = overload._schema.arguments
    return bool(arguments) and str(arguments[0].type).startswith("Tensor")


def categorize(op: Any) -> str:
    """The category of an aten op: one of :data:`CATEGORIES`.

    Accepts an ``OpOverload`` (``torch.ops.aten.mm.default``), a packet, or a
    name as the dispatcher (``"aten::mm"``), the profiler (``"aten::mm"``) or
    ``FlopCounterMode`` (``"aten.mm"``) spell it. Names that are not aten ops
    (``"autograd::engine::..."`` profiler events) are ``"other"``.

    The rule, first match wins: a matmul FLOP formula exists, or the op wraps
    one (``linear``, ``matmul``, ``conv2d``: the profiler shows their own small
    self time) -> ``matmul``; softmax or a layer/batch/group/RMS norm (or its
    backward, or its wrapper) -> ``normalization``; a copy -> ``other``; aten's ``pointwise`` tag or a
    ``_foreach_``/``_fused_`` optimizer op -> ``pointwise``; aten's
    ``reduction`` tag or a scan -> ``reduction``; everything else -> ``other``.
    """
    return _categorize(_op_name(op), _tags_of(op))


@lru_cache(maxsize=4096)
def _categorize(name: str, tags: frozenset) -> str:
    base = name.split("::", 1)[1]
    if name in _matmul_formulas() or (name.startswith("aten::") and base in _MATMUL_WRAPPERS):
        return "matmul"
    if base in (
        _SOFTMAX
        | _SOFTMAX_BACKWARD
        | _NORM
        | _NORM_BACKWARD
        | _RMS_NORM
        | _RMS_NORM_BACKWARD
        | _NORM_WRAPPERS
    ):
        return "normalization"
    if base in _COPIES or base in _EXTRA_VIEWS or base in _ALLOCATIONS:
        return "other"
    if not tags and base.endswith("_") and not base.endswith("__"):
        tags = _tags_of(f"aten::{base[:-1]}")  # masked_fill_ is untagged, masked_fill is not
    if torch.Tag.pointwise in tags or base.startswith(("_foreach_", "_fused_")):
        return "pointwise"
    if torch.Tag.reduction in tags or base in _EXTRA_REDUCTIONS:
        return "reduction"
    return "other"


# ---------------------------------------------------------------- bytes


def _tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements of ``t``: a stride-0 (broadcast) dim counts once."""
    if t.is_nested or t.layout != torch.strided:
        return t.numel() * t.element_size()
    elements = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            elements *= size
    if t.numel() == 0:
        elements = 0
    return elements * t.element_size()


def _tensors(tree: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _is_view(func: torch._ops.OpOverload, base: str) -> bool:
    return func.is_view or base in _EXTRA_VIEWS


def _op_cost(func, category: str, args, kwargs, out) -> tuple[int, int]:
    """(flops, bytes_moved) of one call. See the module docstring for the convention."""
    name = func._schema.name
    base = name.split("::", 1)[1]
    if _is_view(func, base) or base in _ALLOCATIONS:
        return 0, 0

    # Split the arguments by what the op does to them: read, written, or both.
    read: list[torch.Tensor] = []
    written: list[torch.Tensor] = []
    schema_args = func._schema.arguments
    positional = list(args)
    for i, arg in enumerate(schema_args):
        if i < len(positional):
            value = positional[i]
        elif arg.name in kwargs:
            value = kwargs[arg.name]
        else:
            continue
        tensors = _tensors(value)
        is_write = arg.alias_info is not None and arg.alias_info.is_write
        if arg.is_out:  # out= buffers are only written
            written.extend(tensors)
            continue
        if is_write:
            written.extend(tensors)
            if i == 0 and base in _WRITE_ONLY_SELF:
                continue
        read.extend(tensors)
    seen = {id(t) for t in written}
    returned = [t for t in _tensors(out) if id(t) not in seen]
    written.extend(returned)

    bytes_moved = sum(_tensor_bytes(t) for t in read) + sum(_tensor_bytes(t) for t in written)

    if category == "matmul":
        formula = _matmul_formulas().get(name)
        flops = formula(*args, out=out, **kwargs) if formula is not None else 0
    elif category == "pointwise":
        flops = FLOPS_PER_ELEMENT["pointwise"] * sum(t.numel() for t in _results(out, written))
    elif category == "reduction":
        first_input = next(iter(_tensors(args)), None)
        flops = FLOPS_PER_ELEMENT["reduction"] * (
            first_input.numel() if first_input is not None else 0
        )
    elif category == "normalization":
        flops = _normalization_flops(base, args)
    else:
        flops = 0
    return int(flops), int(bytes_moved)


def _results(out: Any, written: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors an elementwise op computes: its result, not side outputs like a dropout mask."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
        return [out[0]]  # native_dropout returns (output, mask)
    if isinstance(out, (list, tuple)) and out:
        return _tensors(out)  # _foreach_add returns one result per tensor
    return written  # in-place _foreach_add_ returns nothing: its results are its mutated args


def _normalization_flops(base: str, args) -> int:
    """Per-element convention of :data:`FLOPS_PER_ELEMENT` times the normalized input's size."""
    tensors = _tensors(args)
    if not tensors:
        return 0
    kinds = (
        (_SOFTMAX, "softmax"),
        (_SOFTMAX_BACKWARD, "softmax_backward"),
        (_RMS_NORM, "rms_norm"),
        (_RMS_NORM_BACKWARD, "rms_norm_backward"),
        (_NORM_BACKWARD, "norm_backward"),
    )
    kind = next((k for names, k in kinds if base in names), "norm")
    # the first tensor argument is the input (forward) or the incoming gradient
    # (backward); both have the normalized shape
    return int(FLOPS_PER_ELEMENT[kind] * tensors[0].numel())


# ---------------------------------------------------------------- the counter


class _CountingMode(TorchDispatchMode):
    """Sees each aten op as it runs; keeps ``{(op, category): [calls, flops, bytes]}``."""

    def __init__(self) -> None:
        super().__init__()
        self.totals: dict[tuple[str, str], list[int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        base = name.split("::", 1)[1]
        if base in _METADATA:
            return func(*args, **kwargs)
        category = _categorize(name, frozenset(func.tags))
        # A composite op (e.g. aten::linear under inference_mode) reaches us
        # whole; run its decomposition under this mode so its parts are counted.
        if name not in _matmul_formulas():
            with self:
                result = func.decompose(*args, **kwargs)
            if result is not NotImplemented:
                return result
        out = func(*args, **kwargs)
        flops, bytes_moved = _op_cost(func, category, args, kwargs, out)
        row = self.totals.setdefault((name, category), [0, 0, 0])
        row[0] += 1
        row[1] += flops
        row[2] += bytes_moved
        return out


def count(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Counts:
    """Run ``fn(*args, **kwargs)`` once and count every aten op it executes.

    Returns a :class:`Counts` with one row per aten op: calls, FLOPs and bytes
    moved (read + written, each op on its own: the unfused eager cost).
    Whatever ``fn`` does is counted, so ``lambda: model(x).sum().backward()``
    counts forward and backward. The counter runs the real ops (it does not
    estimate), so ``fn`` costs what it always costs plus a few microseconds per
    op. Tensors on the ``meta`` device work too: shapes without data, so you
    can count a model too large to run here.

    Example (chapter 02)::

        >>> x = torch.randn(1_000_000)
        >>> c = bl.count(lambda: x.cos().cos())
        >>> c.ops, c.flops, c.bytes_moved      # 2 ops, 2N FLOPs, 16N bytes in fp32
        (2, 2000000, 16000000)

    Matmul FLOPs match :class:`torch.utils.flop_counter.FlopCounterMode`; unlike
    it, ``count`` also sees the fused attention and transformer fast-path ops
    PyTorch uses on CPU and in inference (see the module docstring).
    """
    if not callable(fn):
        raise TypeError(
            f"count(fn, ...): fn must be callable (a function or nn.Module), got "
            f"{type(fn).__name__}; to count an expression, wrap it: bl.count(lambda: x.cos())"
        )
    mode = _CountingMode()
    with mode:
        fn(*args, **kwargs)
    rows = tuple(
        OpCount(op=name, category=category, calls=c, flops=f, bytes_moved=b)
        for (name, category), (c, f, b) in mode.totals.items()
    )
    order = {c: i for i, c in enumerate(CATEGORIES)}
    rows = tuple(sorted(rows, key=lambda r: (order[r.category], -r.flops, -r.bytes_moved, r.op)))
    return Counts(rows=rows)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class OpCount:
    """One aten op's totals over a counted run.

    ``op`` is the dispatcher name (``"aten::mm"``), ``category`` one of
    :data:`CATEGORIES`, ``calls`` how many times it ran, ``flops`` and
    ``bytes_moved`` summed over those calls.
    """

    op: str
    category: str
    calls: int
    flops: int
    bytes_moved: int

    @property
    def intensity_flops_per_byte(self) -> float:
        """FLOPs per byte moved (``inf`` for an op that moves no bytes but computes)."""
        return _ratio(self.flops, self.bytes_moved)


@dataclass(frozen=True)
class CategoryTimes:
    """Seconds per call of a function, split by op category (see :func:`time_by_category`).

    ``times_s`` pairs each category with the median, over ``runs`` profiled
    calls, of the summed *self* time of its ops; ``source`` says which clock
    (``"cpu self time"`` or ``"device self time"``) and ``device`` where it ran.
    """

    times_s: tuple[tuple[str, float], ...]
    source: str
    device: str
    runs: int

    def as_dict(self) -> dict[str, float]:
        """``{category: seconds}`` with every category present (0.0 if none)."""
        out = dict.fromkeys(CATEGORIES, 0.0)
        out.update(dict(self.times_s))
        return out

    @property
    def total_s(self) -> float:
        """Sum over categories: the op time of one call (Python time between ops excluded)."""
        return sum(t for _, t in self.times_s)

    def __repr__(self) -> str:
        total = self.total_s
        parts = ", ".join(
            f"{c} {_pct(t, total)}" for c, t in sorted(self.times_s, key=lambda p: -p[1])
        )
        return f"CategoryTimes({_si(total, 's')} per call on {self.device}, {self.source}: {parts})"


@dataclass(frozen=True)
class Counts:
    """FLOPs and bytes of one run of a function, per aten op (see :func:`count`).

    ``rows`` holds one :class:`OpCount` per (op, category); ``times`` is
    optional per-category timing attached by :func:`breakdown` or
    :meth:`with_times`. Totals are properties; :meth:`by_category` and
    :meth:`table` group the rows like the essay's BERT table.
    """

    rows: tuple[OpCount, ...]
    times: CategoryTimes | None = None

    @property
    def flops(self) -> int:
        """Total floating-point operations."""
        return sum(r.flops for r in self.rows)

    @property
    def bytes_moved(self) -> int:
        """Total bytes read plus written, op by op (unfused eager cost)."""
        return sum(r.bytes_moved for r in self.rows)

    @property
    def intensity_flops_per_byte(self) -> float:
        """Arithmetic intensity of the whole run: ``flops / bytes_moved``."""
        return _ratio(self.flops, self.bytes_moved)

    @property
    def ops(self) -> int:
        """Number of aten op calls, views included (each one costs dispatch overhead)."""
        return sum(r.calls for r in self.rows)

    def by_category(self) -> dict[str, dict[str, float]]:
        """``{category: {"calls", "flops", "bytes_moved", "flops_fraction", "bytes_fraction"}}``.

        Every category in :data:`CATEGORIES` is present. With times attached,
        each entry also has ``"time_s"`` and ``"time_fraction"``.
        """
        total_flops, total_bytes = self.flops, self.bytes_moved
        out: dict[str, dict[str, float]] = {}
        times = self.times.as_dict() if self.times is not None else None
        total_time = self.times.total_s if self.times is not None else 0.0
        for category in CATEGORIES:
            rows = [r for r in self.rows if r.category == category]
            flops = sum(r.flops for r in rows)
            bytes_moved = sum(r.bytes_moved for r in rows)
            entry: dict[str, float] = {
                "calls": sum(r.calls for r in rows),
                "flops": flops,
                "bytes_moved": bytes_moved,
                "flops_fraction": flops / total_flops if total_flops else 0.0,
                "bytes_fraction": bytes_moved / total_bytes if total_bytes else 0.0,
            }
            if times is not None:
                entry["time_s"] = times[category]
                entry["time_fraction"] = times[category] / total_time if total_time else 0.0
            out[category] = entry
        return out

    def with_times(self, times: CategoryTimes | Mapping[str, float]) -> Counts:
        """A copy with per-category times attached (a :class:`CategoryTimes` or ``{category: s}``)."""
        return Counts(rows=self.rows, times=_as_category_times(times))

    def table(self, timing: Any = None, *, by: str = "category") -> str:
        """A text table: FLOPs, % of FLOPs, bytes, % of bytes per category (or per op).

        ``timing`` adds time columns: a :class:`CategoryTimes` (or a
        ``{category: seconds}`` mapping) gives each category's % of runtime, the
        essay's BERT table; a :class:`~brrrlib.timing.Timing` (anything with
        ``median_s``) of the whole function adds the achieved FLOP/s and bytes/s.
        Without ``timing``, times attached by :func:`breakdown` are used.
        ``by="op"`` lists every aten op instead of the categories.
        """
        return _render(self, timing, by=by, html=False)

    def _repr_html_(self) -> str:
        return _render(self, None, by="category", html=True)

    def __repr__(self) -> str:
        return _render(self, None, by="category", html=False)


def _as_category_times(times: Any) -> CategoryTimes:
    if isinstance(times, CategoryTimes):
        return times
    if isinstance(times, Mapping):
        unknown = set(times) - set(CATEGORIES)
        if unknown:
            raise ValueError(
                f"times: unknown categories {sorted(unknown)}; use {list(CATEGORIES)} "
                "(map op names with bl.counting.categorize)"
            )
        pairs = tuple((c, float(times[c])) for c in CATEGORIES if c in times)
        if any(t < 0 or not math.isfinite(t) for _, t in pairs):
            raise ValueError("times: every value must be a finite number of seconds >= 0")
        return CategoryTimes(times_s=pairs, source="given", device="?", runs=0)
    raise TypeError(
        f"times: expected CategoryTimes or a {{category: seconds}} mapping, got {type(times).__name__}"
    )


# ---------------------------------------------------------------- timing by category


def _profile_once(fn, args, kwargs, use_device: bool) -> tuple[dict[str, float], dict[str, float]]:
    """One profiled call: ({category: cpu self s}, {category: device self s})."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if use_device:
        activities.append(ProfilerActivity.CUDA)
    with quiet_profiler(), profile(activities=activities) as prof:
        fn(*args, **kwargs)
        if use_device:
            torch.cuda.synchronize()
    return _category_seconds(prof.key_averages(), use_device)


def _category_seconds(
    events: Iterable[Any], use_device: bool
) -> tuple[dict[str, float], dict[str, float]]:
    """Sum profiler rows (``key_averages()``) by category: CPU self s, device self s.

    Kernels appear as their own rows (device type CUDA) *and* inside the aten
    op that launched them (the profiler links them by correlation id, and an
    op's ``self_device_time_total`` is its kernels minus its child ops'
    kernels); reading only the CPU rows counts each kernel once, under the op
    that launched it.
    """
    cpu = dict.fromkeys(CATEGORIES, 0.0)
    device = dict.fromkeys(CATEGORIES, 0.0)
    for event in events:
        if event.device_type != torch.autograd.DeviceType.CPU:
            continue
        category = categorize(event.key)
        cpu[category] += event.self_cpu_time_total * 1e-6
        if use_device:
            device[category] += event.self_device_time_total * 1e-6
    return cpu, device


def time_by_category(
    fn: Callable[..., Any], *args: Any, runs: int = 5, warmup: int = 1, **kwargs: Any
) -> CategoryTimes:
    """Time ``fn(*args, **kwargs)`` with :mod:`torch.profiler`, split by op category.

    The method: call ``fn`` ``warmup`` times and throw the result away (first
    calls allocate memory and pick kernels, and the profiler's first start
    costs about a second), then ``runs`` times, each under its own profiler.
    For each run, every aten op's *self* time (its time minus the ops it
    called, so nothing is counted twice) is added to :func:`categorize` of its
    name; each category reports the median over runs (robust to a busy
    machine). With CUDA present and kernels recorded, the clock is the
    kernels' device time, charged to the aten op that launched them;
    otherwise the CPU self time, which includes each op's dispatch overhead
    and the profiler's own small cost per op, so tiny ops look a little
    slower than they are. Profiler events that are not aten ops (autograd
    engine bookkeeping) land in ``"other"``. (MPS kernels are not recorded
    by the profiler: there this is the CPU time of issuing them.)
    """
    if not callable(fn):
        raise TypeError(f"time_by_category(fn, ...): fn must be callable, got {type(fn).__name__}")
    if not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive int, got {runs!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    use_device = torch.cuda.is_available()
    for _ in range(warmup):
        _profile_once(fn, args, kwargs, use_device)
    samples = [_profile_once(fn, args, kwargs, use_device) for _ in range(runs)]
    on_device = use_device and all(sum(device.values()) > 0 for _, device in samples)
    chosen = [device if on_device else cpu for cpu, device in samples]
    times = tuple((c, statistics.median(s[c] for s in chosen)) for c in CATEGORIES)
    return CategoryTimes(
        times_s=times,
        source="device self time" if on_device else "cpu self time",
        device="cuda" if on_device else "cpu",
        runs=runs,
    )


def breakdown(fn: Callable[..., Any], *args: Any, runs: int = 5, **kwargs: Any) -> Counts:
    """Count ``fn`` and time it by category: the essay's BERT table in one call (chapter 01).

    ``bl.counting.breakdown(lambda: layer(x).sum().backward())`` returns a
    :class:`Counts` whose table shows, per category, the share of FLOPs next
    to the share of runtime (:func:`time_by_category`). Matmuls do nearly all
    the FLOPs; the other categories take a share of the time out of proportion
    to their FLOPs because they are bound by memory bandwidth or overhead.

    Note: ``nn.TransformerEncoderLayer`` in ``eval()`` under ``no_grad`` with
    ``batch_first=True`` runs one fused op; its count is one matmul row, while
    the profiler still splits its time over the ops it calls inside.
    """
    counts = count(fn, *args, **kwargs)
    return counts.with_times(time_by_category(fn, *args, runs=runs, **kwargs))


# ---------------------------------------------------------------- rendering


def _ratio(num: float, den: float) -> float:
    if den == 0:
        return math.inf if num else 0.0
    return num / den


def _si(value: float, unit: str) -> str:
    """``1.23 GFLOP``, ``45.6 MB``, ``812 µs``: three significant digits, SI prefix."""
    if value == 0:
        return f"0 {unit}"
    if not math.isfinite(value):
        return f"{value} {unit}"
    prefixes = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")]
    if unit == "s":
        prefixes = [(1, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")]
    for scale, prefix in prefixes:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    scale, prefix = prefixes[-1]
    return f"{value / scale:.3g} {prefix}{unit}"


def _pct(part: float, whole: float) -> str:
    if not whole:
        return "-"
    share = 100 * part / whole
    return f"{share:.2f}%" if share < 1 else f"{share:.1f}%"


def _render(counts: Counts, timing: Any, *, by: str, html: bool) -> str:
    if by not in ("category", "op"):
        raise ValueError(f"by must be 'category' or 'op', got {by!r}")
    times = counts.times
    total_timing = None
    if timing is not None:
        if hasattr(timing, "median_s"):
            total_timing = timing
        else:
            times = _as_category_times(timing)
    total_flops, total_bytes = counts.flops, counts.bytes_moved
    header = [
        "category" if by == "category" else "op",
        "calls",
        "FLOPs",
        "% FLOPs",
        "bytes",
        "% bytes",
        "FLOP/byte",
    ]
    body: list[list[str]] = []
    if by == "category":
        cats = counts.by_category()
        time_map = times.as_dict() if times is not None else None
        if time_map is not None:
            header += ["time", "% time"]
        for c in CATEGORIES:
            e = cats[c]
            line = [
                c,
                f"{int(e['calls'])}",
                _si(e["flops"], "FLOP"),
                _pct(e["flops"], total_flops),
                _si(e["bytes_moved"], "B"),
                _pct(e["bytes_moved"], total_bytes),
                f"{_ratio(e['flops'], e['bytes_moved']):.3g}",
            ]
            if time_map is not None:
                line += [_si(time_map[c], "s"), _pct(time_map[c], times.total_s)]
            body.append(line)
    else:
        for r in sorted(counts.rows, key=lambda r: (-r.flops, -r.bytes_moved, r.op)):
            body.append(
                [
                    f"{r.op} ({r.category})",
                    str(r.calls),
                    _si(r.flops, "FLOP"),
                    _pct(r.flops, total_flops),
                    _si(r.bytes_moved, "B"),
                    _pct(r.bytes_moved, total_bytes),
                    f"{r.intensity_flops_per_byte:.3g}",
                ]
            )
    title = (
        f"Counts: {_si(total_flops, 'FLOP')}, {_si(total_bytes, 'B')} moved, "
        f"{counts.intensity_flops_per_byte:.3g} FLOP/byte, {counts.ops} op calls"
    )
    notes = []
    if times is not None and by == "category":
        notes.append(
            f"time: {times.source} on {times.device}, median of {times.runs} runs, "
            f"{_si(times.total_s, 's')} of op time per call"
        )
    if total_timing is not None:
        seconds = total_timing.median_s
        notes.append(
            f"achieved: {_si(_ratio(total_flops, seconds), 'FLOP/s')}, "
            f"{_si(_ratio(total_bytes, seconds), 'B/s')} (median {_si(seconds, 's')} per call)"
        )
    if html:

        def cell(tag: str, i: int, value: str) -> str:
            align = "left" if i == 0 else "right"  # numbers line up on the right
            return f'<{tag} style="text-align:{align}">{_escape(value)}</{tag}>'

        head = "".join(cell("th", i, h) for i, h in enumerate(header))
        rows_html = "".join(
            "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(line)) + "</tr>"
            for line in body
        )
        foot = "".join(f"<p>{_escape(n)}</p>" for n in notes)
        return f"<p><b>{_escape(title)}</b></p><table><tr>{head}</tr>{rows_html}</table>{foot}"
    widths = [
        max(len(h), *(len(line[i]) for line in body)) if body else len(h)
        for i, h in enumerate(header)
    ]

    def fmt(cells: Iterable[str]) -> str:
        cells = list(cells)
        return "  ".join(
            (c.ljust(w) if i == 0 else c.rjust(w))
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    lines = [title, fmt(header), *(fmt(line) for line in body), *notes]
    return "\n".join(lines)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
