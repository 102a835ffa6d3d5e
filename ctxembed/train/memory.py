"""A training process keeps the memory it frees: glibc's malloc is told not to give it back to the system.

A training step allocates the same large arrays each time (the tape of every layer, the gradients) and
frees them all at its end. By default glibc returns such memory to the system (large blocks are their
own mappings; the heap's top is trimmed), so the next step takes every page again through a page fault
that zeroes it: measured on MiniLM's forward + backward, some 15% of the CPU time was the system's
(benchmarks/encoder_backward_speed.py reports ``system_s`` and ``faults``). Fixing the two thresholds
keeps the freed blocks in the heap for the next step; the process's peak memory is the same, it only
stays at its peak. Only a process that trains calls :func:`keep_freed_memory`, once, before it trains;
elsewhere (another C library, another system) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 * 1024 * 1024  # bytes: the largest glibc accepts; a larger block keeps its own mapping
TRIM_THRESHOLD = 1024**3  # bytes of free heap top kept before any is given back


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks of up to MMAP_THRESHOLD bytes in the heap and not trim it: True when
    it took both settings, False where there is no glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
