"""The status page in a real browser: headless Chromium (Debian's ``chromium``, see the
Makefile's system packages) loads ``/debug/status`` from a running proxy without a console
error, and renders it (a screenshot)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from tests.observability.conftest import ObservedProxy, run

CHROMIUM = "/usr/bin/chromium"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


async def test_status_page_loads_in_headless_chromium_without_console_errors(
    observed_proxy: ObservedProxy, tmp_path: Path
) -> None:
    conn = observed_proxy.connect()
    try:
        run(conn, "select customer_id from customer where customer_id = 3")
    finally:
        conn.close()
    screenshot = tmp_path / "status.png"
    proc = await asyncio.create_subprocess_exec(
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr", "--v=0", "--window-size=1280,1600", f"--screenshot={screenshot}",
        observed_proxy.url + "/debug/status",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = stderr.decode(errors="replace") + stdout.decode(errors="replace")
    assert proc.returncode == 0, log
    # Chromium logs every console message (errors, failed resource loads) as INFO:CONSOLE
    console = [line for line in log.splitlines() if re.search(r":CONSOLE[:(]", line)]
    assert console == [], "\n".join(console)
    image = screenshot.read_bytes()
    assert image.startswith(PNG_SIGNATURE) and len(image) > 20_000  # a rendered page, not a blank one
