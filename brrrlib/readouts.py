"""The sentences the chapters print, written from the numbers just measured.

A Markdown cell cannot look at a measurement, so a claim that depends on this
machine (is the matmul close to its roof? did bf16 help, and why?) is printed
by a small function here that reads the measured numbers and says what they
show, on a laptop CPU and on an H100 alike. Each returns plain text; the tests
run them with a CPU's ceilings and with an H100's recorded ones and check
what they say.
"""

from __future__ import annotations

from brrrlib import _fmt  # noqa: F401

__all__: list[str] = []


# ------------------------------------------------------------------ chapters 00 to 02


# ------------------------------------------------------------------ chapters 03 and 04
