"""`perflab sweep memcpy`: Rubini's moremem, copy time vs size with the cache knees."""

import functools

import click

from perflab.cli import sweep
from perflab.cli.options import check_paths, journal_options, output_options
from perflab.cli.params import Count
from perflab.cli.printing import print_result, table
from perflab.cli.running import journaled_run, optional_record
from perflab.errors import PerflabError
from perflab.lab.plans import defaults
from perflab.plan import controls


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    from perflab.lab import memcpy

    if value is None:
        return None
    try:
        return controls.check_count("", memcpy.parse_size(value), 1, 2, what="its two buffers")
    except PerflabError as exc:
        raise click.BadParameter(str(exc)) from None


@sweep.command("memcpy")
@click.option(
    "--max",
    "max_bytes",
    metavar="SIZE",
    callback=_size,
    help="Largest copy, e.g. 64M (default: 4x the last-level cache, so its knee shows, within a "
    "quarter of the memory available and 30 s of copying; the output says which bound held).",
)
@click.option(
    "--trials",
    default=10,
    show_default=True,
    type=Count(each_s=controls.CALL_S, what="its copies"),
    help="Samples per size, each of enough copies to last 100 timer steps; the minimum is kept.",
)
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=Count(1, each_s=controls.CALL_S, what="its sweeps"),
    help="Sweeps of the same sizes, one after the other: runs per size that `perflab diff` "
    "compares (the summary takes each size's median).",
)
@click.option(
    "--kernel",
    type=click.Choice(defaults.COPY_KERNEL_NAMES),
    default="libc",
    show_default=True,
    help="Copy implementation: glibc memcpy, one rep movsb, or a word-then-byte C loop.",
)
@click.option(
    "--align",
    default=controls.PAGE,
    show_default=True,
    type=Count(1),
    help="Exact alignment of both buffers (power of two; 1 puts them on odd addresses).",
)
@click.option(
    "--offset",
    default=0,
    show_default=True,
    type=Count(0),
    help="Extra bytes that move the destination against the source (misaligned copies).",
)
@click.option(
    "--small",
    default=32,
    show_default=True,
    type=Count(0),
    help="Sizes up to this go in the small-size table (Riquadro 3).",
)
@click.option("--full", is_flag=True, help="Print every size, as moremem does.")
@click.option(
    "--no-mlock",
    is_flag=True,
    help="Do not mlockall (to see what page faults do to the curve).",
)
@output_options
@journal_options
def memcpy_cmd(
    max_bytes: int | None,
    trials: int,
    repeat: int,
    kernel: str,
    align: int,
    offset: int,
    small: int,
    full: bool,
    no_mlock: bool,
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    resume: str | None,
    discard_bad: bool,
) -> None:
    """Copy time vs size, 32 steps per octave, the minimum of --trials; cache knees found."""
    from perflab.lab import memcpy, resolution

    memcpy.check_kernel(kernel)
    memcpy.BufferAlignment(align, offset).check()
    if max_bytes is not None and max_bytes > memcpy.MAX_BYTES:
        raise click.BadParameter(f"at most {memcpy.MAX_BYTES >> 30} GiB", param_hint="--max")
    if max_bytes is None:
        bound = memcpy.default_max(kernel, trials, repeat)
        top, chosen = bound.bytes, {"max_from": bound.why}
    else:
        top, chosen = max_bytes, {}
    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    # --small is how the summary reads the sweep: the file keeps it, so a report agrees.
    copies = functools.partial(memcpy.run, top, trials, kernel, align, offset, lock=not no_mlock,
                               output=output, resume=resuming, discard_bad=discard_bad,
                               extra_meta={"small": small, **chosen},
                               repeat=repeat)  # fmt: skip
    df = journaled_run(copies, output, True, f"memcpy 1..{top} B")
    if df["gb_per_s"].isna().all():
        saved = f" (the {len(df)} sizes are saved in {output})" if output else ""
        raise PerflabError(
            f"no sample up to {top} B lasted {resolution.MIN_STEPS} steps of the timer{saved}: "
            "nothing to rate; sweep larger sizes with --max (e.g. 64K)"
        )
    if full and not as_json:
        table(df.drop(columns="kernel"), "{:.6f}", title="every size (moremem's output)")
        click.echo()
    print_result(df, as_json, output, plot_path)
