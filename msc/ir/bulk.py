"""Building many graph objects at once without the cyclic garbage collector's re-scans.

# NOTE: why: CPython runs a full collection each time the objects that survived earlier
# collections grow by a quarter, and each full collection walks every live container. Parsing
# or loading a 1M-node graph creates millions of such objects and no garbage cycles, so the
# collector's walks were about half of the time (and grew with whatever else the process
# held). ``paused()`` turns it off for the duration and restores the previous state; the
# objects built are then collected normally (one pass each generation, not one per growth
# step).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Disable the cyclic garbage collector inside the block (nested uses are fine)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
