"""The order of functions within a link: objects compiled with -ffunction-sections hold one
section a function, which a linker that shuffles or orders sections (lld's or mold's
--shuffle-sections, gold's --section-ordering-file with an order drawn here) places at random
by a seed. Which of them the compiler driver can use is probed once per compiler."""

import hashlib
import random
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path

from perflab.core import files
from perflab.errors import PerflabError
from perflab.system import compiler

COMPILE_FLAGS = ("-ffunction-sections",)  # what a build's compiles get so that links can move
LINKERS = ("lld", "mold", "gold")  # tried in this order: the first the driver links with wins
SEED_MAX = 2**31 - 1  # a seed is drawn in 1..SEED_MAX (lld reads 0 as "draw one yourself")
NONE = "none"  # what the probe records where no linker of LINKERS links


def text_sections(path: str | Path) -> list[str]:
    """The names of an ELF64 object's code sections (.text, .text.NAME ...), in file order;
    [] for what is not a little-endian ELF64 file."""
    data = Path(path).read_bytes()
    if len(data) < 64 or data[:6] != b"\x7fELF\x02\x01":
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        return []

    def header(i: int) -> tuple[int, int, int]:
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, offset, size

    _, strings, size = header(shstrndx)
    table = data[strings : strings + size]
    names = []
    for i in range(shnum):
        at = header(i)[0]
        name = table[at : table.find(b"\0", at)].decode(errors="replace") if at < size else ""
        if name == ".text" or name.startswith(".text."):
            names.append(name)
    return names


def functions_apart(objects: Sequence[compiler.Object]) -> bool:
    """Whether these objects hold their functions in sections of their own (some object has
    more than one code section): only then can a link reorder functions within an object."""
    return any(len(text_sections(o.path)) > 1 for o in objects)


def linker(cc: Sequence[str] | None = None) -> str:
    """The first of LINKERS that the compiler driver links with (-fuse-ld=NAME) and that
    places sections as told; NONE where none does. Probed once per driver and version,
    recorded in the cache."""
    cc = tuple(cc or compiler.compiler())
    named = "\0".join([*cc, compiler.compiler_version(cc)])
    tag = hashlib.sha256(named.encode()).hexdigest()[:12]
    probe = compiler.cache_dir() / f".section-linker-{tag}"
    try:
        found = files.read_private(probe).decode()
    except (OSError, PerflabError, UnicodeDecodeError):
        found = ""
    if found not in (*LINKERS, NONE):
        found = _probe(cc)
        files.write_bytes(probe, found.encode())
    return found


def _probe(cc: tuple[str, ...]) -> str:
    """Link two functions in sections of their own with each linker in turn."""
    with tempfile.TemporaryDirectory(dir=compiler.cache_dir()) as tmp:
        source = Path(tmp, "probe.c")
        source.write_text("int f(void) { return 1; }\nint main(void) { return f() - 1; }\n")
        obj = Path(tmp, "probe.o")
        try:
            made = compiler.bounded([*cc, *COMPILE_FLAGS, "-c", str(source), "-o", str(obj)])
        except OSError:
            return NONE
        if made.returncode != 0:
            return NONE
        for name in LINKERS:
            flags = flags_for(name, 1, [compiler.Object.of(obj)], Path(tmp))
            try:
                done = compiler.bounded([*cc, str(obj), *flags, "-o", str(Path(tmp, name))])
            except (OSError, PerflabError):
                continue
            if done.returncode == 0:
                return name
    return NONE


def flags(seed: int, objects: Sequence[compiler.Object], cc: Sequence[str] | None = None
          ) -> tuple[str, ...]:  # fmt: skip
    """The link arguments that place these objects' functions in the order `seed` draws."""
    name = linker(cc)
    if name == NONE:
        raise PerflabError(
            "function-order needs a linker that orders sections (lld, mold or gold with "
            "-fuse-ld=NAME); the compiler driver links with none of them here"
        )
    return flags_for(name, seed, objects, compiler.cache_dir())


def flags_for(name: str, seed: int, objects: Sequence[compiler.Object], where: Path
              ) -> tuple[str, ...]:  # fmt: skip
    """lld and mold shuffle by the seed themselves; gold reads an order file, drawn here from
    the objects' sections by the seed and kept in `where` under its content's name."""
    if name == "lld":
        return ("-fuse-ld=lld", f"-Wl,--shuffle-sections=.text.*={seed}")
    if name == "mold":
        return ("-fuse-ld=mold", f"-Wl,--shuffle-sections={seed}")
    names = sorted({s for o in objects for s in text_sections(o.path) if s != ".text"})
    random.Random(seed).shuffle(names)
    text = "".join(f"{n}\n" for n in names).encode()
    order = where / f"section-order-{hashlib.sha256(text).hexdigest()[:16]}"
    if not order.is_file():
        files.atomic(order, lambda tmp: tmp.write_bytes(text))
    return ("-fuse-ld=gold", f"-Wl,--section-ordering-file={order}")
