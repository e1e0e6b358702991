"""The functions' order within a link: objects read for their code sections, each linker that
orders sections really linking two functions in both orders by seed, and the compiler
wrappers giving a build's compiles -ffunction-sections without touching its link."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from perflab.errors import PerflabError
from perflab.system import binlayout, compiler, sections

SOURCE = (
    "int f(int x) { return x + 1; }\nint g(int x) { return x * 3; }\n"
    "int h(int x) { return x - 7; }\nint main(void) { return f(1) + g(2) + h(3) - 4; }\n"
)


def _object(tmp_path: Path, *flags: str) -> compiler.Object:
    source = tmp_path / "three.c"
    source.write_text(SOURCE)
    out = tmp_path / f"three{len(flags)}.o"
    subprocess.run([*compiler.compiler(), "-O1", *flags, "-c", str(source), "-o", str(out)],
                   check=True)  # fmt: skip
    return compiler.Object.of(out)


def test_an_object_s_code_sections_are_read_from_its_elf_headers(tmp_path):
    apart = _object(tmp_path, "-ffunction-sections")
    together = _object(tmp_path)
    assert {".text.f", ".text.g", ".text.h"} <= set(sections.text_sections(apart.path))
    assert ".text.f" not in sections.text_sections(together.path)
    assert sections.functions_apart([apart]) and not sections.functions_apart([together])
    (tmp_path / "not-elf.o").write_bytes(b"\x7fELF\x02\x01" + b"\xff" * 10)
    assert sections.text_sections(tmp_path / "not-elf.o") == []  # short: nothing, no error


def _links_with(name: str) -> bool:
    cc = compiler.compiler()
    probe = subprocess.run([*cc, f"-fuse-ld={name}", "-x", "c", "-", "-o", os.devnull],
                           input=b"int main(void){return 0;}", capture_output=True)  # fmt: skip
    return probe.returncode == 0


@pytest.mark.parametrize("name", sections.LINKERS)
def test_each_linker_places_one_object_s_functions_in_orders_drawn_by_seed(tmp_path, name):
    if not _links_with(name):
        pytest.skip(f"the compiler driver does not link with {name} here")
    obj = _object(tmp_path, "-ffunction-sections")
    orders = set()
    for seed in range(1, 9):
        flags = sections.flags_for(name, seed, [obj], tmp_path)
        out = tmp_path / f"{name}-{seed}"
        subprocess.run([*compiler.compiler(), str(obj.path), *flags, "-o", str(out)], check=True)
        where = {f[-1]: int(f[0], 16) for f in binlayout.nm_fields(out, "--defined-only")}
        orders.add(tuple(sorted("fgh", key=where.__getitem__)))
        assert subprocess.run([str(out)]).returncode == 0  # still the same program
    assert len(orders) > 1


def test_the_probe_names_a_linker_this_driver_uses_and_a_driver_without_one_is_refused(
    tmp_path,
):
    found = sections.linker()
    assert found in (*sections.LINKERS, sections.NONE)
    assert sections.linker() == found  # recorded: the same answer without probing again
    if found != sections.NONE:
        assert _links_with(found)
    plain = tmp_path / "plain-cc"  # the system's driver, refusing any other linker
    cc = shutil.which(compiler.compiler()[0])
    plain.write_text(f'#!/bin/sh\ncase "$*" in *-fuse-ld=*) exit 1;; esac\nexec {cc} "$@"\n')
    plain.chmod(0o755)
    assert sections.linker([str(plain)]) == sections.NONE
    with pytest.raises(PerflabError, match=r"^function-order needs a linker that orders"):
        sections.flags(1, [], [str(plain)])


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_wrappers_give_a_build_s_compiles_function_sections_and_leave_its_link(tmp_path):
    (tmp_path / "three.c").write_text(SOURCE)
    rules = "prog: three.o\n\tcc -o prog three.o\nthree.o: three.c\n\tcc -O1 -c three.c\n"
    (tmp_path / "Makefile").write_text(rules)
    env = compiler.wrapped_env(sections.COMPILE_FLAGS)
    subprocess.run(["make", "-s", "-C", str(tmp_path)], env=env, check=True)
    assert sections.functions_apart([compiler.Object.of(tmp_path / "three.o")])
    assert subprocess.run([str(tmp_path / "prog")]).returncode == 0
