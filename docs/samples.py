"""Regenerate the README's and docs' sample outputs and write measurements to
benchmarks/results/, so each says what produced it.

    python docs/samples.py [--only PATTERN] [--list] [--kept] [FILE.md ...]
    python docs/samples.py --result NAME -- COMMAND ...   (a measurement that is no sample)

A sample is an HTML comment right before a fenced block:

    <!-- sample: perflab machine -->

or, for several commands, files and figures, one `key: value` a line:

    <!-- sample: perflab sweep memcpy --plot memcpy.png
    image: memcpy.png
    -->

    sample: COMMAND   run, and shown in the block as `$ COMMAND` then its output
    setup: COMMAND    run before the samples (in the order written), not shown
    input: PATH       a file of this checkout copied into the working directory first
    image: FILE       a figure the commands write, copied to docs/img/FILE
    head: N           show each command's first N lines of output, then `...`
    kept: WHY         not regenerated without --kept (a long run, another machine): the
                      block keeps its own first line, which says where and when it was made
    result: NAME      also write the commands' whole output (not cut by head:) to
                      benchmarks/results/DATE-CPU-NAME.txt (CPU as in epyc-19h-11h)

Every command is split with shlex and run without a shell, in a fresh temporary directory
(so outputs show relative paths), stdout and stderr together; a non-zero exit is shown as
`[exit N]`. Commands are perflab's own: `perflab ...`, `python benchmarks/NAME.py ...` and
`python -m pytest ...` (the plugin's examples); a setup may also compile an input with `cc`.
The output is the command's own, but for three things: the temporary directory reads `.`,
the home directory `~` and this checkout's root is dropped from paths; and of the progress
lines perflab writes to a pipe every 10 s or 5 %, only each bar's last is kept. The block's
first line names what produced it (perflab's version and commit, the CPU with its family and
model, the timer's rate and step, the CPUs and hypervisor, the load average, the date and how
long the sample took).

A result file opens with `# result: NAME` and the commands, then the same machine line, then a
`# workload:` line for each workload digest the output (a layout line's `source DIGEST`) or a
result file the commands wrote (its `workload_source_digest`) names; below, each `$ COMMAND`
and its output as in a block. It is written only when every command exits 0, through a new
file renamed over the old, and only over this day's file of the same NAME: a new date makes a
new file, and a file of that name from another day, or not written here, is refused.
`--result NAME -- COMMAND ...` runs one command as a sample's are (the same commands
allowed) and writes its result file only.
"""

import argparse
import datetime
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "img"
KEYS = ("sample", "setup", "input", "image", "head", "kept", "result")
LAYOUT_SOURCE = re.compile(r"^(?:perflab: )?layout \S+: .*; source ([0-9a-f]{12})$", re.M)
MARKER = re.compile(r"^<!-- sample\b")
NAME = re.compile(r"[a-z0-9][a-z0-9.-]*")
PROGRESS = re.compile(r"^(?P<label>[\w .@/-]+): [\d,]+/[\d,]+ \(\d+%\)")
RESULTS = ROOT / "benchmarks" / "results"
TIMEOUT_S = 1800  # a command still running after half an hour is stuck, not slow
TOOK = re.compile(r", ([\d.]+ (?:s|min))$")


class SampleError(Exception):
    """A marker that cannot be run as written: one line, said before anything runs."""


@dataclass
class Sample:
    """One marker and the fenced block it fills."""

    path: Path | None  # None for a --result given on the command line
    line: int  # 1-based line of the marker when the file was read
    index: int  # its rank among the file's markers, which regenerating others keeps
    commands: list[str] = field(default_factory=list)  # run and shown, in this order
    setups: list[str] = field(default_factory=list)  # run before them, not shown
    inputs: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    head: int = 0
    kept: str = ""
    result: str = ""  # the NAME of the benchmarks/results/ file it also writes, if any

    @property
    def where(self) -> str:
        if self.path is None:
            return f"--result {self.result}"
        return f"{_shown(self.path)}:{self.line}"


