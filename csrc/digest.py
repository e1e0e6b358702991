"""Digest of the native sources: built into the core and compared by editable checkouts."""

import hashlib
from pathlib import Path


def source_files(csrc: Path) -> list[Path]:
    """Every file whose change must rebuild the core or the spawner: C sources, headers."""
    probe_dir = csrc.parent / "src" / "perflab" / "workloads"
    return [
        *sorted(csrc.glob("*.c")),
        *sorted(csrc.glob("spawner/*.c")),
        *sorted(csrc.glob("spawner/*.h")),
        *sorted(csrc.glob("*.h")),
        *sorted(probe_dir.glob("*.h")),
    ]


def source_digest(csrc: Path) -> str:
    """Short sha256 over the names and bytes of source_files."""
    h = hashlib.sha256()
    for p in source_files(csrc):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]
