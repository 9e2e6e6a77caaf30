"""The sentences the chapters print, written from the numbers just measured.

A Markdown cell cannot look at a measurement, so a claim that depends on this
machine (is the matmul close to its roof? did bf16 help, and why?) is printed
by a small function here that reads the measured numbers and says what they
show, on a laptop CPU and on an H100 alike. Each returns plain text; the tests
run them with a CPU's ceilings and with an H100's recorded ones and check
what they say.
"""

from __future__ import annotations

from brrrlib.readouts import _chapters_00_02, _chapters_03_04

# Written in two private modules (one function per sentence a cell prints), named here.
from brrrlib.readouts._chapters_00_02 import *  # noqa: F403  (chapters 00 to 02)
from brrrlib.readouts._chapters_03_04 import *  # noqa: F403  (chapters 03 and 04)

__all__ = [*_chapters_00_02.__all__, *_chapters_03_04.__all__]
