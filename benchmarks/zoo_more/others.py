"""An MLP, an LSTM, a recommender, a graph network and a mixture of experts.

Shapes in the comments: B batch, T time steps, H hidden width, N graph
nodes (or tokens), E edges, D embedding width.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from brrrlib.zoo import HandCount, Tally

__all__ = [
    "GCN",
    "DLRM",
    "LSTMClassifier",
    "MLP",
    "MoE",
    "dlrm_count",
    "gcn_count",
    "gcn_graph",
    "lstm_count",
    "mlp_count",
    "moe_count",
]


# ----------------------------------------------------------------------------- MLP


class MLP(nn.Module):
    """``Linear -> ReLU`` repeated, then a last ``Linear``: ``widths[0] -> ... -> widths[-1]``."""

    def __init__(self, widths: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(widths, widths[1:], strict=False)):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(widths) - 2 else [])
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, widths[0])`` -> ``(B, widths[-1])``."""
        return self.layers(x)


def mlp_count(widths: tuple[int, ...], b: int) -> HandCount:
    """MLP FLOPs: ``sum_i 2*B*w_i*w_(i+1)`` for the matmuls, ``+ B*w_i`` per hidden ReLU."""
    tally = Tally()
    for i, (a, c) in enumerate(zip(widths, widths[1:], strict=False)):
        tally.linear(b, a, c)
        if i < len(widths) - 2:
            tally.pointwise(b * c)
    return tally.done()


# ----------------------------------------------------------------------------- LSTM


class LSTMClassifier(nn.Module):
    """Token embeddings, a stacked ``nn.LSTM``, and a classifier on the last time step."""

    def __init__(self, vocab: int, d: int, hidden: int, layers: int, classes: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids ``(B, T)`` -> class logits ``(B, classes)`` from the last step."""
        out, _ = self.lstm(self.embed(idx))  # (B, T, H)
        return self.head(out[:, -1])


def lstm_count(
    vocab: int, d: int, hidden: int, layers: int, classes: int, b: int, t: int
) -> HandCount:
    """LSTM FLOPs: ``2*B*T * sum_l 4H*(I_l + H)`` plus the classifier ``2*B*H*classes``.

    Each time step multiplies the layer's input (width ``I_l``: ``d`` for
    the first layer, ``H`` after) and its previous hidden state by the four
    gates' weights. The gates' sigmoids, tanhs and the cell update run
    inside the fused LSTM op (``mkldnn_rnn_layer`` on a CPU) and, as for any
    fused op, only its matmuls are counted.
    """
    n, h = b * t, hidden
    tally = Tally()
    tally.lookup(n, d)
    for _ in range(2):  # zero initial h and c, (layers, B, H)
        tally.move(0, layers * b * h)
    if b > 1:
        tally.move(n * d, n * d)  # the input, copied to time-major order (a view for one sequence)
    for layer in range(layers):
        width = d if layer == 0 else h
        tally.recurrent(
            n,
            4 * h * (width + h),
            biases=8 * h,
            read=n * width + 2 * b * h,
            written=n * h + 2 * b * h,
        )
    for _ in range(2):  # the final h and c, stacked over layers
        tally.move(layers * b * h, layers * b * h)
    tally.linear(b, h, classes)
    return tally.done()


# ----------------------------------------------------------------------------- DLRM


class DLRM(nn.Module):
    """A recommender after DLRM (Naumov et al. 2019): big embedding tables, small MLPs.

    Dense features go through a bottom MLP; each categorical feature looks up
    and sums ``bag`` rows of its own table (``nn.EmbeddingBag``); the pairwise
    dot products of all those vectors, with the dense vector, feed a top MLP
    and a sigmoid: the click probability.
    """

    def __init__(self, dense: int, tables: int, rows: int, d: int, top: int) -> None:
        super().__init__()
        self.bottom = MLP((dense, 2 * d, d))
        self.tables = nn.ModuleList(nn.EmbeddingBag(rows, d, mode="sum") for _ in range(tables))
        li, lj = torch.tril_indices(tables + 1, tables + 1, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.top = MLP((d + li.numel(), top, 1))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """Dense features ``(B, n)``, ids ``(B, tables, bag)`` -> click probabilities ``(B, 1)``."""
        x = F.relu(self.bottom(dense))  # (B, D)
        pooled = [table(sparse[:, i]) for i, table in enumerate(self.tables)]  # each (B, D)
        z = torch.stack([x, *pooled], dim=1)  # (B, tables + 1, D)
        dots = torch.bmm(z, z.transpose(1, 2))[:, self.li, self.lj]  # (B, pairs)
        return torch.sigmoid(self.top(torch.cat((x, dots), dim=1)))


def dlrm_count(dense: int, tables: int, d: int, top: int, b: int, bag: int) -> HandCount:
    """DLRM FLOPs: bottom MLP ``2B(n*2D + 2D*D)``, dots ``2B(t+1)^2*D``, top ``2B((D+P)*top + top)``.

    (``n = dense`` features, 13 in the Criteo data; ``t`` tables, ``P =
    t(t+1)/2`` pairs.) Plus one FLOP per element of the three ReLUs
    (``2BD + BD + B*top``) and the sigmoid (``B``). The bag sums inside
    ``nn.EmbeddingBag`` count 0 FLOPs: the counter files the op under
    indexing (by the reduction convention they would be ``B*t*bag*D``
    additions, ~1% of this workload's FLOPs, and far from its bytes).
    """
    pairs = tables * (tables + 1) // 2
    tally = Tally()
    tally.linear(b, dense, 2 * d)
    tally.pointwise(b * 2 * d)
    tally.linear(b, 2 * d, d)
    tally.pointwise(b * d)  # the relu after the bottom MLP
    for _ in range(tables):
        if b > 1:
            tally.move(b * bag, b * bag, kind="indices")  # sparse[:, i] copied to contiguous ids
        tally.move(0, 0, indices=b)  # the bag offsets, an arange
        # reads the ids, the offsets and the rows; writes the sums and two (B,) int64 side outputs
        tally.lookup(b * bag, d, written=b * d, other_indices=3 * b)
    tally.move((tables + 1) * b * d, (tables + 1) * b * d)  # stack
    tally.bmm(b, tables + 1, d, tables + 1)
    tally.move(b * pairs, b * pairs, indices=2 * pairs)  # gather the lower triangle
    tally.move(b * (d + pairs), b * (d + pairs))  # cat
    tally.linear(b, d + pairs, top)
    tally.pointwise(b * top)
    tally.linear(b, top, 1)
    tally.pointwise(b)  # sigmoid
    return tally.done()


# ----------------------------------------------------------------------------- GCN


def gcn_graph(
    nodes: int, degree: int, *, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A random graph with self-loops: ``(src, dst, weight)``, ``nodes * (degree + 1)`` edges.

    ``weight`` is the GCN's symmetric normalisation ``1 / sqrt(deg(src) * deg(dst))``.
    """
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, nodes, (nodes * degree,), generator=g)
    dst = torch.randint(0, nodes, (nodes * degree,), generator=g)
    loops = torch.arange(nodes)
    src, dst = torch.cat((src, loops)), torch.cat((dst, loops))
    deg = torch.bincount(dst, minlength=nodes).float()
    return src, dst, (deg[src] * deg[dst]).rsqrt()