def parse(path: Path) -> list[Sample]:
    """Every marker of one markdown file, checked: each must precede a fenced block."""
    if not path.is_file():
        raise SampleError(f"{path}: no such file")
    lines = path.read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        if not MARKER.match(lines[i]):
            i += 1
            continue
        start = i
        text = lines[i].removeprefix("<!--")
        while "-->" not in lines[i]:
            i += 1
            if i == len(lines):
                raise SampleError(f"{path}:{start + 1}: the sample comment is never closed")
            text += "\n" + lines[i]
        text = text[: text.index("-->")].strip().removeprefix("sample\n")
        sample = Sample(path, start + 1, len(found))
        for entry in filter(None, (t.strip() for t in text.splitlines())):
            key, colon, value = entry.partition(":")
            if not colon or key.strip() not in KEYS or not value.strip():
                raise SampleError(
                    f"{sample.where}: expected 'KEY: VALUE' ({', '.join(KEYS)}), got {entry!r}"
                )
            key, value = key.strip(), value.strip()
            if key == "sample":
                sample.commands.append(value)
            elif key == "setup":
                sample.setups.append(value)
            elif key == "input":
                sample.inputs.append(value)
            elif key == "image":
                sample.images.append(value)
            elif key == "head":
                if not value.isdigit() or int(value) < 1:
                    raise SampleError(
                        f"{sample.where}: head needs a number of lines, not {value!r}"
                    )
                sample.head = int(value)
            elif key == "result":
                sample.result = result_name(value, sample)
            else:
                sample.kept = value
        if not sample.commands:
            raise SampleError(f"{sample.where}: a sample needs at least one 'sample: COMMAND'")
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            raise SampleError(
                f"{sample.where}: the sample comment must be right before a ``` block"
            )
        for cmd in sample.commands:
            argv(cmd, sample)
        for cmd in sample.setups:
            argv(cmd, sample, setup=True)
        for name in sample.inputs:
            if not (ROOT / name).is_file():
                raise SampleError(f"{sample.where}: input {name} is not a file of this checkout")
        found.append(sample)
        i += 1
    return found


def result_name(name: str, sample: Sample) -> str:
    """A result's NAME, checked: it becomes part of a file name."""
    if not NAME.fullmatch(name):
        raise SampleError(
            f"{sample.where}: a result needs a name of lowercase letters, digits, dots and "
            f"dashes, not {name!r}"
        )
    return name


def argv(command: str, sample: Sample, setup: bool = False) -> list[str]:
    """What to execute for a command: perflab's, a benchmark's or pytest's; cc in a setup."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise SampleError(f"{sample.where}: cannot split {command!r}: {exc}") from None
    if words[:1] == ["perflab"]:
        exe = Path(sys.executable).parent / "perflab"
        return ([str(exe)] if exe.exists() else [sys.executable, "-m", "perflab"]) + words[1:]
    if words[:1] == ["python"] and len(words) > 1:
        script = words[1]
        if (
            script.startswith("benchmarks/")
            and script.endswith(".py")
            and (ROOT / script).is_file()
        ):
            return [sys.executable, str(ROOT / script), *words[2:]]
        if words[1:3] == ["-m", "pytest"]:
            return [sys.executable, *words[1:]]
    if words[:1] == ["cc"] and setup:
        return words
    raise SampleError(
        f"{sample.where}: refusing {command!r}: a sample runs perflab, "
        "python benchmarks/NAME.py or python -m pytest (and cc in a setup)"
    )


def machine_line(seconds: float, load: float, day: datetime.date) -> str:
    """Where and with what a sample was produced, from perflab's own machine metadata."""
    import perflab
    from perflab.system import machine, timer

    info = machine.cpuinfo()
    cpu = re.sub(r"\((R|TM)\)", "", machine.cpu_model()).strip()
    if "cpu family" in info:
        cpu += f" (family {int(info['cpu family']):X}h, model {int(info.get('model', 0)):X}h)"
    elif "CPU implementer" in info:
        cpu += f" (implementer {info['CPU implementer']}, part {info.get('CPU part', '?')})"
    hz, _ = machine.tsc_hz()
    counter = "TSC" if platform.machine() == "x86_64" else "counter"
    hv = machine.hypervisor()
    cpus = len(machine.online_cpus())
    host = f"{cpus}-vCPU {hv} guest" if hv else f"{cpus}-CPU host"
    took = f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.1f} s"
    return (
        f"# perflab {perflab.__version__}{_commit(perflab)} · {cpu} · "
        f"{counter} {hz / 1e9:.3f} GHz, step {timer.timer_step()} ticks · "
        f"{host}, load {load:.1f} · {day.isoformat()}, {took}"
    )


