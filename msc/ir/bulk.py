"""Building many graph objects at once without the cyclic garbage collector's re-scans.

# NOTE: why: CPython runs a full collection each time the objects that survived earlier
# collections grow by a quarter, and each full collection walks every live container. Parsing
# or loading a 1M-node graph creates millions of such objects and no garbage cycles, so the
# collector's walks were about half of the time (and grew with whatever else the process
# held). ``paused()`` turns it off for the duration and restores the previous state; the
# objects built are then treated as long-lived (moved to the oldest generation, examined at
# the next full collection) rather than walked as new objects on the way out.
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
            if gc.get_freeze_count() == 0:
                _promote()
            gc.enable()


def _promote() -> None:
    """Move every tracked object into the oldest generation without walking them.

    With the collector off, everything built in the block counts as new: the first allocation
    after re-enabling it would run a young-generation collection over all of it (about a
    third of the time a 1M-node parse takes, in one pass over memory the parse left cold).
    freeze() then unfreeze() splices the generations' lists into the oldest one instead; the
    objects are examined at the next full collection, as long-lived objects are. Skipped when
    the program keeps frozen objects of its own (unfreeze would release them)."""
    gc.freeze()
    gc.unfreeze()
