"""Starting shard decoder processes quickly and cleanly: a zygote that forks them.

A decoder needs a fresh Python with the binlog library imported (~0.2 s to start from
scratch). Forking the proxy itself would be quicker but unsafe (its threads, sockets and
event loop would be copied half-way), and ``multiprocessing``'s spawn and forkserver
methods re-run the application's ``__main__`` module in every child. So the first
decoder start launches one small helper process per proxy process, the *zygote*: it
imports the decoder modules once, then forks a decoder for each request, handing it the
socket it was sent (``SCM_RIGHTS``). A start then costs a fork (milliseconds).

Lifetimes: the zygote runs in a session of its own (a Ctrl-C in the proxy's terminal is
the proxy's to handle, not its helpers'), exits when the proxy's end of its control
socket closes, and reaps its children itself. A decoder ends when told to (SIGTERM) or
when the proxy's end of its frame socket is gone.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import traceback

from proxy.cdc.binlog_decoder import DecoderSpec

logger = logging.getLogger(__name__)

_LENGTH = 8


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("control socket closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class DecoderLauncher:
    """The proxy's side: one zygote per process, started on first use, shared by every
    event loop and thread (requests are serialized)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._zygote: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    def launch(self, spec: DecoderSpec, frames: socket.socket, log_level: int) -> int:
        """Fork a decoder streaming ``spec`` into ``frames`` (the child's end of a socket
        pair; the caller closes its copy); returns the decoder's pid. Blocks: call it off
        the event loop."""
        payload = pickle.dumps((spec, log_level), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            for attempt in (1, 2):
                control = self._running_control()
                try:
                    socket.send_fds(control, [b"L"], [frames.fileno()])
                    control.sendall(len(payload).to_bytes(_LENGTH, "little") + payload)
                    return int.from_bytes(_recv_exactly(control, _LENGTH), "little")
                except OSError as exc:
                    # The zygote died (killed from outside): start a new one, once.
                    logger.warning(
                        "decoder zygote lost; restarting it",
                        extra={"error": repr(exc), "attempt": attempt},
                    )
                    self._stop_zygote()
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    def _running_control(self) -> socket.socket:
        if self._control is not None and self._zygote is not None:
            if self._zygote.poll() is None:
                return self._control
            self._stop_zygote()
        ours, theirs = socket.socketpair()
        bootstrap = (
            "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
            "from proxy.cdc.decoder_launcher import serve; serve(int(sys.argv[2]))"
        )
        try:
            self._zygote = subprocess.Popen(
                [sys.executable, "-c", bootstrap, json.dumps(sys.path), str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._control = ours
        logger.debug("decoder zygote started", extra={"pid": self._zygote.pid})
        return ours

    def _stop_zygote(self) -> None:
        control, self._control = self._control, None
        zygote, self._zygote = self._zygote, None
        if control is not None:
            control.close()  # the zygote exits at EOF
        if zygote is not None:
            try:
                zygote.wait(timeout=5)
            except subprocess.TimeoutExpired:
                zygote.kill()
                zygote.wait()

    def close(self) -> None:
        with self._lock:
            self._stop_zygote()


launcher = DecoderLauncher()


# -- the zygote ----------------------------------------------------------------------------


def serve(control_fd: int) -> None:
    """The zygote's main loop: one decoder fork per request until the control socket ends."""
    # Imported here, before any fork, so every decoder starts with it loaded.
    from proxy.cdc.decoder_process import run_decoder
    from proxy.worker_cpus import unpin

    unpin()  # decoding is not the pinned worker's load (proxy/worker_cpus.py)
    control = socket.socket(fileno=control_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps our children
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            return
        if not fds:
            return  # the proxy closed its end
        try:
            length = int.from_bytes(_recv_exactly(control, _LENGTH), "little")
            spec, log_level = pickle.loads(_recv_exactly(control, length))
        except (OSError, ConnectionError):
            return
        pid = os.fork()
        if pid == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 0
            try:
                run_decoder(spec, socket.socket(fileno=fds[0]), log_level)
            except BaseException:
                # Nothing reached the proxy through the frames: at least leave the trace.
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        os.close(fds[0])
        try:
            control.sendall(pid.to_bytes(_LENGTH, "little"))
        except OSError:
            return
