"""Compile the proxy's hot pure-Python modules with mypyc, in place (issue 15: proxy CPU).

    python -m proxy.native_build            # build (a no-op when the sources are unchanged)
    python -m proxy.native_build --clean    # remove the compiled modules: pure Python again
    SHARDGATE_PURE_PYTHON=1 python -m proxy.native_build    # the same as --clean

``MODULES`` is the one list of what is compiled. The extensions land next to their ``.py``
files (``proxy/wire.cpython-311-….so``), with mypyc's shared runtime in
``proxy/native__mypyc….so``; Python's import system prefers an extension to the source of
the same module, so nothing imports them by name, and removing the ``.so`` files is the pure
Python fallback. The Makefile runs this after ``pip install -e`` and before the tests and
``make run``; a failed build logs one line and leaves pure Python (exit status 1, which the
Makefile reports and ignores).

The build records a digest of the listed sources, of mypyc's version and of the module list
(``build/native-sources.sha256``): an edited module is rebuilt by the next ``make test``, and
tests/proxy/test_native_build.py fails while a compiled module is older than its source
(run without ``make``, a stale extension would silently shadow the edit).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

log = logging.getLogger("shardgate.native_build")

ROOT = Path(__file__).resolve().parents[1]
# Chosen from py-spy profiles of the proxy under `tests.benchmarks proxy` and `messaging`:
# the modules whose own bytecode runs for every fast-path statement (BENCHMARKS.md, "mypyc").
MODULES = (
    "sqltext/lexer.py",
    "sqltext/quoting.py",
    "rewriter/normalize.py",
    "proxy/wire.py",
    "proxy/row_packets.py",
    "proxy/fast_path/routing.py",
    "proxy/fast_path/shard_link.py",
    "proxy/fast_path/protocol.py",
)
# mypyc's shared runtime library, inside the package so the editable install finds it too.
GROUP = "proxy.native"
STAMP = ROOT / "build" / "native-sources.sha256"


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def extensions() -> list[Path]:
    """The compiled files present in the checkout (the modules' and the shared runtime)."""
    stems = [ROOT / p.removesuffix(".py") for p in MODULES] + [ROOT / (GROUP.replace(".", "/") + "__mypyc")]
    return [f for stem in stems for suffix in EXTENSION_SUFFIXES if (f := stem.with_name(stem.name + suffix)).exists()]


def sources_digest() -> str:
    import mypy.version  # the compiler's version: a new mypyc rebuilds

    h = hashlib.sha256(f"{mypy.version.__version__}\n{sys.version}\n{MODULES}\n".encode())
    for p in MODULES:
        h.update((ROOT / p).read_bytes())
    return h.hexdigest()


def is_current() -> bool:
    """True when every listed module is compiled from its present source."""
    try:
        recorded = STAMP.read_text().strip()
    except OSError:
        return False
    return recorded == sources_digest() and len(extensions()) == len(MODULES) + 1


def clean() -> None:
    for f in extensions():
        f.unlink()
    STAMP.unlink(missing_ok=True)


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import Distribution

    os.chdir(ROOT)  # mypyc and build_ext resolve the paths from the checkout
    ext_modules = mypycify(list(MODULES), group_name=GROUP, target_dir="build/mypyc")
    dist = Distribution({"name": "shardgate-native", "ext_modules": ext_modules})
    dist.script_args = ["--quiet", "build_ext", "--inplace", "--build-temp", "build/native-temp"]
    dist.parse_command_line()
    dist.run_commands()
    STAMP.parent.mkdir(exist_ok=True)
    STAMP.write_text(sources_digest() + "\n")


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="native build: %(message)s")
    if "--clean" in argv or os.environ.get("SHARDGATE_PURE_PYTHON") == "1":
        clean()
        log.info("pure Python (compiled modules removed)")
        return 0
    if is_current():
        return 0
    clean()  # a half-built set must not shadow newer sources
    started = time.monotonic()
    try:
        build()
    except (Exception, SystemExit) as e:  # the compiler's, gcc's or setuptools' failure: keep pure Python
        clean()
        log.error("mypyc build failed (%s: %s); the proxy runs pure Python", type(e).__name__, e)
        return 1
    log.info("%d modules compiled with mypyc in %.0f s", len(MODULES), time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
