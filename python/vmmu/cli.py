"""The ``vmmu`` command line (docs/cli.md).

Each command converts its options to engine overrides (:func:`vmmu.api.overrides`), calls the
API and renders the result with rich. Errors print ``error: <message>`` and exit with status 2,
never a traceback (set ``VMMU_DEBUG=1`` for one).
"""

from __future__ import annotations

import functools
import io
import json
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click
from rich.console import Console

from vmmu import _render, api, cli_results, options, sizing_study
from vmmu._progress import ProgressBars
from vmmu.exceptions import Interrupted, VmmuError
from vmmu.repro import repro
from vmmu.suite.cli import suite
from vmmu.validate.cli import validate

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def _out() -> Console:
    # Created per call so click's CliRunner (which swaps sys.stdout) sees the output.
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def _print_whole(table: Any) -> None:
    """Prints ``table`` on stdout; when stdout is not a terminal (a pipe, a file, a test) the
    console is widened to the table's natural width, so no number is cut to an ellipsis."""
    out = _out()
    if not out.is_terminal:
        # A console measures within its own width: measure on a wide one.
        need = Console(file=io.StringIO(), width=10_000).measure(table).maximum
        if need > out.width:
            out = Console(file=sys.stdout, highlight=False, soft_wrap=False, width=need)
    out.print(table)


def _err() -> Console:
    return Console(file=sys.stderr, highlight=False)


class VmmuClickError(click.ClickException):
    """A vmmu error as click reports it: ``error: <message>`` in red, exit status 2."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        click.secho(f"error: {self.format_message()}", fg="red", err=True)


def _fail(message: str, exit_code: int = EXIT_ERROR) -> NoReturn:
    raise VmmuClickError(message, exit_code)


class _Group(click.Group):
    """Turns exceptions into ``error: …`` lines (no traceback unless ``VMMU_DEBUG=1``)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Interrupted as e:
            if os.environ.get("VMMU_DEBUG") == "1":
                raise
            _fail(str(e), EXIT_INTERRUPTED)
        except KeyboardInterrupt:
            if os.environ.get("VMMU_DEBUG") == "1":
                raise
            _fail("interrupted", EXIT_INTERRUPTED)
        except (VmmuError, OSError, ValueError) as e:
            if os.environ.get("VMMU_DEBUG") == "1":
                raise
            _fail(str(e))
        except BaseException as e:
            if isinstance(e, (SystemExit, GeneratorExit)) or os.environ.get("VMMU_DEBUG") == "1":
                raise
            _fail(
                f"internal error: {type(e).__name__}: {e} "
                "(please report it; VMMU_DEBUG=1 shows the traceback)"
            )


# ---------------------------------------------------------------------------------------------
# Shared options


