"""The op-by-op facts counting and tracing look up: each aten op's category and FLOP formula."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import torch

from brrrlib import _touched

__all__ = [
    "CATEGORIES",
    "COMPILED_GRAPH",
    "FLOPS_PER_ELEMENT",
    "FUSED_ATTENTION",
    "SOFTMAX",
    "categorize",
    "has_matmul_formula",
    "matmul_flops",
    "flops_per_element",
    "moves_no_data",
    "profiler_category",
    "special_function",
]

#: The op categories, in the order tables list them.
CATEGORIES: tuple[str, ...] = ("matmul", "normalization", "pointwise", "reduction", "other")
#: FLOPs per element of ops that are not matmuls (matmuls: ``2*M*K*N``, exact).
FLOPS_PER_ELEMENT: Mapping[str, float] = {
    # One FLOP per output element, whatever it computes (torch's FlopCounterMode counts 0):
    # a gelu is so memory-bound that its bytes, counted exactly, set its time.
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


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Op base names by what counting and tracing do with them (a name may be in several sets).
_SETS: Mapping[str, frozenset[str]] = {
    role: _names(names)
    for role, names in {
        # normalization kernels, by their per-element convention in FLOPS_PER_ELEMENT
        "softmax": "_softmax _log_softmax _safe_softmax _masked_softmax",
        "softmax_backward": "_softmax_backward_data _log_softmax_backward_data "
        "_masked_softmax_backward",
        "norm": "native_layer_norm native_group_norm native_batch_norm _native_batch_norm_legit "
        "_native_batch_norm_legit_functional _native_batch_norm_legit_no_training "
        "_batch_norm_with_update _batch_norm_no_update batch_norm_stats batch_norm_elemt "
        "cudnn_batch_norm miopen_batch_norm",
        "norm_backward": "native_layer_norm_backward native_group_norm_backward "
        "native_batch_norm_backward batch_norm_backward cudnn_batch_norm_backward "
        "miopen_batch_norm_backward",
        "rms_norm": "_fused_rms_norm",
        "rms_norm_backward": "_fused_rms_norm_backward",
        # and the composites that call them
        "norm_composite": "softmax log_softmax layer_norm group_norm batch_norm instance_norm "
        "rms_norm _batch_norm_impl_index _batch_norm_impl_index_backward",
        # Composites that wrap a matmul. The counter never charges them (it runs their
        # decomposition), but the profiler lists them with a small self time of their own, which
        # belongs with the work they wrap.
        "matmul_wrapper": "linear matmul einsum bilinear tensordot conv1d conv2d conv3d "
        "conv_transpose1d conv_transpose2d conv_transpose3d _convolution mkldnn_convolution "
        "mkldnn_linear cudnn_convolution scaled_dot_product_attention "
        "_scaled_dot_product_attention_math lstm gru rnn_tanh rnn_relu",
        # tagged "pointwise", but only move data: a clone is a copy, not arithmetic
        "copy": "clone copy_ _to_copy contiguous _copy_from _copy_from_and_resize",
        # return an alias without being marked as views in their schema
        "alias": "_unsafe_view lift_fresh _reshape_alias _neg_view _conj",
        # the memory is not touched, so no bytes move
        "allocation": "empty empty_like empty_strided new_empty new_empty_strided empty_permuted "
        "resize_",
        # reductions and scans without aten's "reduction" tag
        "untagged_reduction": "cumsum cumprod logcumsumexp cummax cummin mode median",
        # in place, but overwrite `self` without reading it (a fill is a write)
        "write_only_self": "fill_ zero_ copy_ uniform_ normal_ random_ bernoulli_ exponential_ "
        "geometric_ log_normal_ cauchy_",
        # factories shaped like a tensor: they read its shape, not its data (written only)
        "shaped_factory": "zeros_like ones_like full_like rand_like randn_like randint_like "
        "new_zeros new_ones new_full",
        # metadata queries: not work, not counted
        "metadata": "size sym_size stride sym_stride storage_offset sym_storage_offset numel "
        "sym_numel dim is_contiguous sym_is_contiguous is_strides_like_format "
        "is_non_overlapping_and_dense device layout",
        # profiler rows that make a view (with aliases and allocations: rows that move no data,
        # on a CPU trace not "device work")
        "profiler_view": "as_strided view reshape resolve_conj resolve_neg detach t transpose "
        "permute expand unsqueeze squeeze select slice alias",
    }.items()
}
#: The softmax kernels (one ``exp`` per input element).
SOFTMAX = _SETS["softmax"]
EXTRA_VIEWS, ALLOCATIONS, METADATA = _SETS["alias"], _SETS["allocation"], _SETS["metadata"]
WRITE_ONLY_SELF, SHAPED_FACTORIES = _SETS["write_only_self"], _SETS["shaped_factory"]
_NORMALIZATION = frozenset().union(
    *(names for role, names in _SETS.items() if role in FLOPS_PER_ELEMENT), _SETS["norm_composite"]
)
_NO_DATA = _SETS["profiler_view"] | EXTRA_VIEWS | ALLOCATIONS
#: Ops that evaluate a special function once per element, and which one (a measured rate).
_SPECIAL: Mapping[str, str] = {
    name: function
    for function, names in {
        "exp": "exp exp_ exp2 exp2_ expm1 expm1_ sigmoid sigmoid_ silu silu_ silu_backward elu "
        "elu_ celu selu softplus logsumexp special_expit " + " ".join(SOFTMAX),
        "tanh": "tanh tanh_ mish mish_",
        "erf": "erf erf_ erfc erfc_ erfinv gelu gelu_ gelu_backward",
        "cos": "sin sin_ cos cos_ tan tan_",
        "log": "log log_ log2 log2_ log10 log10_ log1p log1p_",
    }.items()
    for name in names.split()
}
# Fused attention kernels (torch's formulas assume as many key/value heads as query heads on some
# versions): (forward, layout, position of the packed offsets in the forward, in the backward);
# the forward takes q, k, v first, its backward the gradient and then q, k, v.
_SDPA = "flash_attention_for_cpu fused_attention_overrideable flash_attention efficient_attention"
_ATTENTION = [
    *((f"_scaled_dot_product_{k}", "BHSD", None, None) for k in f"{_SDPA} cudnn_attention".split()),
    ("_flash_attention_forward", "BSHD", 3, 6),
    ("_efficient_attention_forward", "BSHD", 4, 6),
]
#: Fused attention kernels: one exp per score (queries x keys per head) inside the kernel.
FUSED_ATTENTION = frozenset(forward for forward, *_ in _ATTENTION)


def special_function(base: str, kwargs: Mapping[str, Any]) -> str:
    """The special function an op (base name, e.g. ``"gelu"``) evaluates per element, or ""."""
    name = "exp" if base in FUSED_ATTENTION else _SPECIAL.get(base, "")
    if name == "erf" and base.startswith("gelu") and kwargs.get("approximate") == "tanh":
        return "tanh"
    return name


#: Profiler name of the call into a torch.compile'd (inductor) graph: on a CPU its fused
#: kernels run inside it.
COMPILED_GRAPH = "## Call CompiledFxGraph"


# ---------------------------------------------------------------- categories


def _op_name(op: Any) -> tuple[str, str]:
    """(``"aten::mm"``, overload or "") of an OpOverload, a packet, or a name in any common spelling."""
    if isinstance(op, torch._ops.OpOverload):
        return op._schema.name, op._overloadname
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op._qualified_op_name, ""
    if not isinstance(op, str):
        raise TypeError(f"categorize: op must be an aten op or 'aten::mm', got {type(op).__name__}")
    name = op.strip() if "::" in op else "aten::" + op.strip().removeprefix("aten.")
    name, _, overload = name.partition(".")
    return name, overload


def _tags_of(op: Any) -> frozenset:
    """The aten tags of ``op``; a bare name (``"aten::max"``) gets its overloads' majority tag."""
    if isinstance(op, torch._ops.OpOverload):
        return frozenset(op.tags)
    name, overload = _op_name(op)
    namespace, _, base = name.partition("::")
    packet = getattr(torch.ops.aten, base, None) if namespace == "aten" else None
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return frozenset()
    if overload in packet.overloads():
        return frozenset(getattr(packet, overload).tags)
    # a bare name: the overloads that take a tensor first (out= variants aside) vote
    voters = [getattr(packet, o) for o in packet.overloads() if "out" not in o]
    tensor_first = [o for o in voters if str(o._schema).partition("(")[2].startswith("Tensor")]
    votes = Counter(t for o in tensor_first for t in o.tags)
    best = max((torch.Tag.pointwise, torch.Tag.reduction), key=votes.__getitem__)
    return frozenset({best}) if votes[best] else frozenset()


