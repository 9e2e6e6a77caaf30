"""bl.diagnose on the model zoo: how often is the verdict the expected regime on this CPU?

For every workload of the zoo at both sizes (:mod:`brrrlib.zoo`'s and the ten
more in benchmarks/zoo_more), prints the FLOPs ``bl.count`` finds beside the
hand formula, the regime expected on a CPU, the verdict and its confidence,
the three shares (each regime's floor over the measured time) and the time
per call; then the accuracy of each round. The bar: at least 90% of verdicts
right over the rounds, and no high-confidence verdict wrong. Every wrong
verdict is listed with its evidence. Run:

    python benchmarks/diagnose_zoo.py [--rounds 2] [--threads N] [--only gpt_decode bert]

Each diagnosis runs all its probes (count, benchmark, doubled-batch comparison,
trace). Verdicts are a statistical property of the machine as it is, so they
are measured here and quoted in notes; the test suite asserts only a subset
that holds on a busy machine (tests/test_zoo.py). Ten minutes or so for two
rounds on a 2-core CPU; more when other programs share it, and the header
says how much CPU time the ceilings' measurement got.
"""

import argparse
import sys
import time
from dataclasses import dataclass

import torch
import zoo_more

import brrrlib as bl
from brrrlib import _fmt, zoo

BAR_RIGHT = 0.90
HEADER = (
    "workload",
    "size",
    "FLOPs",
    "vs hand",
    "expected",
    "verdict",
    "conf",
    "compute",
    "memory",
    "overhead",
    "time",
)


@dataclass(frozen=True)
class Result:
    """One diagnosis of one zoo entry in one round."""

    entry: zoo.ZooEntry
    round: int
    diagnosis: bl.Diagnosis

    @property
    def right(self) -> bool:
        """The verdict is the regime expected on a CPU."""
        return self.diagnosis.regime == self.entry.expected_cpu

    def cells(self) -> list[str]:
        """This result's row of the table."""
        d, e = self.diagnosis, self.entry
        flops = d.counts.flops
        vs_hand = "=" if flops == e.hand_flops else f"{flops / e.hand_flops:.3f}x"
        mark = "" if self.right else " X"
        return [
            e.name,
            e.size,
            _fmt.si(flops, "FLOP"),
            vs_hand,
            e.expected_cpu,
            d.regime + mark,
            d.confidence,
            *(_fmt.percent(d.shares[k], 1.0) for k in ("compute", "memory", "overhead")),
            _fmt.seconds(d.seconds),
        ]


def diagnose_round(entries, built, ceilings, n: int, budget_s: float) -> list[Result]:
    """Diagnose every entry once, with every probe; one progress line each on stderr."""
    results = []
    for e in entries:
        fn, args = built[e.label]
        t0 = time.perf_counter()
        d = bl.diagnose(
            fn, *args, ceilings=ceilings, budget_s=budget_s, progress=False, label=e.label
        )
        results.append(Result(e, n, d))
        print(
            f"  round {n}: {e.label:<20} {d.regime:<8} ({d.confidence}) "
            f"{time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return results


def table(results: list[Result]) -> str:
    """The results as an aligned text table."""
    rows = [list(HEADER), *(r.cells() for r in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i in (0, 1, 4, 5, 6) else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )


def evidence(r: Result) -> str:
    """What a wrong verdict's probes said, in one paragraph."""
    d, v = r.diagnosis, r.diagnosis.verdict
    shares = ", ".join(f"{k} {d.shares[k]:.1%}" for k in ("compute", "memory", "overhead"))
    parts = [f"shares {shares}"]
    if d.busy is not None:
        parts.append(f"device busy {d.busy.busy:.0%}")
    if d.batch is not None:
        b = d.batch
        grew = ", ".join(f"{k} x{g:.2f}" for k, g in b.growth.items())
        parts.append(
            f"batch x2 took x{b.time_ratio:.2f} (x{b.low:.2f}-x{b.high:.2f}, "
            f"{'decided' if b.narrow else 'undecided'}; counts grew {grew}; follows "
            f"{', '.join(sorted(b.follows)) or 'nothing'})"
        )
    if v.settled_by:
        parts.append(f"settled by {v.settled_by}")
    if v.against:
        parts.append("against: " + ", ".join(f"{k} {val}" for k, val in v.against))
    notes = "; ".join(d.notes)
    return (
        f"{r.entry.label} (round {r.round}): expected {r.entry.expected_cpu} "
        f"({r.entry.cpu_reason}), got {d.regime} ({d.confidence}). "
        + "; ".join(parts)
        + (f". Notes: {notes}" if notes else "")
    )


def accuracy(results: list[Result]) -> tuple[str, bool]:
    """One line per round and overall, and whether the bar is met."""
    lines, rounds = [], sorted({r.round for r in results})
    for n in [*rounds, None]:
        rs = [r for r in results if n is None or r.round == n]
        right = sum(r.right for r in rs)
        high_wrong = sum(not r.right and r.diagnosis.confidence == "high" for r in rs)
        what = f"round {n}" if n is not None else "overall"
        lines.append(
            f"{what}: {right}/{len(rs)} right ({right / len(rs):.0%}), "
            f"{high_wrong} high-confidence verdict(s) wrong"
        )
    total_right = sum(r.right for r in results) / len(results)
    passed = total_right >= BAR_RIGHT and not any(
        not r.right and r.diagnosis.confidence == "high" for r in results
    )
    return "\n".join(lines), passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--budget", type=float, default=0.2, help="budget_s of each diagnose")
    parser.add_argument("--only", nargs="*", default=None, help="workload names to run")
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    entries = [e for e in zoo_more.every() if not opts.only or e.name in opts.only]
    ceilings = bl.measure_ceilings("cpu")
    print(ceilings, end="\n\n")
    print("building the zoo", file=sys.stderr, flush=True)
    built = {e.label: e.factory() for e in entries}
    results: list[Result] = []
    for n in range(1, opts.rounds + 1):
        results += diagnose_round(entries, built, ceilings, n, opts.budget)
    for n in range(1, opts.rounds + 1):
        print(f"round {n} ({torch.get_num_threads()} threads)")
        print(table([r for r in results if r.round == n]), end="\n\n")
    summary, passed = accuracy(results)
    print(summary)
    print(
        f"bar (>= {BAR_RIGHT:.0%} right, no high-confidence verdict wrong): "
        f"{'met' if passed else 'NOT met'}"
    )
    wrong = [r for r in results if not r.right]
    if wrong:
        print("\nwrong verdicts:")
        for r in wrong:
            print(" - " + evidence(r))


if __name__ == "__main__":
    main()
