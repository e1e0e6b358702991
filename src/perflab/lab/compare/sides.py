"""What A and B are: a command line, or objects each setup links, and what each setup runs."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from perflab.errors import PerflabError
from perflab.lab.compare.layouts import NO_PADDING, Setup
from perflab.plan import controls
from perflab.running import spawn
from perflab.store.identity import Executes
from perflab.system import binlayout, compiler, sections


@dataclass(frozen=True)
class Side:
    """What A or B is: a command line, or objects each setup links (its order, a padding
    object first for a code offset), by a linker or by the user's build command (`build`,
    which links `target`), and runs with argv as arguments."""

    name: str
    argv: tuple[str, ...] = ()
    objects: tuple[compiler.Object, ...] = ()
    label: str = ""
    linker: compiler.Linker | None = None
    build: tuple[str, ...] = ()
    target: str = ""
    plain: str = ""  # target as the build command links it unchanged, a copy in the cache
    cwd: str = ""  # the directory its program runs in ("": perflab's own)
    # how a refusal of something else names it (controls.described)
    described: ClassVar[str] = ("a side (compare.program_side(...), build_side, objects_side or "
                                "build_command_side)")  # fmt: skip

    def program(self, setup: Setup) -> tuple[tuple[str, ...], str]:
        """The argv to run in this setup and the link order it was built in ('' if none)."""
        if not self.objects:
            return self.argv, ""
        perm = setup.perm if setup.perm is not None else range(len(self.objects))
        objects = [self.objects[i] for i in perm]
        order = [o.label for o in objects]
        pad = None
        if setup.code_offset != NO_PADDING:
            cc = self.linker.cc if self.linker else ()
            pad = compiler.padding_object(setup.code_offset, cc or None)
        placed: tuple[str, ...] = ()
        if setup.function_order != NO_PADDING:
            placed = self._functions(setup.function_order)
        if self.build:
            prog, linked = compiler.relink(self.build, Path(self.target), order, pad, placed)
            if [o.digest for o in linked] != [o.digest for o in objects]:
                raise PerflabError(
                    f"{shlex.join(self.build)} linked other objects than it did first "
                    f"({','.join(prog.order)}, not {','.join(order)}): it must build the same "
                    "objects every time"
                )
        else:
            assert self.linker is not None  # objects come with what links them
            linker = replace(self.linker, ldflags=(*self.linker.ldflags, *placed))
            prog = compiler.link([*([pad] if pad else []), *objects], linker)
        return (str(prog.path), *self.argv), ",".join(order)

    def _functions(self, seed: int) -> tuple[str, ...]:
        """The link arguments that place the functions in the order `seed` draws: only for
        objects whose functions have sections of their own, linked by a compiler driver."""
        if self.linker is not None and self.linker.template:
            raise PerflabError(f"{self.name}: function-order adds a linker's arguments to a "
                               "compiler driver's link, not to a --link-cmd template")  # fmt: skip
        if not sections.functions_apart(self.objects):
            raise PerflabError(
                f"{self.name}: function-order moves functions within their objects, and these "
                "hold all their code in one section each: compile them with -ffunction-sections"
            )
        return sections.flags(seed, self.objects, self.linker.cc if self.linker else None)

    def put_back(self) -> None:
        """After the setups' links, the build command's own program back where it built it:
        the user's tree is left as their command makes it."""
        if self.build:
            shutil.copy2(self.plain, self.target)


def identical(a: Side, b: Side) -> bool:
    """A and B would run the same bytes with the same arguments (e.g. -O2 and -O3 agreeing)."""
    if a.objects or b.objects:
        same = [o.digest for o in a.objects] == [o.digest for o in b.objects]
    else:
        same = compiler.Object.of(a.argv[0]).digest == compiler.Object.of(b.argv[0]).digest
    return same and a.argv[1:] == b.argv[1:]


def program_side(name: str, command: str | Sequence[str]) -> Side:
    """A program given as a command line (split like a shell would, run without one)."""
    argv = (
        controls.words(command, f"program {name}")
        if isinstance(command, str)
        else list(controls.typed_value(command, tuple[str, ...], f"program {name}"))
    )
    if not argv:
        raise PerflabError(f"program {name} is empty")
    return Side(name, (spawn.check_program(argv[0]), *argv[1:]), label=shlex.join(argv))


def build_side(
    name: str, cflags: Sequence[str], cc: Sequence[str] | None = None, args: Sequence[str] = ()
) -> Side:
    """The built-in multi-object workload compiled with cflags, linked per setup (statically
    when the libc allows it), run with args."""
    objects = tuple(compiler.linkorder_objects(tuple(cflags), cc))
    label = " ".join(["built-in workload", *cflags, *(["--", *args] if args else [])])
    return Side(name, tuple(args), objects, label, compiler.builtin_linker(cc))