def categorize(op: Any) -> str:
    """One of :data:`CATEGORIES` for an ``OpOverload``, a packet, or a name (``"aten::mm"``)."""
    return _categorize(_op_name(op)[0], _tags_of(op))


@lru_cache(maxsize=4096)
def _categorize(name: str, tags: frozenset) -> str:
    # first match wins; a wrapper (linear, conv2d) goes with the work it wraps
    namespace, _, base = name.partition("::")
    if name in _matmul_formulas() or (namespace == "aten" and base in _SETS["matmul_wrapper"]):
        return "matmul"
    if base in _NORMALIZATION:
        return "normalization"
    if base in _SETS["copy"] | EXTRA_VIEWS | ALLOCATIONS:
        return "other"
    if not tags and base.endswith("_") and not base.endswith("__"):
        tags = _tags_of(f"aten::{base[:-1]}")  # masked_fill_ is untagged, masked_fill is not
    if torch.Tag.pointwise in tags or base.startswith(("_foreach_", "_fused_")):
        return "pointwise"
    if torch.Tag.reduction in tags or base in _SETS["untagged_reduction"]:
        return "reduction"
    return "other"


def profiler_category(name: str) -> str:
    """Category of a profiler row's name: :func:`categorize`, or ``"fused"`` for a compiled graph."""
    if name.startswith(COMPILED_GRAPH):
        return "fused"
    return categorize(name) if name.startswith("aten::") else "other"


