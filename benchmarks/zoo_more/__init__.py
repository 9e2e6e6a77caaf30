"""The zoo's other workloads: ten more, from nine architectures, on brrrlib.zoo's machinery.

:mod:`brrrlib.zoo` holds the architectures a chapter uses (a ResNet, a ViT,
a Llama-style decoder). These are the rest of the proof that ``bl.count``
and ``bl.diagnose`` work on models people run, kept beside the benchmark and
the tests that use them: a GPT-2-style decoder in prefill and in decode
(:mod:`.gpt`, also the second implementation brrrlib.decoding's tests load
their weights into), a BERT-style encoder and an MLP-Mixer (:mod:`.encoders`),
a U-Net (:mod:`.unet`), and an MLP, an LSTM, a DLRM-style recommender, a
graph network and a mixture of experts (:mod:`.others`). Each is a
``brrrlib.zoo.Row`` (:mod:`.rows`), made an entry by ``ZooEntry.from_row``,
so each has the same hand count, expected CPU regime and GPU predictions as
the package's own::

    import zoo_more                     # with benchmarks/ on sys.path

    for e in zoo_more.every():          # brrrlib.zoo's entries, then these
        print(e)
    zoo_more.entry("gpt_decode", "big")
"""

from __future__ import annotations

import functools

from brrrlib import zoo

from .rows import rows

__all__ = ["entries", "entry", "every", "rows"]


@functools.cache
def entries() -> tuple[zoo.ZooEntry, ...]:
    """These workloads' entries, tiny before big (nothing is built until ``factory()``)."""
    return tuple(zoo.ZooEntry.from_row(row) for row in rows())


def every() -> tuple[zoo.ZooEntry, ...]:
    """Every workload of the zoo: brrrlib.zoo's entries, then these."""
    return (*zoo.entries(), *entries())


def entry(name: str, size: str = "big") -> zoo.ZooEntry:
    """The entry for workload ``name`` at ``size``, from brrrlib.zoo or from here."""
    for e in every():
        if e.name == name and e.size == size:
            return e
    if size not in zoo.SIZES:
        raise ValueError(f"size must be one of {zoo.SIZES}, got {size!r}")
    names = ", ".join(dict.fromkeys(e.name for e in every()))
    raise ValueError(f"name must be one of {names}, got {name!r}")
