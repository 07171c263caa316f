"""Headless Chromium: find it, and render the report into a PNG (used by the tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tabrepro.errors import InputError

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")


class BrowserError(InputError, RuntimeError):
    """Headless Chromium is missing or failed."""


def find_chromium() -> str | None:
    """Path of a Chromium-family browser on PATH (or $TABREPRO_CHROMIUM), or None."""
    explicit = os.environ.get("TABREPRO_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else shutil.which(explicit)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(
    page: Path, png: Path, *, width: int = 1280, height: int = 2400, timeout: float = 120.0, browser: str | None = None
) -> Path:
    """Render an HTML file with headless Chromium into a PNG (raises BrowserError on failure)."""
    browser = browser or find_chromium()
    if browser is None:
        raise BrowserError("no Chromium found on PATH (install Debian's `chromium` package)")
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tabrepro-chromium-") as profile:
        command = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--no-first-run",
            "--no-default-browser-check",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            Path(page).resolve().as_uri(),
        ]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise BrowserError(f"{browser} did not finish within {timeout:.0f} s") from None
    if not png.is_file() or png.stat().st_size == 0:
        raise BrowserError(f"{browser} wrote no screenshot (exit {run.returncode}): {run.stderr[-2000:]}")
    return png