class GCN(nn.Module):
    """A graph convolutional network (Kipf & Welling 2017), message passing with index ops.

    Each layer: ``h = x @ W``; every edge carries ``h[src] * weight`` to its
    ``dst``, where the messages are summed (``index_add_``); then a bias and
    a ReLU (none after the last layer). The graph lives in the module; the
    node features are the input.
    """

    def __init__(self, widths: tuple[int, ...], graph: tuple[torch.Tensor, ...]) -> None:
        super().__init__()
        self.weights = nn.ModuleList(
            nn.Linear(a, b, bias=False) for a, b in zip(widths, widths[1:], strict=False)
        )
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(b)) for b in widths[1:])
        for name, t in zip(("src", "dst", "edge_weight"), graph, strict=True):
            self.register_buffer(name, t, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Node features ``(N, F_in)`` -> ``(N, F_out)`` after every layer's message passing."""
        for i, (lin, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = lin(x)  # (N, F)
            messages = h.index_select(0, self.src) * self.edge_weight[:, None]  # (E, F)
            x = torch.zeros_like(h).index_add_(0, self.dst, messages) + bias
            x = F.relu(x) if i < len(self.weights) - 1 else x
        return x


def gcn_count(widths: tuple[int, ...], nodes: int, edges: int) -> HandCount:
    """GCN FLOPs, per layer: ``2*N*F_in*F_out`` + ``E*F_out`` (edge weights) + ``N*F_out`` (bias) + ReLU.

    The sums of messages (``index_add_``, ``E*F_out`` additions) count 0
    FLOPs: the counter files the op under indexing. Bytes are where this
    workload lives: each layer gathers ``E`` rows, scales them, and adds them
    into ``N`` rows, so it moves ~``5*E*F`` numbers for ``~3*E*F`` FLOPs.
    """
    tally = Tally()
    for i, (a, f) in enumerate(zip(widths, widths[1:], strict=False)):
        tally.linear(nodes, a, f, bias=False)
        tally.move(edges * f, edges * f, indices=edges)  # h[src]
        tally.pointwise(edges * f, edges * f, edges)  # * edge weight
        tally.move(0, nodes * f)  # zeros_like: a write
        # index_add_: reads each message and the row it adds to, writes that row
        tally.move(2 * edges * f, edges * f, indices=edges)
        tally.pointwise(nodes * f, nodes * f, weights=f)  # + bias
        if i < len(widths) - 2:
            tally.pointwise(nodes * f)
    return tally.done()


# ----------------------------------------------------------------------------- MoE


class MoE(nn.Module):
    """A mixture-of-experts block (Shazeer et al. 2017; top-2 routing as in Mixtral, 2024).

    ``x + moe(LN(x))``: a router scores every token against every expert, each
    token goes to its ``k`` best experts (GELU MLPs), and their outputs,
    weighted by the router's probabilities, are summed back (``index_add_``).
    Written as the loop over experts that readable implementations use, so
    each expert's gather, matmuls and scatter are separate ops.
    """

    def __init__(self, d: int, experts: int, ffn: int, k: int = 2) -> None:
        super().__init__()
        self.k, self.norm = k, nn.LayerNorm(d)
        self.router = nn.Linear(d, experts, bias=False)
        self.up = nn.ModuleList(nn.Linear(d, ffn, bias=False) for _ in range(experts))
        self.down = nn.ModuleList(nn.Linear(ffn, d, bias=False) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens ``(B, T, C)`` -> ``(B, T, C)``, each through its ``k`` experts."""
        B, T, C = x.shape
        h = self.norm(x).view(B * T, C)  # (N, C)
        weight, expert = self.router(h).softmax(dim=-1).topk(self.k, dim=-1)  # (N, k) each
        out = torch.zeros_like(h)
        for e, (up, down) in enumerate(zip(self.up, self.down, strict=True)):
            token, slot = torch.where(expert == e)  # the n_e (token, choice) pairs routed to e
            y = down(F.gelu(up(h[token]))) * weight[token, slot, None]  # (n_e, C)
            out.index_add_(0, token, y)
        return x + out.view(B, T, C)


def moe_count(d: int, experts: int, ffn: int, k: int, b: int, t: int) -> HandCount:
    """MoE FLOPs: ``2*N*C*E`` (router) ``+ N*k*(4*C*F + F + C)`` (experts) ``+ 8*N*C + 5*N*E + E*N*k``.

    N = B*T tokens. However the router splits them, the experts see ``N*k``
    token rows in all: two matmuls ``2*C*F`` each, a GELU on ``F`` and the
    weighting multiply on ``C`` per row. Around them: the LayerNorm (7 per
    element) and the residual add (1), the router's softmax (5 per score),
    and one ``expert == e`` comparison per expert on the ``(N, k)`` choices.
    The top-k, the gathers and the scatter-add (``index_add_``, ``N*k*C``
    additions) count 0 FLOPs: the counter files them under indexing.
    """
    n, c, nk = b * t, d, b * t * k
    tally = Tally()
    tally.layer_norm(n * c, n, c)
    tally.linear(n, c, experts, bias=False)
    tally.softmax(n * experts)
    tally.move(n * experts, nk, indices=nk)  # topk: the k best scores and their experts
    tally.move(0, n * c)  # zeros_like
    for e in range(experts):
        # Each expert's ops are linear in its rows n_e, which add up to N*k however the
        # router splits them: give them all to the first expert and the sum is the same.
        rows = nk if e == 0 else 0
        tally.compare(nk)  # expert == e
        tally.nonzero(nk, rows, dims=2)  # torch.where: (token, slot) of each match
        tally.move(rows * c, rows * c, indices=rows)  # h[token]
        tally.linear(rows, c, ffn, bias=False)
        tally.pointwise(rows * ffn)  # gelu
        tally.linear(rows, ffn, c, bias=False)
        tally.move(rows, rows, indices=2 * rows)  # weight[token, slot]
        tally.pointwise(rows * c, rows * c, rows)  # * weight
        tally.move(2 * rows * c, rows * c, indices=rows)  # index_add_: read, add, write
    tally.pointwise(n * c, n * c, n * c)  # residual
    return tally.done()
