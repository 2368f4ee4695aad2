"""`make bench`: run every benchmark module in this folder, one after another.

`python -m tests.benchmarks [name ...]` runs only the named ones (e.g. `proxy`, `messaging`, `cdc`, `tpch`, `differential`)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    wanted = [f"bench_{a.removeprefix('bench_')}" for a in argv]
    for name in names:
        if wanted and name not in wanted:
            continue
        print(f"\n=== {name} ===", flush=True)
        module = importlib.import_module(f"tests.benchmarks.{name}")
        module.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