def objects_side(
    name: str,
    paths: Sequence[str | os.PathLike[str]],
    cc: str | None = None,
    ldflags: Sequence[str] = (),
    args: Sequence[str] = (),
) -> Side:
    """The user's object files, linked per setup by cc (default $CC or cc) with ldflags after
    them, dynamically unless ldflags say otherwise, and run with args."""
    if not paths:
        raise PerflabError(f"{name}: no object files given")
    objects = tuple(compiler.Object.of(p) for p in paths)
    _distinct(name, objects)
    linker = compiler.Linker(cc=tuple(compiler.check_compiler(cc)), ldflags=tuple(ldflags))
    label = shlex.join([*map(str, paths), *ldflags, *(["--", *args] if args else [])])
    return Side(name, tuple(args), objects, label, linker)


def build_command_side(
    name: str,
    command: str | Sequence[str],
    program: str | os.PathLike[str],
    args: Sequence[str] = (),
) -> Side:
    """The program a build command of the user's links (`make -C src CC=cc`: run without a
    shell, perflab's compiler wrappers first on PATH, as ldrand does), run once here to find the
    objects its link takes; each setup runs it again, `program` removed so that it relinks."""
    what = f"build command {name}"
    argv = controls.words(command, what) if isinstance(command, str) else list(command)
    if not argv:
        raise PerflabError(f"build command {name} is empty")
    path = Path(program)
    target = Path(os.path.realpath(path.parent)) / path.name
    plain, objects = compiler.relink(argv, target)
    _distinct(name, objects)
    label = shlex.join([*argv, *(["--", *args] if args else [])])
    return Side(name, tuple(args), tuple(objects), label, build=tuple(argv), target=str(target),
                plain=str(plain.path))  # fmt: skip


def _distinct(name: str, objects: Sequence[compiler.Object]) -> None:
    """A link order names objects by label: two of one name could not be told apart."""
    labels = [o.label for o in objects]
    if len(set(labels)) != len(labels):
        raise PerflabError(f"{name}: object names must be distinct on a link order: "
                           f"{', '.join(labels)}")  # fmt: skip


def digests(side: Side) -> tuple[str, ...]:
    """What decides the bytes A or B runs: its objects, or its program file."""
    objects = side.objects or (compiler.Object.of(side.argv[0]),)
    return tuple(o.digest for o in objects)


def linked_dynamically(side: Side) -> Side:
    """The side linked dynamically: a heap offset is a preloaded library, which only the
    dynamic loader loads."""
    if side.linker is None or not side.linker.static:
        return side
    return replace(side, linker=replace(side.linker, static=False))


def refuse_static(programs: Sequence[tuple[str, ...]]) -> None:
    """A heap offset asked for a program that cannot preload its shim: one line, nothing run."""
    for argv in programs:
        if not binlayout.preloads(argv[0]):
            raise PerflabError(
                f"{argv[0]} is statically linked (no ELF interpreter): a heap offset is a "
                "preloaded library, which only the dynamic loader loads; link it dynamically "
                "or leave heap-offset out"
            )


def sources(a: Side, b: Side) -> Executes:
    """What every round of a --precision comparison runs, whatever it links: the sides'
    programs, or their objects (each round links its own setups)."""
    return Executes([tuple(map(str, (o.path for o in s.objects))) or s.argv for s in (a, b)])


def code_placement(a: Side, b: Side) -> tuple[tuple[str, ...], str, list[str]]:
    """What a layout can draw of the code's placement for two sides perflab links: always a
    code offset; the objects' order where both link as many (one order is drawn for both);
    the functions' order where their objects hold a section a function and a linker that
    orders sections links here. The dimensions, them in words, and what stays as built, why."""
    drawn, said, kept = ["code-offset"], ["a code offset linked first"], []
    if len(a.objects) == len(b.objects):
        drawn.append("link-order")
        said.append(f"the order of the {len(a.objects)} objects")
    else:
        kept.append(f"the objects' order as built, since A links {len(a.objects)} and B "
                    f"{len(b.objects)}")  # fmt: skip
    linker = sections.linker(a.linker.cc if a.linker else None)
    if not sections.functions_apart((*a.objects, *b.objects)):
        kept.append("the functions' order as built: its compiles did not take "
                    "-ffunction-sections (a compiler not on PATH?)")  # fmt: skip
    elif linker == sections.NONE:
        kept.append("the functions' order as built: no linker that orders sections (lld, "
                    "mold, gold) links here")  # fmt: skip
    else:
        drawn.append("function-order")
        said.append(f"the functions' order within them (by {linker})")
    words = ", ".join(said[:-1]) + (" and " if len(said) > 1 else "") + said[-1]
    return tuple(drawn), words, kept
