"""Bytes touched, not bytes owned: what an op that reads part of a tensor really moves."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

__all__ = ["TOUCHED_BYTES", "nnz", "tensor_bytes", "tensors"]


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements of ``t`` (a sparse tensor: of its indices and values)."""
    if t.layout == torch.sparse_coo:
        return tensor_bytes(t._indices()) + tensor_bytes(t._values())
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return sum(map(tensor_bytes, (t.crow_indices(), t.col_indices(), t.values())))
    if t.layout in (torch.sparse_csc, torch.sparse_bsc):
        return sum(map(tensor_bytes, (t.ccol_indices(), t.row_indices(), t.values())))
    if t.is_nested or t.numel() == 0:
        return t.numel() * t.element_size()
    elements = math.prod(s for s, st in zip(t.shape, t.stride(), strict=True) if st != 0)
    return elements * t.element_size()


def nnz(t: torch.Tensor) -> int:
    """Stored (nonzero) elements of a sparse tensor: what its arithmetic touches."""
    return t._nnz() if t.layout == torch.sparse_coo else int(t.values().numel())


def _lookup(indices: tuple[int, ...], rows: Callable | None = None) -> Callable:
    """An op that reads one element of ``args[0]`` per output element (a gather)."""

    def rule(args, out) -> tuple[int, int]:
        index_bytes = sum(map(tensor_bytes, tensors([args[i] for i in indices if i < len(args)])))
        looked_up = rows(args) if rows else tensors(out)[0].numel()
        written = sum(map(tensor_bytes, tensors(out)))
        return index_bytes + looked_up * args[0].element_size(), written

    return rule


def _scatter_into(
    index: int, source: int | None, positions: Callable, adds: bool | int
) -> Callable:
    """An in-place op writing ``positions(args)`` elements of ``self``, read too if it ``adds``."""

    def rule(args, out) -> tuple[int, int]:
        self_, k = args[0], positions(args)
        read = sum(map(tensor_bytes, tensors(args[index])))
        if source is not None and len(args) > source and isinstance(args[source], torch.Tensor):
            src = args[source]
            read += min(tensor_bytes(src), k * src.element_size())
        # ``adds``: True, False, or the position of an ``accumulate`` argument
        if adds if isinstance(adds, bool) else len(args) > adds and bool(args[adds]):
            read += k * self_.element_size()
        return read, k * self_.element_size()

    return rule


def _indexed_numel(self_: torch.Tensor, indices: list) -> int:
    """How many elements ``self_[indices]`` selects (a boolean mask selects its True count)."""
    shapes, dim, rest = [], 0, 1
    for idx in indices:
        if idx is None:
            rest *= self_.shape[dim]
            dim += 1
        elif idx.dtype in (torch.bool, torch.uint8):
            true = idx.numel() if idx.device.type == "meta" else int(idx.count_nonzero())
            shapes.append((true,))
            dim += idx.dim()
        else:
            shapes.append(tuple(idx.shape))
            dim += 1
    rest *= math.prod(self_.shape[dim:])
    return (math.prod(torch.broadcast_shapes(*shapes)) if shapes else 1) * rest


def _index_fill_positions(args) -> int:
    self_, dim, index = args[0], args[1], args[2]
    return index.numel() * (self_.numel() // max(self_.shape[dim], 1) if self_.dim() else 1)


#: ``{op base name: rule(args, out) -> (bytes read, bytes written)}`` for ops that touch part of
#: a tensor. Every other op reads its inputs and writes its outputs in full.
TOUCHED_BYTES: Mapping[str, Callable[..., tuple[int, int]]] = {
    # gathers: read the index and the elements looked up
    "embedding": _lookup((1,)),  # (weight, indices): one row per index
    "index_select": _lookup((2,)),  # (self, dim, index)
    "gather": _lookup((2,)),  # (self, dim, index)
    "take": _lookup((1,)),  # (self, index)
    "index": _lookup((1,)),  # advanced indexing (self, indices): x[idx], x[mask]
    # (weight, indices, offsets, ..., per_sample_weights): a row per index, summed per bag
    **dict.fromkeys(
        ("_embedding_bag", "_embedding_bag_forward_only"),
        _lookup((1, 2, 6), rows=lambda a: a[1].numel() * a[0].shape[-1]),
    ),
    # scatters: write the positions addressed, read what is written there
    **dict.fromkeys(
        ("index_put_", "_index_put_impl_"),
        _scatter_into(1, 2, lambda a: _indexed_numel(a[0], a[1]), 3),
    ),
    # (self, dim, index, source)
    "index_add_": _scatter_into(2, 3, lambda a: a[3].numel(), True),
    "index_copy_": _scatter_into(2, 3, lambda a: a[3].numel(), False),
    "index_fill_": _scatter_into(2, None, _index_fill_positions, False),
    "scatter_": _scatter_into(2, 3, lambda a: a[2].numel(), False),  # (self, dim, index, src)
    "scatter_add_": _scatter_into(2, 3, lambda a: a[2].numel(), True),
    "scatter_reduce_": _scatter_into(2, 3, lambda a: a[2].numel(), True),
    "put_": _scatter_into(1, 2, lambda a: a[1].numel(), 3),  # (self, index, source)
}


def tensors(tree: Any) -> list[torch.Tensor]:
    """The tensors among the leaves of ``tree`` (a tensor, or lists, tuples, dicts of them)."""
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]