def moves_no_data(name: str) -> bool:
    """A profiler row that only makes a view, allocates or reads metadata (``aten::view``)."""
    return name.startswith("aten::") and name.removeprefix("aten::") in _NO_DATA


# ---------------------------------------------------------------- FLOP formulas


def _dims(t: torch.Tensor, layout: str) -> tuple[int, int, int, int]:
    """(batch, heads, sequence, head dim) of an attention operand in ``"BHSD"`` or ``"BSHD"``."""
    *batch, a, b, d = t.shape
    heads, seq = (a, b) if layout == "BHSD" else (b, a)
    return math.prod(batch), heads, seq, d


def _lengths(offsets: torch.Tensor, total: int) -> list[int]:
    if offsets.device.type == "meta":
        return [total] * (offsets.numel() - 1)  # no data: every sequence at most all tokens
    return [int(n) for n in offsets.diff().tolist()]


def _attention(first: int, layout: str, backward: bool, cum: int | None = None) -> Callable:
    """QK^T and PV FLOPs per query head (GQA too) of an op with q, k, v at ``args[first:]``."""

    def flops(*args, **kwargs) -> int:
        q, k, v = args[first : first + 3]
        # packed (total tokens, heads, dim) inputs carry sequence offsets at args[cum:cum + 2]
        cum_q, cum_k = [*args[cum : cum + 2], None, None][:2] if cum is not None else (None, None)
        if cum_q is not None:
            heads, d, dv = q.shape[-2], q.shape[-1], v.shape[-1]
            lq = _lengths(cum_q, q.shape[-3])
            lk = _lengths(cum_k if cum_k is not None else cum_q, k.shape[-3])
            pairs = sum(a * b for a, b in zip(lq, lk, strict=True))
        else:
            batch, heads, sq, d = _dims(q, layout)
            sk, dv = _dims(k, layout)[2], v.shape[-1]
            pairs = batch * sq * sk
        return 2 * heads * pairs * (3 * d + 2 * dv if backward else d + dv)

    return flops


def _sequence_lengths(t: torch.Tensor) -> list[int]:
    """Token count of each sequence in a (batch, seq, embed) tensor, nested or not."""
    if t.is_nested:
        return [int(n) for n in t._nested_tensor_size()[:, 0].tolist()]
    if t.dim() == 2:  # one unbatched sequence (seq, embed)
        return [t.shape[0]]
    return [t.shape[1]] * t.shape[0]


def _attention_block_flops(lengths_q, lengths_k, embed_dim: int) -> int:
    """Q/K/V and output projections plus QK^T and PV, summed over sequences."""
    e = embed_dim
    return sum(
        2 * e * e * (lq + 2 * lk) + 2 * lq * e * e + 4 * lq * lk * e
        for lq, lk in zip(lengths_q, lengths_k, strict=True)
    )


def _transformer_layer_flops(src, embed_dim, num_heads, *args, **kwargs) -> int:
    """nn.TransformerEncoderLayer's fast path: the attention block plus two FFN matmuls."""
    ffn_weight_1 = args[11] if len(args) > 11 else kwargs["ffn_weight_1"]
    ffn_dim, e = int(ffn_weight_1.shape[0]), int(embed_dim)
    lengths = _sequence_lengths(src)
    return _attention_block_flops(lengths, lengths, e) + sum(4 * n * e * ffn_dim for n in lengths)


