"""Counting a model by hand, op by op, with the conventions of :mod:`brrrlib.counting`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["HandCount", "Tally"]

_KINDS = ("weights", "activations", "kv_cache", "lookups", "indices", "masks")
_FIXED_BYTES = {"indices": 8, "masks": 1}  # int64 ids, positions and edge lists; bool masks
_ITEMSIZE = 4  # every other tensor is counted as fp32


@dataclass(frozen=True)
class HandCount:
    """A finished hand count: FLOPs, bytes by kind, and the ops that do work."""

    flops: int
    bytes_by_kind: Mapping[str, int]
    work_ops: int
    itemsize: int = _ITEMSIZE

    bytes_moved = property(lambda self: sum(self.bytes_by_kind.values()))  # op by op, unfused

    def bytes_at(self, itemsize: int) -> int:
        """The bytes moved if every floating-point tensor had ``itemsize`` bytes (2 for bf16)."""
        fixed = sum(self.bytes_by_kind.get(kind, 0) for kind in _FIXED_BYTES)
        return (self.bytes_moved - fixed) * itemsize // self.itemsize + fixed

    @property
    def intensity_flops_per_byte(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes_moved if self.bytes_moved else float("inf")

    def largest_kind(self) -> tuple[str, float]:
        """The kind of bytes that dominates, and its fraction of all bytes."""
        kind = max(self.bytes_by_kind, key=self.bytes_by_kind.get)
        return kind, self.bytes_by_kind[kind] / max(self.bytes_moved, 1)


@dataclass
class Tally:
    """A running hand count (a builder; :meth:`done` returns the frozen :class:`HandCount`)."""

    flops: int = 0
    work_ops: int = 0
    _bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_KINDS, 0))

    def _op(self, flops: int, **elements: int) -> None:
        self.flops += int(flops)
        self.work_ops += 1
        for kind, n in elements.items():
            self._bytes[kind] += int(n) * _FIXED_BYTES.get(kind, _ITEMSIZE)

    # -- matrix products ------------------------------------------------------------
    def linear(self, rows: int, k: int, n: int, *, bias: bool = True) -> None:
        """``x @ W.T (+ b)``: ``2*rows*k*n`` FLOPs; reads x, W (and b), writes y."""
        self._op(2 * rows * k * n, activations=rows * k + rows * n, weights=k * n + bias * n)

    def bmm(self, batch: int, m: int, k: int, n: int) -> None:
        """A product of two activations, ``(batch, m, k) @ (batch, k, n)``."""
        self._op(2 * batch * m * k * n, activations=batch * (m * k + k * n + m * n))

    def conv2d(self, b, cin, h, w, cout, k, *, stride=1, pad=None, bias=False):
        """A 2-D convolution; returns the output's ``(height, width)``."""
        pad = k // 2 if pad is None else pad
        ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        out, per_out = b * cout * ho * wo, cin * k * k  # products per output
        read, weights = b * cin * h * w, cout * per_out + bias * cout
        self._op(2 * out * per_out, activations=read + out, weights=weights)
        return ho, wo

    def conv_transpose2d(self, b, cin, h, w, cout, k, *, stride, bias=True):
        """A transposed convolution (``kernel == stride``, no overlap); returns ``(Ho, Wo)``."""
        ho, wo, weight = h * stride, w * stride, cin * cout * k * k
        read, written = b * cin * h * w, b * cout * ho * wo
        self._op(2 * read * cout * k * k, activations=read + written, weights=weight + bias * cout)
        return ho, wo

    def attention(self, b, heads, sq, sk, d, *, kv_heads=None, cached=False) -> None:
        """Fused attention: ``4*B*Hq*Sq*Sk*D``; reads q, k, v; writes out and a logsumexp."""
        kv, kind = b * (kv_heads or heads) * d, "kv_cache" if cached else "activations"
        if cached:  # the new tokens' k, then v, into the cache
            self.move(kv * sq, kv * sq, kind=kind)
            self.move(kv * sq, kv * sq, kind=kind)
        elements = {"activations": 2 * b * heads * sq * d + b * heads * sq}
        elements[kind] = elements.get(kind, 0) + 2 * kv * sk
        self._op(4 * b * heads * sq * sk * d, **elements)

    def recurrent(self, tokens, weight_elements, *, biases, read, written) -> None:
        """A fused RNN layer: ``2*tokens*weights`` (every weight matrix meets every time step)."""
        weights, activations = weight_elements + biases, read + written
        self._op(2 * tokens * weight_elements, weights=weights, activations=activations)

    # -- per-element ops -----------------------------------------------------------
    def pointwise(self, n: int, *reads: int, weights: int = 0) -> None:
        """An elementwise op with ``n`` outputs: ``n`` FLOPs; reads ``reads`` (default: ``n``)."""
        self._op(n, activations=sum(reads or (n,)) + n, weights=weights)

    def mlp(self, rows: int, d: int, hidden: int) -> None:
        """A transformer's MLP: linear ``d -> hidden``, GELU, linear back, the residual add."""
        self.linear(rows, d, hidden)
        self.pointwise(rows * hidden)  # gelu
        self.linear(rows, hidden, d)
        self.pointwise(rows * d, rows * d, rows * d)  # residual

    def inplace(self, n: int, *others: int) -> None:
        """An in-place elementwise op (``relu_``, ``x += y``): reads and writes ``x`` once."""
        self._op(n, activations=2 * n + sum(others))

    def layer_norm(self, n: int, rows: int, d: int) -> None:
        """``native_layer_norm``: 7 FLOPs per element; writes y plus a mean and rstd per row."""
        self._op(7 * n, activations=2 * n + 2 * rows, weights=2 * d)

    def batch_norm(self, n: int, channels: int) -> None:
        """Batch norm in eval (running statistics): 7 FLOPs per element."""
        self._op(7 * n, activations=2 * n, weights=4 * channels)

    def rms_norm(self, n: int, rows: int, d: int) -> None:
        """``nn.RMSNorm`` as six aten ops: ``x**2``, mean, ``+ eps``, rsqrt, ``x * r``, ``* w``."""
        self.pointwise(n)  # x ** 2
        self.reduce(n, rows)  # mean over the last dim
        self.inplace(rows)  # + eps (in place)
        self.pointwise(rows)  # rsqrt
        self.pointwise(n, n, rows)  # x * rsqrt
        self.pointwise(n, n, weights=d)  # * weight

    def softmax(self, n: int) -> None:
        """A softmax over ``n`` elements: 5 FLOPs each (max, subtract, exp, sum, divide)."""
        self._op(5 * n, activations=2 * n)

    def reduce(self, n_in: int, n_out: int) -> None:
        """A sum or mean: one FLOP per input element."""
        self._op(n_in, activations=n_in + n_out)

    # -- data movement (0 FLOPs) ---------------------------------------------------
    def move(self, read: int, written: int, *, kind: str = "activations", indices: int = 0) -> None:
        """A copy, concatenation or max-pool: reads and writes, no arithmetic."""
        elements = {"indices": indices}
        elements[kind] = elements.get(kind, 0) + read + written
        self._op(0, **elements)

    def lookup(self, n_indices, d, *, written=None, other_indices=0) -> None:
        """An embedding lookup: reads the ids and the ``n_indices`` rows it looks up."""
        rows = n_indices * d
        written = rows if written is None else written
        self._op(0, indices=n_indices + other_indices, lookups=rows, activations=written)

    def compare(self, n: int) -> None:
        """``ids == value`` on ``n`` int64 ids: ``n`` FLOPs; writes a boolean mask."""
        self._op(n, indices=n, masks=n)

    def nonzero(self, n: int, found: int, *, dims: int) -> None:
        """The positions of the ``found`` True values in an ``n``-element, ``dims``-D mask."""
        self._op(0, masks=n, indices=found * dims)

    def done(self) -> HandCount:
        """The frozen result."""
        return HandCount(self.flops, MappingProxyType(dict(self._bytes)), self.work_ops)