def _parse_set(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> list:
    pairs = []
    for v in values:
        path, eq, value = v.partition("=")
        if not eq or not path.strip():
            raise click.BadParameter(f"expected dotted.path=value, got `{v}`")
        pairs.append((path.strip(), value.strip()))
    return pairs


def _table_option(opt: options.Option) -> Callable[[Callable], Callable]:
    """The click option of one entry of :data:`vmmu.options.OPTIONS`."""
    v = opt.value
    kw: dict[str, Any] = {"help": opt.help_text()}
    if v.flag:
        return click.option(opt.flag, is_flag=True, **kw)
    if v.metavar:
        kw["metavar"] = v.metavar
    if v.choices is not None:
        kw["type"] = click.Choice(v.choices, case_sensitive=v.case_sensitive)
    elif v.number is int:
        kw["type"] = click.IntRange(min=v.minimum) if v.minimum is not None else int
    elif v.number is float:
        kw["type"] = float
    if v.multiple:
        kw["multiple"] = True

    def read(_ctx: click.Context, param: click.Parameter, given: Any) -> Any:
        try:
            if v.multiple:
                return v.parse_all(given, opt.flag)
            if given is None or v.number:
                return given
            return v.parse(given, opt.flag)
        except ValueError as e:
            raise click.BadParameter(str(e), param=param) from None

    return click.option(opt.flag, callback=read, **kw)


def machine_options(f: Callable) -> Callable:
    """Options that select and change the configuration (all commands that build one):
    ``--machine``, one option per entry of :data:`vmmu.options.OPTIONS`, ``--set`` last."""
    decorators = [
        click.option(
            "--machine",
            "-m",
            default=api.DEFAULT_MACHINE,
            show_default=True,
            metavar="NAME|FILE.toml",
            help="Machine preset (see `vmmu presets`) or a machine TOML file.",
        ),
        *(_table_option(opt) for opt in options.OPTIONS),
        click.option(
            "--set",
            "set_",
            multiple=True,
            metavar="PATH=VALUE",
            callback=_parse_set,
            help="Set any configuration field by its dotted path (repeatable, applied last), "
            "e.g. --set machine.tlb.l2.0.entries=1024.",
        ),
    ]
    for opt in reversed(decorators):
        f = opt(f)
    return f


#: What ``--trace`` reads (docs/traces.md): every format, told apart by the file's first bytes.
TRACE_FORMATS_HELP = (
    "Trace file to replay, in any format vmmu reads, recognised by its first bytes: "
    "vtrace (vmmu's binary format, `vmmu record`); Valgrind lackey text, plain or "
    "compressed with gzip, zstd or xz (.gz, .zst, .xz); ChampSim instruction records, "
    "plain, .xz, .gz or .zst (no OS events: pages are mapped on first touch)."
)


#: The paging mode of a command that runs one mode (`run`, `sizing`).
mode_option = click.option(
    "--mode",
    type=click.Choice(api.MODES),
    default="nested",
    show_default=True,
    help="Paging mode.",
)


def source_options(f: Callable) -> Callable:
    f = click.option("--trace", "-t", metavar="FILE", help=TRACE_FORMATS_HELP)(f)
    f = click.option(
        "--workload",
        "-w",
        metavar="NAME[:k=v,...]",
        help="Synthetic workload, e.g. random:footprint=1G,refs=1M (see `vmmu workloads`).",
    )(f)
    return f


def _options(kw: dict[str, Any]) -> dict[str, Any]:
    """CLI keyword arguments → :func:`vmmu.api.run` keywords (without the mode)."""
    out = {"machine": kw["machine"], "set": kw["set_"]}
    out.update({opt.name: kw[opt.name] for opt in options.OPTIONS})
    return out


def _source(kw: dict[str, Any]) -> dict[str, Any]:
    workload, trace = kw.get("workload"), kw.get("trace")
    if (workload is None) == (trace is None):
        raise click.UsageError(
            "give exactly one of --workload NAME[:k=v,...] (see `vmmu workloads`) and --trace FILE"
        )
    if trace is not None and not os.path.exists(trace):
        _fail(f"{trace}: no such trace file")
    return {"workload": workload, "trace": trace}


# ---------------------------------------------------------------------------------------------
# Commands


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vmmu", prog_name="vmmu")
def cli() -> None:
    """vmmu — simulate virtualized address translation (native, nested and shadow paging).

    Start with `vmmu compare --workload random:footprint=1G,refs=1M`.
    """


@cli.command()
@machine_options
@source_options
@mode_option
@click.option("--json", "as_json", is_flag=True, help="Print the result JSON (vmmu.result/2).")
def run(as_json: bool, mode: str, **kw: Any) -> None:
    """Run one simulation and print its statistics."""
    source = _source(kw)
    with ProgressBars() as bars:
        result = api.run(mode=mode, progress=bars.callback(mode), **source, **_options(kw))
    if as_json:
        click.echo(result.to_json())
    else:
        _out().print(_render.result_tables(result))


def _parse_modes(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[str]:
    if value is None:
        return list(api.COMPARE_MODES)
    try:
        return options.check_modes(m.strip() for m in value.split(",") if m.strip())
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _parse_sensitivity(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, list[str]]]:
    out = []
    for v in values:
        path, eq, span = v.partition("=")
        lo, colon, hi = span.partition(":")
        if not eq or not path.strip() or not colon or not lo.strip() or not hi.strip():
            raise click.BadParameter(f"expected PATH=LO:HI, got `{v}`")
        out.append((path.strip(), [lo.strip(), hi.strip()]))
    return out


@cli.command()
@machine_options
@source_options
@click.option(
    "--modes",
    callback=_parse_modes,
    metavar="MODE,...",
    help=f"Modes to compare (default: {','.join(api.COMPARE_MODES)}); a policy name "
    f"({','.join(api.POLICIES)}) is an adaptive run with that policy, and nested-virt:KIND "
    f"({','.join(api.L1_KINDS)}) a nested-virt run of that L1 kind.",
)
@click.option(
    "--adaptive",
    is_flag=True,
    help=f"Add the adaptive columns {','.join(api.ADAPTIVE_COLUMNS)} "
    "(DAV²M, the oracle bound, vmmu's cost model).",
)
@click.option("--serial", is_flag=True, help="Run the modes one after another, not in parallel.")
@click.option(
    "--sensitivity",
    multiple=True,
    metavar="PATH=LO:HI",
    callback=_parse_sensitivity,
    help="Also run with the configuration value PATH at LO and at HI and say whether the "
    "modes still rank alike (repeatable), e.g. machine.kernel.page_fault=1500:4000.",
)
@click.option("--json", "as_json", is_flag=True, help="Print {mode: result JSON}.")
@click.option("--report", metavar="FILE.html", help="Also write an HTML report of the results.")
def compare(
    modes: list[str],
    adaptive: bool,
    serial: bool,
    sensitivity: list[tuple[str, list[str]]],
    as_json: bool,
    report: str | None,
    **kw: Any,
) -> None:
    """Run each paging mode on the same workload and print them side by side."""
    source = _source(kw)
    opts = _options(kw)
    if adaptive:
        modes = [*modes, *(m for m in api.ADAPTIVE_COLUMNS if m not in modes)]
    with ProgressBars() as bars:
        results = api.run_modes(modes, parallel=not serial, progress=bars, **source, **opts)
    studies = []
    for key, values in sensitivity:
        with ProgressBars() as bars:
            rows = api.sensitivity(
                key, values, modes, parallel=not serial, progress=bars, **source, **opts
            )
        studies.append((key, rows))
    if as_json:
        out: dict[str, Any] = {m: r.to_dict() for m, r in results.items()}
        if studies:
            out = {"results": out, "sensitivity": {k: rows for k, rows in studies}}
        click.echo(json.dumps(out, indent=2))
    else:
        _print_whole(_render.compare_table(results, api.overhead(results)))
        for key, rows in studies:
            _out().print(_render.sensitivity_table(key, api.ranking(results), rows))
    if report is not None:
        from vmmu.report import write_report

        title = f"vmmu compare — {source['workload'] or source['trace']}"
        _err().print(f"report: {write_report(report, results, title=title)}")


@cli.command("sizing")
@machine_options
@source_options
@click.option(
    "--structure",
    type=click.Choice(sizing_study.STRUCTURES),
    default="l2tlb",
    show_default=True,
    help="The structure to size: the L2 TLB, the page-walk cache or the Nested TLB.",
)
@click.option(
    "--entries",
    required=True,
    metavar="LO..HI|N,M,...",
    help="Sizes in entries: LO..HI doubles from LO up to HI (64..8192), or a list (24,48,96).",
)
@click.option(
    "--ways",
    metavar="N|full",
    help="Associativity of every size (default: the structure's own; a fully associative "
    "structure stays fully associative).",
)
@click.option(
    "--array",
    type=click.IntRange(min=0),
    help="L2 TLB only: which array of machine.tlb.l2 to resize (default: the first that "
    "holds 4 KiB pages).",
)
@click.option(
    "--method",
    type=click.Choice(sizing_study.METHODS),
    default="auto",
    show_default=True,
    help="one-pass (exact for the L2 TLB of a one-vCPU, non-adaptive run), separate (one "
    "simulation per size) or auto (one pass where it is exact).",
)
@mode_option
@click.option("--serial", is_flag=True, help="Run separate runs one after another.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("--csv", "csv_path", metavar="FILE", help="Also write the rows as CSV.")
def sizing_cmd(
    structure: str,
    entries: str,
    ways: str | None,
    array: int | None,
    method: str,
    mode: str,
    serial: bool,
    as_json: bool,
    csv_path: str | None,
    **kw: Any,
) -> None:
    """Misses of one translation structure at many sizes (docs/performance.md).

    The L2 TLB is sized in one simulation where that is exact; the page-walk cache and the
    Nested TLB by one simulation per size, in parallel. Example:
    `vmmu sizing --structure l2tlb --entries 64..8192 -w random:footprint=256M,refs=1M`.
    """
    source = _source(kw)
    with ProgressBars() as bars:
        result = sizing_study.study(
            structure,
            entries,
            ways=ways,
            array=array,
            method=method,
            mode=mode,
            parallel=not serial,
            progress=bars,
            **source,
            **_options(kw),
        )
    if csv_path is not None:
        result.rows.to_csv(csv_path, index=False)
    if as_json:
        out = {
            "structure": result.structure,
            "method": result.method,
            "reason": result.reason,
            "array": result.array,
            "rows": result.rows.to_dict("records"),
        }
        click.echo(json.dumps(out, indent=2))
    else:
        _out().print(_render.sizing_table(result))


@cli.group(invoke_without_command=True)
@click.pass_context
def presets(ctx: click.Context) -> None:
    """List the machine presets (`vmmu presets show NAME` prints one)."""
    if ctx.invoked_subcommand is None:
        items = api.presets()
        width = max(map(len, items), default=0)
        for name, desc in items.items():
            click.echo(f"{name:<{width}}  {desc}")


@presets.command("show")
@click.argument("name")
def presets_show(name: str) -> None:
    """Print the TOML of preset NAME."""
    click.echo(api.preset_toml(name), nl=False)


@cli.group(invoke_without_command=True)
@click.pass_context
def profiles(ctx: click.Context) -> None:
    """List the exit cost profiles (`vmmu profiles show NAME` prints one)."""
    if ctx.invoked_subcommand is None:
        items = api.profiles()
        width = max(map(len, items), default=0)
        for name, desc in items.items():
            click.echo(f"{name:<{width}}  {desc}")


@profiles.command("show")
@click.argument("name")
def profiles_show(name: str) -> None:
    """Print the TOML of cost profile NAME."""
    click.echo(api.profile_toml(name), nl=False)


@cli.command("config")
@machine_options
@click.option(
    "--mode", type=click.Choice(api.MODES), default="nested", show_default=True, help="Paging mode."
)
def config_cmd(mode: str, **kw: Any) -> None:
    """Print the fully resolved configuration (every default written out) as TOML."""
    click.echo(api.config(mode=mode, **_options(kw)), nl=False)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON.")
def workloads(as_json: bool) -> None:
    """List the workload generators with their parameters and defaults."""
    catalog = api.workloads()
    if as_json:
        click.echo(json.dumps(catalog, indent=2))
        return
    out = _out()
    if not catalog:
        out.print("no workload generators are available in this build")
        return
    out.print(_render.workload_catalog(catalog))


@cli.group()
def trace() -> None:
    """Inspect and convert trace files."""


@trace.command("info")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def trace_info(path: str, as_json: bool) -> None:
    """Read trace PATH to the end and summarize it."""
    if not os.path.exists(path):
        _fail(f"{path}: no such trace file")
    with ProgressBars() as bars:
        info = api.trace_info(path, progress=bars.callback("reading"))
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        _out().print(_render.key_values(info, title=path))


@trace.command("convert")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dst", type=click.Path(dir_okay=False))
@click.option(
    "--to",
    type=click.Choice(["vtrace", "lackey", "champsim"]),
    help="Output format. Default: the one DST's name says: .vtrace; .txt or .lackey; "
    ".champsim or .champsimtrace (the last two optionally .gz, .zst or .xz). A --to that "
    "disagrees with the name is an error.",
)
def trace_convert(src: str, dst: str, to: str | None) -> None:
    """Convert trace SRC (any format `vmmu run --trace` reads) to DST."""
    if not os.path.exists(src):
        _fail(f"{src}: no such trace file")
    with ProgressBars() as bars:
        info = api.trace_convert(src, dst, to, progress=bars.callback("converting"))
    _out().print(_render.key_values(info, title=f"wrote {dst} ({info['format']})"))


@trace.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def trace_check(path: str, as_json: bool) -> None:
    """Replay trace PATH and report references outside every mapping of their process.

    Exits with status 1 when there is any (docs/recording.md).
    """
    from vmmu import record as rec

    if not os.path.exists(path):
        _fail(f"{path}: no such trace file")
    report = rec.check(path)
    click.echo(json.dumps(report, indent=2) if as_json else rec.check_text(report))
    if not report.get("ok"):
        sys.exit(1)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", metavar="FILE", help="Trace to write (default: CMD.vtrace).")
@click.option("--no-instr", is_flag=True, help="Leave out instruction fetches.")
@click.option(
    "--no-deps",
    is_flag=True,
    help="Do not track which load each address was computed from (the trace then says "
    "its dependences are unknown).",
)
@click.option(
    "--follow-children",
    is_flag=True,
    help="Record forked children too (the command's own execs are always followed).",
)
@click.option(
    "--native-layout",
    is_flag=True,
    help="Relocate regions to where a native x86-64 Linux run puts them.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
def record(
    output: str | None,
    no_instr: bool,
    no_deps: bool,
    follow_children: bool,
    native_layout: bool,
    as_json: bool,
    cmd: tuple[str, ...],
) -> None:
    """Record a real program's memory references and address-space events into a trace
    (under Valgrind with tools/vg-memtrace; docs/recording.md)."""
    from vmmu import record as rec

    out = output or rec.default_output(list(cmd))
    summary = rec.record(
        list(cmd), out, no_instr, follow_children, native_layout, True, no_deps=no_deps
    )
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        # stderr: the recorded program's own output keeps stdout.
        shown = {k: v for k, v in summary.items() if k != "warnings"}
        _err().print(_render.key_values(shown, title=f"wrote {out}"))
    for w in summary.get("warnings", []):
        click.secho(f"warning: {w}", fg="yellow", err=True)


@cli.command()
@click.argument("result_path", metavar="RESULT.json", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--column",
    metavar="NAME",
    help="In a `vmmu compare --json` file: the column (mode or policy) to show.",
)
@click.option("-o", "--output", metavar="FILE.{png,svg,pdf}", help="Also draw the figure.")
@click.option("--limit", type=int, default=60, show_default=True, help="Rows printed at most.")
def timeline(result_path: str, column: str | None, output: str | None, limit: int) -> None:
    """Print an adaptive run's windows (from `vmmu run --mode adaptive --json`) and draw them:
    CPI per window over the paging mode's bands, as seed 001 Figures 9 and 11."""
    with open(result_path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            _fail(f"{result_path}: not JSON ({e})")
    if isinstance(data, dict) and "results" in data and "schema" not in data:
        data = data["results"]
    if isinstance(data, dict) and "schema" not in data:
        names = [k for k, v in data.items() if isinstance(v, dict) and v.get("timeline")]
        if column is None:
            if len(names) != 1:
                _fail(
                    f"{result_path}: {len(names)} results have a timeline "
                    f"({', '.join(names) or 'none'}); pick one with --column NAME"
                )
            column = names[0]
        if column not in data:
            _fail(f"{result_path}: no column `{column}` (columns: {', '.join(data)})")
        data = data[column]
    result = api.Result(data)
    if not result.get("timeline"):
        _fail(
            f"{result_path}: the {result.get('mode', '?')} run has no timeline "
            "(adaptive runs record one: vmmu run --mode adaptive --json)"
        )
    _out().print(_render.timeline_table(result, limit=limit))
    if output is not None:
        from pathlib import Path

        from vmmu import figures

        if Path(output).suffix.lower() not in figures.FORMATS:
            raise click.BadParameter(
                f"{output}: use a .png, .svg or .pdf file name", param_hint="'-o'"
            )
        fig = figures.timeline(result.to_dict())
        figures.save(fig, output)
        _err().print(f"figure: {output}")


cli.add_command(repro)
cli.add_command(suite)
cli.add_command(validate)
cli.add_command(cli_results.sweep)
cli.add_command(cli_results.plot)
cli.add_command(cli_results.report)


@functools.wraps(cli.main)
def main(*args: Any, **kwargs: Any) -> Any:
    """Entry point of the ``vmmu`` console script."""
    return cli.main(*args, prog_name="vmmu", **kwargs)


if __name__ == "__main__":
    main()