def _rnn(matrices: Callable[[tuple], Any], passes: int = 1) -> Callable[..., int]:
    """A recurrent layer's formula: each weight matrix meets every row (a backward: twice)."""

    def flops(*args, **kwargs) -> int:
        x = args[0]  # a row per time step of every sequence (padded or packed)
        rows = x.numel() // x.shape[-1] if x.dim() else 0
        weights = sum(w.numel() for w in _touched.tensors(matrices(args)) if w.dim() == 2)
        return 2 * passes * rows * weights

    return flops


def _mm_like(index: int) -> Callable[..., int]:
    """``2*M*K*N`` for an op whose ``args[index]``, ``args[index + 1]`` are the two matrices."""
    return lambda *args, **kwargs: _mm(args[index], args[index + 1])


def _mm(a: torch.Tensor, b: torch.Tensor) -> int:
    """2*M*K*N; with a sparse operand, a multiply-add per stored value and dense column (or row)."""
    rows = a.shape[-2] if a.dim() > 1 else 1
    cols = b.shape[-1] if b.dim() > 1 else 1
    a_sparse, b_sparse = a.layout != torch.strided, b.layout != torch.strided
    if a_sparse and b_sparse:  # sparse @ sparse, on average
        return 2 * _touched.nnz(a) * _touched.nnz(b) // max(a.shape[-1], 1)
    if a_sparse or b_sparse:
        return 2 * _touched.nnz(a) * cols if a_sparse else 2 * _touched.nnz(b) * rows
    return 2 * math.prod(a.shape[:-2]) * rows * a.shape[-1] * cols


_OUR_FORMULAS: dict[str, Callable[..., int]] = {
    **{
        name: formula
        for forward, layout, cum, cum_back in _ATTENTION
        for name, formula in (
            (forward, _attention(0, layout, False, cum)),
            (forward.removesuffix("_forward") + "_backward", _attention(1, layout, True, cum_back)),
        )
    },
    # fused layers
    "_transformer_encoder_layer_fwd": _transformer_layer_flops,
    # nn.MultiheadAttention's fused inference path: (query, key, value, embed_dim, ...)
    "_native_multi_head_attention": lambda q, k, v, e, *args, **kwargs: _attention_block_flops(
        _sequence_lengths(q), _sequence_lengths(k), int(e)
    ),
    # nn.LSTM/GRU: on a CPU W_ih and W_hh at args[1:3], on CUDA every layer's in a list at args[1]
    "mkldnn_rnn_layer": _rnn(lambda args: args[1:3]),
    "mkldnn_rnn_layer_backward": _rnn(lambda args: args[1:3], passes=2),
    "_cudnn_rnn": _rnn(lambda args: args[1]),
    "_cudnn_rnn_backward": _rnn(lambda args: args[1], passes=2),
    # matrix products torch's table leaves out, and every product with a sparse operand:
    # 2*M*K*N with the two matrices at args[0:2] or, after the added tensor, args[1:3]
    **dict.fromkeys(
        _names("mm bmm _int_mm mv dot vdot _sparse_mm _sparse_sparse_matmul"), _mm_like(0)
    ),
    **dict.fromkeys(
        _names("addmm baddbmm _addmm_activation addbmm addmv _sparse_addmm sspaddmm"), _mm_like(1)
    ),
}


@lru_cache(maxsize=1)
def _matmul_formulas() -> dict[str, Callable[..., int]]:
    """Ours first (keyed ``aten::mm``), then torch's registered formulas for the rest."""
    from torch.utils.flop_counter import flop_registry

    formulas = {f"aten::{name}": formula for name, formula in _OUR_FORMULAS.items()}
    for target, formula in flop_registry.items():
        name = getattr(target, "_qualified_op_name", None)
        if name is not None:
            formulas.setdefault(name, formula)
    return formulas


def has_matmul_formula(name: str) -> bool:
    """Whether op ``name`` (``"aten::mm"``) has a matmul FLOP formula."""
    return name in _matmul_formulas()


def matmul_flops(name: str, args: tuple, kwargs: dict, out: Any) -> int | None:
    """FLOPs of matmul-like op ``name`` (``"aten::mm"``) called on ``args``; None if no formula."""
    formula = _matmul_formulas().get(name)  # ours take torch's out_val too, and leave it
    return None if formula is None else int(formula(*args, out_val=out, **kwargs))


def flops_per_element(base: str, category: str) -> float:
    """:data:`FLOPS_PER_ELEMENT` of op ``base`` (``"native_layer_norm"``) in ``category``."""
    if category == "normalization":
        category = next((k for k in FLOPS_PER_ELEMENT if base in _SETS.get(k, ())), "norm")
    return FLOPS_PER_ELEMENT.get(category, 0)
