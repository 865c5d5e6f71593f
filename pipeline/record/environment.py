"""Where a round ran: an object of strings stored in attempt.json and shown in the report.

Only what can be read without privileges and without running anything; a value that cannot be
read is left out rather than guessed.
"""

from __future__ import annotations

import os
import platform
import pwd
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def cpu_model(cpuinfo: str | None) -> str | None:
    """The first ``model name`` (x86) or ``Model``/``Hardware`` (ARM) line of /proc/cpuinfo."""
    for line in (cpuinfo or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("model name", "Model", "Hardware") and value.strip():
            return value.strip()
    return platform.processor() or None


def _affinity() -> str | None:
    try:
        return str(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return None


def _load_average() -> str | None:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except (AttributeError, OSError):
        return None


def user() -> str | None:
    """The name of the user running the recorder (None where the system cannot say)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name or None
    except (KeyError, AttributeError, OSError):
        return None


def host() -> str | None:
    return platform.node() or None


def capture() -> dict[str, str]:
    """host, user, os, kernel, machine, cpu_model, cpu_count, cpu_affinity, cpu_governor,
    python, load_average (1, 5, 15 min) at the start of the round. host and user say whose
    commands a round ran (``campaign final --confirm`` runs them again only for them)."""
    governor = _read(GOVERNOR)
    found = {
        "host": host(),
        "user": user(),
        "os": platform.system() or None,
        "kernel": platform.release() or None,
        "machine": platform.machine() or None,
        "cpu_model": cpu_model(_read(CPUINFO)),
        "cpu_count": str(os.cpu_count()) if os.cpu_count() else None,
        "cpu_affinity": _affinity(),
        "cpu_governor": governor.strip() if governor else None,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load_average": _load_average(),
    }
    return {key: value for key, value in found.items() if value}
