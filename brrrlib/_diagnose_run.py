"""Running the probes of :func:`brrrlib.diagnose` safely: input checks, the doubled batch, failures.

:mod:`brrrlib.diagnosis` holds the method (floors, evidence, verdict); this
module holds what makes it safe to point at any code: arguments checked before
anything runs, tensors on two devices refused, a doubled batch built through
lists and dicts, and every way the doubled batch can fail (an assert on the
batch size, a KeyError, out of memory) turned into a note that skips that one
probe.
"""

from __future__ import annotations

import functools
from typing import Any

from brrrlib import _fmt

__all__ = [
    "run_batch_probe",
    "ceilings_for",
    "ceilings_notes",
    "check_arguments",
    "check_one_device",
    "double_batch",
    "name_of",
    "train_mode_notes",
]


def check_arguments(fn, ceilings, budget_s) -> None:
    if not callable(fn):
        raise TypeError(
            f"fn must be callable (a function or nn.Module), got {type(fn).__name__}; "
            "pass the function itself: bl.diagnose(model, x), not bl.diagnose(model(x))"
        )
    needed = ("matmul_flops_per_s", "vector_flops_per_s", "mem_bandwidth_bytes_per_s",
              "op_overhead_s", "device")  # fmt: skip
    if ceilings is not None and not all(hasattr(ceilings, a) for a in needed):
        raise TypeError(
            f"ceilings must be measured Ceilings (bl.measure_ceilings()), got "
            f"{type(ceilings).__name__}; a spec sheet has no op overhead to judge overhead by"
        )
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or budget_s <= 0:
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")


def check_one_device(fn, args, kwargs) -> None:
    """A workload whose tensors sit on two devices cannot run: say so before measuring."""
    import torch

    found = {str(t.device) for t in _tensors((args, kwargs))}
    if isinstance(fn, torch.nn.Module):
        found |= {str(p.device) for p in fn.parameters()}
    if len({torch.device(d).type for d in found}) > 1:
        raise ValueError(
            f"fn's tensors and parameters are on {', '.join(sorted(found))}: an op needs its "
            "inputs on one device. Move them first, e.g. model.to(x.device) or x.to('cuda')."
        )


def ceilings_notes(ceilings: Any) -> list[str]:
    noise = tuple(getattr(ceilings, "noise_notes", lambda: ())())
    if not noise:
        return []
    return [
        "the ceilings these shares use were noisy when measured (" + "; ".join(noise) + "): a "
        "share can read too high, even above 100%. bl.measure_ceilings(refresh=True) on a "
        "quiet machine, then diagnose again."
    ]


def train_mode_notes(fn) -> list[str]:
    import torch

    if isinstance(fn, torch.nn.Module) and fn.training:
        dropout = any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in fn.modules())
        if dropout:
            return [
                "fn is in training mode with dropout: each call draws new random masks (extra "
                "work and bytes an inference run does not do). For inference numbers, call "
                "model.eval() first; for training, diagnose the whole step."
            ]
    return []


def ceilings_for(device: str, ceilings: Any, say: Any, progress: bool) -> Any:
    """The given ceilings (checked to be of the workload's device), else this device's."""
    import torch

    from brrrlib.ceilings import measure_ceilings

    dev = torch.device(device)
    if ceilings is None:
        say(f"ceilings of {dev} (bl.measure_ceilings; cached after the first time)")
        return measure_ceilings(dev, progress=progress)
    if ceilings.device != dev.type:
        raise ValueError(
            f"ceilings are of a {ceilings.device} ({ceilings.device_name}) but fn ran on "
            f"{dev.type}: a workload is judged against its own device's ceilings. Pass "
            f"ceilings=bl.measure_ceilings({dev.type!r}), or leave ceilings out."
        )
    say(f"ceilings given: {ceilings.device_name}")
    return ceilings


def run_batch_probe(fn, args, kwargs, budget_s, rounds, notes, slow=False):
    """Compare ``fn`` with its doubled batch; (None, None) and a note when it cannot run.

    ``rounds`` is the least number of paired rounds. A ``slow`` call gets just
    those (:func:`brrrlib.diagnosis.diagnose` plans how many fit its time
    limit), with no extra first call or warm-up: counting already ran both
    sides.
    """
    from brrrlib import counting
    from brrrlib.timing import compare

    try:
        doubled = double_batch(args, kwargs)
    except Exception as err:  # noqa: BLE001 -- any failure skips this probe, said in a note
        _skip(notes, "could not build the doubled input", err)
        return None, None
    if doubled is None:
        notes.append(
            "batch probe skipped: no argument is a tensor with a batch dimension. Pass the "
            "input as an argument, e.g. bl.diagnose(model, x), to get it."
        )
        return None, None
    args2, kwargs2 = doubled
    try:
        batch_counts = counting.count(fn, *args2, **kwargs2)
        comparison = compare(
            functools.partial(fn, *args, **kwargs), functools.partial(fn, *args2, **kwargs2),
            budget_s=1e-6 if slow else budget_s, min_rounds=rounds, labels=("batch", "batch x2"),
            warm=slow, warmup_s=0.0 if slow else 0.05,
        )  # fmt: skip
    except Exception as err:  # noqa: BLE001 -- an assert, a KeyError, out of memory: skip, say why
        what = "fn failed when every tensor argument's first dimension was doubled"
        _skip(notes, what, err, _tensor_bytes((args2, kwargs2)))
        return None, None
    return comparison, batch_counts


def _skip(notes: list[str], what: str, err: BaseException, doubled_bytes: int = 0) -> None:
    from brrrlib import devices

    first = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
    if devices.is_out_of_memory(err):
        devices.release_cached_memory()
        notes.append(
            f"batch probe skipped: the doubled batch ran out of memory ({type(err).__name__}: "
            f"{first}); its inputs alone take {_fmt.binary_bytes(doubled_bytes)}, and the call "
            "needs room for twice the activations too. The cached memory was released."
        )
        return
    notes.append(
        f"batch probe skipped: {what} ({type(err).__name__}: {first}). If a weight is passed "
        "as an argument, pass weights inside fn (a closure or an nn.Module) instead."
    )


def _tensors(tree: Any) -> list:
    """Every tensor in nested tuples, lists and dicts."""
    import torch

    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [t for v in tree for t in _tensors(v)]
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _tensors(v)]
    return []


def _tensor_bytes(tree: Any) -> int:
    """Bytes of every tensor in nested tuples, lists and dicts."""
    return sum(t.numel() * t.element_size() for t in _tensors(tree))


def double_batch(args: tuple, kwargs: dict):
    """Every tensor argument with a dimension, repeated along dim 0; None if there is none.

    Tensors inside lists, tuples and dicts are doubled too (``fn(params, grads)``).
    """
    import torch

    found = False

    def double(v):
        nonlocal found
        if isinstance(v, torch.Tensor):
            if v.dim() == 0:
                return v
            found = True
            out = torch.cat([v.detach(), v.detach()], dim=0)
            return out.requires_grad_(v.requires_grad) if v.is_leaf else out
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return type(v)(double(x) for x in v)
        if isinstance(v, dict):
            return {k: double(x) for k, x in v.items()}
        return v

    args2 = tuple(double(a) for a in args)
    kwargs2 = {k: double(v) for k, v in kwargs.items()}
    return (args2, kwargs2) if found else None


def name_of(fn) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "workload" if name == "<lambda>" else name
