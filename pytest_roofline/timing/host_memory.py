"""How much host memory this process may still take: what the OS has free, and what its cgroup allows.

``MemAvailable`` (``/proc/meminfo``) is the machine's; a container or a CI job's cgroup may allow
less (``memory.max`` in cgroup v2, ``memory.limit_in_bytes`` in v1, less what the group already
uses). A buffer sized from the first alone can get the process killed by the second.
"""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def available_memory(*, proc: Path = PROC, cgroup_root: Path = CGROUP_ROOT) -> int | None:
    """Bytes this process may still allocate: the smaller of ``MemAvailable`` and its cgroup's room;
    None when neither can be read (not Linux)."""
    figures = [
        figure for figure in (mem_available(proc), _cgroup_room(proc, cgroup_root)) if figure is not None
    ]
    return min(figures) if figures else None


def mem_available(proc: Path = PROC) -> int | None:
    """The kernel's ``MemAvailable``, in bytes; None where it cannot be read."""
    try:
        for line in (proc / "meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room(proc: Path, root: Path) -> int | None:
    """The limit of this process's memory cgroup less what the group uses (v2, then v1); None where
    no limit is set or it cannot be read."""
    try:
        lines = (proc / "self" / "cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        relative = path.lstrip("/")
        if hierarchy == "0" and not controllers:  # v2: one unified hierarchy
            room = _room(root / relative, "memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            room = _room(root / "memory" / relative, "memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        if room is not None:
            return room
    return None


def _room(folder: Path, limit_file: str, usage_file: str) -> int | None:
    try:
        limit = (folder / limit_file).read_text(encoding="ascii").strip()
        if limit == "max" or int(limit) >= 2**60:  # v1 writes "no limit" as a huge page-rounded number
            return None
        used = int((folder / usage_file).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    return max(int(limit) - used, 0)