def cpu_short_name() -> str:
    """The CPU in a file name: its model's first words without vendor and filler, then x86's
    family and model or Arm's implementer and part (one model name covers many designs)."""
    from perflab.system import machine

    info = machine.cpuinfo()
    name = re.sub(
        r"\((R|TM)\)|@.*|\b(AMD|Intel|Genuine|Processor|CPU|\d+-Core)\b",
        " ",
        machine.cpu_model(),
        flags=re.I,
    )
    words = re.findall(r"[a-z0-9]+", name.lower())[:3] or [platform.machine().replace("_", "-")]
    if "cpu family" in info:
        words += [f"{int(info['cpu family']):x}h", f"{int(info.get('model', 0)):x}h"]
    elif "CPU implementer" in info:
        words += [info["CPU implementer"], info.get("CPU part", "0")]
    return "-".join(w.lower().removeprefix("0x") for w in words)


def _commit(perflab: object) -> str:
    """This checkout's commit when perflab runs from it (+dirty with uncommitted sources)."""
    where = Path(getattr(perflab, "__file__", "")).resolve()
    if not where.is_relative_to(ROOT / "src") or shutil.which("git") is None:
        return ""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        return ""
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "src", "csrc", "benchmarks"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f" ({head.stdout.strip()}{'+dirty' if dirty else ''})"


def clean(output: str, cwd: Path) -> str:
    """Relative paths, ~ for home, and each progress bar's last line only."""
    for where, shown in (
        (f"{cwd.resolve()}/", ""),
        (f"{cwd}/", ""),
        (str(cwd.resolve()), "."),
        (str(cwd), "."),
        (f"{ROOT}/", ""),
    ):
        output = output.replace(where, shown)
    if sys.prefix != sys.base_prefix:  # a venv's console scripts: perflab records its argv[0]
        output = output.replace(f"{Path(sys.executable).parent}/", "")
    output = re.sub(re.escape(str(Path.home())) + r"(?![\w.-])", "~", output)
    lines = output.rstrip("\n").splitlines()
    last = {}
    for n, text in enumerate(lines):
        m = PROGRESS.match(text)
        if m:
            last[m["label"]] = n
    kept = [
        t
        for n, t in enumerate(lines)
        if not PROGRESS.match(t) or last[PROGRESS.match(t)["label"]] == n
    ]
    return "\n".join(kept)


