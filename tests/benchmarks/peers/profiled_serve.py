"""``toolkernel`` under a memory profiler, for ``replicas_load.py --profile``. Not a test.

    python tests/benchmarks/peers/profiled_serve.py serve APP --transport http ...

Runs the ``toolkernel`` command line as ``python -m toolkernel`` would. The first SIGUSR1
starts ``tracemalloc`` (so imports and start-up are not traced: only what is allocated
from then on); each later one writes ``$TK_PROFILE_OUT.<n>.txt``: the allocation sites
that grew most since the first snapshot, and the object counts by type that grew most.
"""

from __future__ import annotations

import gc
import os
import runpy
import signal
import sys
import tracemalloc
from collections import Counter
from typing import Any

_base: list[Any] = []
_written = [0]


def _dump(signum: int, frame: Any) -> None:
    if not tracemalloc.is_tracing():
        tracemalloc.start(12)
        return
    gc.collect()
    mine = [tracemalloc.Filter(False, f, all_frames=True) for f in (tracemalloc.__file__, __file__)]
    snapshot = tracemalloc.take_snapshot().filter_traces(mine)
    counts = Counter(type(o).__qualname__ for o in gc.get_objects())
    if not _base:
        _base.extend((snapshot, counts))
    out = f"{os.environ['TK_PROFILE_OUT']}.{_written[0]}.txt"
    _written[0] += 1
    lines = [f"traced {tracemalloc.get_traced_memory()[0] / 2**20:.2f} MiB"]
    for stat in snapshot.compare_to(_base[0], "traceback")[:12]:
        lines.append(f"{stat.size_diff / 1024:+.1f} KiB {stat.count_diff:+d} blocks")
        lines += ["    " + line for line in stat.traceback.format()[-12:]]
    grown = sorted(((n - _base[1].get(k, 0), k) for k, n in counts.items()), reverse=True)
    lines += [f"{diff:+d} {name}" for diff, name in grown[:25]]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _dump)
    sys.argv = ["toolkernel", *sys.argv[1:]]
    runpy.run_module("toolkernel", run_name="__main__")
