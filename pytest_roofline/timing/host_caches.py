"""The host CPU's cache levels as the OS describes them (``/sys/devices/system/cpu/cpu0/cache``).

Read here, in the timing layer, because the CPU backend sizes its cache flush by the last level;
the roofs measured over these levels live in :mod:`pytest_roofline.machine.cachelevels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """A cache level as the OS describes it."""

    level: int
    size_bytes: int
    #: one core's own (shared by one CPU), or shared by several
    per_core: bool

    @property
    def name(self) -> str:
        return f"l{self.level}"


def cpu_caches(root: Path = SYSFS_CACHE) -> tuple[CacheInfo, ...]:
    """The data and unified cache levels of CPU 0, smallest level first; () where the OS does not say."""
    found: dict[int, CacheInfo] = {}
    for index in sorted(root.glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            size = parse_cache_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if size > 0 and level not in found:
            found[level] = CacheInfo(level, size, per_core=_shared_by(index) == 1)
    return tuple(found[level] for level in sorted(found))


def parse_cache_size(text: str) -> int:
    """``"307200K"`` -> 314572800; sysfs writes K (and, rarely, M or G) for KiB/MiB/GiB."""
    text = text.strip().upper().removesuffix("B")
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text[:-1] if scale != 1 else text
    return int(digits) * scale


def _shared_by(index: Path) -> int | None:
    """How many CPUs share the cache (``shared_cpu_list``, ``0-3,8``: 5), None where sysfs does not say."""
    try:
        cpu_list = (index / "shared_cpu_list").read_text()
        count = 0
        for part in cpu_list.strip().split(","):
            if part:
                first, _, last = part.partition("-")
                count += int(last or first) - int(first) + 1
    except (OSError, ValueError):
        return None
    return count