def _execute(command: str, sample: Sample, cwd: Path, setup: bool = False) -> tuple[int, str]:
    """Run one command in cwd without a shell: its exit status and its cleaned output."""
    try:
        done = subprocess.run(
            argv(command, sample, setup),
            cwd=cwd,
            env=dict(os.environ, COLUMNS="80"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise SampleError(f"{sample.where}: {command!r} ran over {TIMEOUT_S} s") from None
    return done.returncode, clean(done.stdout, cwd)


def run(sample: Sample) -> tuple[str, float, Path | None]:
    """Run a sample's commands in a fresh directory: the block's new text, its seconds and the
    result file it wrote (refused before anything runs when that file may not be replaced)."""
    if sample.result:
        replaceable(result_path(sample.result, datetime.date.today()), sample)
    load = os.getloadavg()[0]
    start = time.monotonic()
    shown, whole = [], []
    with tempfile.TemporaryDirectory(prefix="perflab-sample-") as tmp:
        cwd = Path(tmp)
        for name in sample.inputs:
            shutil.copy2(ROOT / name, cwd / Path(name).name)
        for command in sample.setups:
            status, text = _execute(command, sample, cwd, setup=True)
            if status:
                last = (text.splitlines() or [""])[-1]
                raise SampleError(f"{sample.where}: setup {command!r} exited {status}: {last}")
        for command in sample.commands:
            status, text = _execute(command, sample, cwd)
            whole += [f"$ {command}", *([text] if text else [])]
            if status and sample.result:
                last = (text.splitlines() or [""])[-1]
                raise SampleError(
                    f"{sample.where}: {command!r} exited {status}: {last}; no result written"
                )
            if sample.head and text.count("\n") >= sample.head:
                text = "\n".join([*text.splitlines()[: sample.head], "..."])
            shown += [f"$ {command}", *([text] if text else [])]
            if status:
                shown.append(f"[exit {status}]")
        for name in sample.images:
            if not (cwd / name).is_file():
                raise SampleError(f"{sample.where}: the commands wrote no {name}")
            shutil.copy2(cwd / name, IMAGES / Path(name).name)
        named = workloads("\n".join(whole), cwd) if sample.result else []
    seconds = time.monotonic() - start
    day = datetime.date.today()
    line = machine_line(seconds, load, day)
    written = write_result(sample, day, [line, *named, *whole]) if sample.result else None
    return "\n".join([line, *shown]), seconds, written


def workloads(output: str, cwd: Path) -> list[str]:
    """A `# workload:` line for each workload digest the result files the commands wrote (their
    metadata) or their output (a layout line's `source DIGEST`) name."""
    from perflab.store import results

    named: dict[str, str] = {}
    for path in sorted(cwd.rglob("*")):
        found = results.stored(path) if path.suffix in results.FORMATS else None
        meta = found[0] if found else {}
        digest = str(meta.get("workload_source_digest") or "")[:12]
        if digest:
            build = str(meta.get("workload_digest") or "")[:12]
            named.setdefault(
                digest,
                f"# workload: {Path(str(meta.get('workload', '?'))).name}, source {digest}"
                f"{f', build {build}' if build else ''} (the metadata of {path.relative_to(cwd)})",
            )
    for digest in LAYOUT_SOURCE.findall(output):
        named.setdefault(digest, f"# workload: source {digest} (a layout line of the output)")
    return list(named.values())


def result_path(name: str, day: datetime.date) -> Path:
    """Where a result of this day and CPU is kept."""
    return RESULTS / f"{day.isoformat()}-{cpu_short_name()}-{name}.txt"


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def replaceable(path: Path, sample: Sample) -> None:
    """Refuse to replace a file unless it is this day's result of the same name, written here:
    a measurement of another day, or one written by hand, is never lost to a rerun."""
    if not path.exists() and not path.is_symlink():
        return
    head = path.read_text(errors="replace").splitlines()[:2] if path.is_file() else []
    day = f" · {path.name[:10]}, "
    if not (
        len(head) == 2 and head[0].startswith(f"# result: {sample.result} · ") and day in head[1]
    ):
        raise SampleError(
            f"{sample.where}: {_shown(path)} is not this day's result {sample.result!r} "
            "written by docs/samples.py: left as it is (move it, or name the result otherwise)"
        )


def write_result(sample: Sample, day: datetime.date, lines: list[str]) -> Path:
    """The result file, written through a new file renamed over this day's old one."""
    from perflab.core import files

    path = result_path(sample.result, day)
    replaceable(path, sample)
    origin = f" (the sample at {sample.where})" if sample.path else ""
    title = f"# result: {sample.result} · {' ; '.join(sample.commands)}{origin}"
    files.write_bytes(path, "\n".join([title, *lines, ""]).encode())
    return path


def _body(lines: list[str], index: int) -> tuple[int, int]:
    """Where the block of the file's index-th marker lies: its first and past-last line."""
    starts = [n for n, text in enumerate(lines) if MARKER.match(text)]
    i = starts[index]
    while "-->" not in lines[i]:
        i += 1
    first = i + 2
    return first, next(j for j in range(first, len(lines)) if lines[j].startswith("```"))


def fill(sample: Sample, text: str) -> None:
    """Replace the sample's block with text."""
    lines = sample.path.read_text().splitlines(keepends=True)
    first, end = _body(lines, sample.index)
    lines[first:end] = [text + "\n"]
    sample.path.write_text("".join(lines))


def block(sample: Sample) -> list[str]:
    """The lines of a sample's fenced block as the file holds them now."""
    lines = sample.path.read_text().splitlines()
    first, end = _body(lines, sample.index)
    return lines[first:end]


def documents() -> list[Path]:
    """The README and every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main(args: list[str] | None = None) -> int:
    args = sys.argv[1:] if args is None else list(args)
    command = args[args.index("--") + 1 :] if "--" in args else []
    args = args[: args.index("--")] if "--" in args else args
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "files", nargs="*", type=Path, help="markdown files (default: README.md, docs/*.md)"
    )
    parser.add_argument(
        "--only", metavar="PATTERN", help="only samples whose file:line or commands match"
    )
    parser.add_argument("--list", action="store_true", help="list the samples and their last time")
    parser.add_argument("--kept", action="store_true", help="regenerate the kept samples too")
    parser.add_argument(
        "--result",
        metavar="NAME",
        help="run `-- COMMAND ...` alone and write its benchmarks/results/ file, no sample",
    )
    opts = parser.parse_args(args)
    if opts.result is not None and (not command or opts.files or opts.only or opts.list):
        print(
            "error: --result NAME takes one `-- COMMAND ...`, no FILE, --only or --list",
            file=sys.stderr,
        )
        return 2
    if command and opts.result is None:
        print("error: `-- COMMAND ...` needs --result NAME", file=sys.stderr)
        return 2
    try:
        import perflab.system.timer  # noqa: F401  (the machine line needs the C core)
    except ImportError as exc:
        print(
            f"error: perflab is not importable ({exc}): run this with the python of a venv "
            "where `pip install -e .` installed this checkout",
            file=sys.stderr,
        )
        return 2
    if opts.result is not None:
        return measure(opts.result, shlex.join(command))
    try:
        samples = [s for path in (opts.files or documents()) for s in parse(path.resolve())]
        named: dict[str, Sample] = {}
        for s in filter(lambda s: s.result, samples):
            if s.result in named:
                raise SampleError(f"{s.where}: result {s.result} is {named[s.result].where}'s too")
            named[s.result] = s
    except SampleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if opts.only:
        try:
            only = re.compile(opts.only)
        except re.error as exc:
            print(f"error: --only {opts.only!r}: {exc}", file=sys.stderr)
            return 2
        samples = [s for s in samples if only.search(f"{s.where} {' ; '.join(s.commands)}")]
    if opts.list:
        for s in samples:
            first = (block(s) or [""])[0]
            took = TOOK.search(first) if first.startswith("# ") else None
            last = took[1] if took else ("no machine line" if not first.startswith("# ") else "?")
            tag = f"kept ({s.kept})" if s.kept else last
            print(f"{s.where}: {' ; '.join(s.commands)}  [{tag}]")
        return 0
    failed = 0
    for s in samples:
        if s.kept and not opts.kept:
            print(f"{s.where}: kept ({s.kept}): {' ; '.join(s.commands)}")
            continue
        print(f"{s.where}: {' ; '.join(s.commands)} ...", end=" ", flush=True)
        try:
            text, seconds, written = run(s)
        except SampleError as exc:
            print(f"\nerror: {exc}", file=sys.stderr)
            failed += 1
            continue
        fill(s, text)
        print(f"{seconds:.1f} s{f', {_shown(written)}' if written else ''}", flush=True)
    return 1 if failed else 0


def measure(name: str, command: str) -> int:
    """A measurement that is no docs sample: one command, run as a sample is, to its result."""
    sample = Sample(None, 0, 0, commands=[command], result=name)
    try:
        result_name(name, sample)
        argv(command, sample)
        replaceable(result_path(name, datetime.date.today()), sample)
    except SampleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{sample.where}: {command} ...", end=" ", flush=True)
    try:
        _, seconds, written = run(sample)
    except SampleError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    print(f"{seconds:.1f} s, {_shown(written)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
