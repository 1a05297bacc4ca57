"""``vmmu validate host`` (docs/validation.md, docs/cli.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from vmmu import api
from vmmu.options import parse_count
from vmmu.validate import host, window


def _list(choices: tuple[str, ...]) -> Any:
    """A click callback: a comma-separated list of ``choices``, in any case, spelt as they are."""
    spelt = {c.lower(): c for c in choices}

    def parse(_ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
        if value is None:
            return None
        items = [spelt.get(x.strip().lower(), x.strip()) for x in value.split(",") if x.strip()]
        bad = [x for x in items if x not in choices]
        if bad or not items:
            raise click.BadParameter(
                f"`{value}`: give a comma-separated list of {', '.join(choices)}", param=param
            )
        return list(dict.fromkeys(items))

    return parse


def _footprints(_ctx: click.Context, param: click.Parameter, value: str) -> list[int]:
    try:
        sizes = [host.parse_footprint(x) for x in value.split(",") if x.strip()]
    except ValueError as e:
        raise click.BadParameter(str(e), param=param) from None
    if not sizes:
        raise click.BadParameter("give at least one size, e.g. 256M,2G", param=param)
    return list(dict.fromkeys(sizes))


def _sets(
    _ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, str]]:
    out = []
    for v in values:
        path, eq, value = v.partition("=")
        if not eq or not path.strip() or not value.strip():
            raise click.BadParameter(f"expected PATH=VALUE, got `{v}`", param=param)
        out.append((path.strip(), value.strip()))
    return out


def _sensitivity(
    _ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, list[str]]]:
    out = []
    for path, span in _sets(_ctx, param, values):
        lo, colon, hi = span.partition(":")
        if not colon or not lo.strip() or not hi.strip():
            raise click.BadParameter(f"expected PATH=LO:HI, got `{path}={span}`", param=param)
        out.append((path, [lo.strip(), hi.strip()]))
    return out


def _count(_ctx: click.Context, param: click.Parameter, value: str) -> int:
    try:
        n = parse_count(value, f"--{param.name.replace('_', '-')}")
    except ValueError as e:
        raise click.BadParameter(str(e), param=param) from None
    if n < 1:
        raise click.BadParameter(f"`{value}`: at least 1", param=param)
    return n


class _Steps(host.Steps):
    """The stages as rich progress bars on stderr: one bar per stage, the current step's name
    beside it."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.task: Any = None
        self.started = False

    def stage(self, name: str, total: int) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=self.bar.tasks[self.task].total, detail="done")
        self.task = self.bar.add_task(name, total=total, detail="")
        self.started = False

    def step(self, description: str) -> None:
        if self.started:
            self.bar.advance(self.task)
        self.started = True
        self.bar.update(self.task, detail=description)

    def finish(self) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=self.bar.tasks[self.task].total, detail="done")


def _ns(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _measured_table(check: host.HostCheck) -> Table:
    t = Table(title=f"ns per access: measured ({check.runs} runs) and predicted on {check.machine}")
    for col in ("footprint", "pages", "pattern", "measured"):
        t.add_column(col, justify="right" if col == "measured" else "left")
    columns = [("interval", w) for w in check.windows] + [("additive", check.windows[0])]
    for m, w in columns:
        for h in check.host_pages:
            t.add_column(f"{m}{_window_label(check, m, w)}, host {h}", justify="right")
    for fp in check.footprints:
        for pg in check.pages:
            for pat in check.patterns:
                ns = check.measured_ns(fp, pg, pat)
                cells = [
                    _ns(check.predicted_ns(fp, pg, pat, h, m, w))
                    for m, w in columns
                    for h in check.host_pages
                ]
                t.add_row(
                    host.size_label(fp), pg.upper(), pat, ", ".join(_ns(x) for x in ns), *cells
                )
    return t


def _window_label(check: host.HostCheck, model: str, state: str) -> str:
    """`` (half window)`` where the interval model's predictions differ by window state."""
    return f" ({state} window)" if model == "interval" and len(check.windows) > 1 else ""


def _by_window(m: dict[str, Any]) -> str:
    """A ratio's predictions, host 4K / 2M, per window state: ``15.55 / 15.74; half 7.96 /
    8.02``."""
    by = m.get("by_window") or {"full": m["by_host_pages"]}
    parts = []
    for i, (w, by_host) in enumerate(by.items()):
        pair = " / ".join(f"{v:.2f}" for v in by_host.values())
        parts.append(pair if i == 0 and w == "full" else f"{w} {pair}")
    return "; ".join(parts)


def _verdict(v: dict[str, Any], band: float) -> str:
    if v["within"]:
        return f"[green]within ±{band:.0%}[/green]"
    return f"[red]off {v['error']:+.0%}[/red]"


def _ratio_table(check: host.HostCheck) -> Table:
    hosts = " / ".join(f"host {h}" for h in check.host_pages)
    t = Table(title=f"ratios: measured against predicted ({hosts})")
    for col in ("ratio", "footprint", "of", "measured", "band"):
        t.add_column(col)
    for m in host.CORE_MODELS:
        t.add_column(m, justify="right")
        t.add_column(f"{m} verdict")
    for r in check.ratios():
        runs = r["measured_runs"]
        lo, hi = min(runs), max(runs)
        measured = f"{r['measured']:.2f}" + (f" ({lo:.2f}–{hi:.2f})" if len(runs) > 1 else "")
        cells = []
        for m in host.CORE_MODELS:
            model = r["models"][m]
            shown = model if m == "interval" else {"by_host_pages": model["by_host_pages"]}
            cells.append(_by_window(shown))
            cells.append(_verdict(model, r["band"]))
        t.add_row(
            r["kind"],
            host.size_label(r["footprint"]),
            r["of"],
            measured,
            f"±{r['band']:.0%}",
            *cells,
        )
    return t


def _causes_table(check: host.HostCheck) -> Table:
    t = Table(
        title="cycles per access behind the predictions (interval exposed / additive paid; "
        "walks; waits for a walker and a miss register)"
    )
    for col in ("footprint", "pages", "pattern", "host", "window"):
        t.add_column(col)
    for col in ("translation", "data", "walks", "walker wait", "MSHR wait"):
        t.add_column(col, justify="right")
    for p in check.predicted:
        a = p["per_access"]
        t.add_row(
            host.size_label(p["footprint"]),
            p["pages"].upper(),
            p["pattern"],
            p["host_pages"],
            p.get("window", "full"),
            f"{a['translation_interval']:.1f} / {a['translation_additive']:.1f}",
            f"{a['data_interval']:.1f} / {a['data_additive']:.1f}",
            f"{a['walks']:.2f}",
            f"{a['walker_wait']:.1f}",
            f"{a['mshr_wait']:.1f}",
        )
    return t


def _sensitivity_table(check: host.HostCheck) -> Table:
    t = Table(title="sensitivity: the interval model's ratio (host 4K / 2M) and verdict per value")
    for col in ("ratio", "footprint", "of", "measured"):
        t.add_column(col)
    t.add_column("preset", justify="right")
    for v in check.sensitivity:
        t.add_column(", ".join(f"{k}={x}" for k, x in v["set"]), justify="right")
    base = check.ratios()
    for i, r in enumerate(base):
        cells = []
        for ratios in [base, *(v["ratios"] for v in check.sensitivity)]:
            m = ratios[i]["models"]["interval"]
            cells.append(f"{_by_window(m)} {_verdict(m, r['band'])}")
        t.add_row(
            r["kind"], host.size_label(r["footprint"]), r["of"], f"{r['measured']:.2f}", *cells
        )
    return t


def _page_summary(check: host.HostCheck) -> str:
    """What the page probe showed and which host page sizes the predictions are for."""
    reading = check.page_probe.get("reading")
    told = reading and reading.get("host_pages")
    if told and check.host_pages == [told]:
        return f"host pages: {told}, read from the TLB's reach: {reading['why']}."
    if reading:
        head = f"page probe: {reading['why']}; "
    elif "error" in check.page_probe:
        head = f"page probe not run: {check.page_probe['error']}; "
    else:
        head = ""
    if len(check.host_pages) > 1:
        return f"note: {head}{host.HOST_PAGES_NOTE}."
    return f"note: {head}predicting for host pages {check.host_pages[0]}, as given."


def _window_summary(check: host.HostCheck) -> str:
    """What the window probe showed and which window states the predictions are for."""
    states = " and ".join(check.windows)
    half = ""
    if "half" in check.windows:
        pairs = window.half_sets(check.machine, check.sets)
        half = " (half: " + ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in pairs) + ")"
    tail = f"predicting for the {states} window{'s' if len(check.windows) > 1 else ''}{half}"
    w = check.window
    reading = w.get("reading")
    if reading and reading.get("found"):
        core = api.config_dict(check.machine, set=list(check.sets))["machine"]["core"]
        lo, hi = reading["window_range"]
        share = reading.get("half_share")
        zones = reading.get("half_share_by_zone")
        shares = (
            f"; loads half a window to a window apart did not overlap {share:.0%} of the time "
            f"(its lower and upper half: {zones[0]:.0%}, {zones[1]:.0%})"
            if share is not None and zones
            else ""
        )
        registers = "".join(
            f"; {window.FILLERS[f]} {r['window_range'][0]}–{r['window_range'][1]}"
            for f, r in w.get("registers", {}).items()
            if r.get("found")
        )
        sittings = sum(r.get("filler", "nop") == "nop" for r in w.get("runs", []))
        return (
            f"window probe ({sittings} sittings): reorder buffer {lo}–{hi} entries with the "
            f"core to itself ({check.machine}: rob {core.get('rob')}){shares}{registers} "
            f"(instructions in flight that write them); {tail}"
        )
    if reading:
        return f"window probe: {reading['why']}; {tail}"
    if "error" in w:
        return f"window probe not run: {w['error']}; {tail}"
    return f"window probe not run; {tail}"


@click.group()
def validate() -> None:
    """Check vmmu's predictions against the machine it runs on (docs/validation.md)."""


@validate.command("host")
@click.option(
    "--footprint",
    "footprints",
    default="256M,2G",
    show_default=True,
    callback=_footprints,
    metavar="SIZE,...",
    help="Footprints of the probe's region (powers of two of at least 2M).",
)
@click.option(
    "--pages",
    default="4k,2m",
    show_default=True,
    callback=_list(host.PAGES),
    metavar="4k,2m",
    help="Page sizes of the region (2m: MADV_HUGEPAGE, checked through AnonHugePages).",
)
@click.option(
    "--pattern",
    "patterns",
    default="chase,independent",
    show_default=True,
    callback=_list(host.PATTERNS),
    metavar="chase,independent",
    help="Access patterns: a dependent chase, independent loads.",
)
@click.option(
    "--accesses",
    default="20M",
    show_default=True,
    callback=_count,
    metavar="N",
    help="Timed accesses of each native run.",
)
@click.option(
    "--record-accesses",
    default="1M",
    show_default=True,
    callback=_count,
    metavar="N",
    help="Timed accesses of each recorded run (the prediction is per access).",
)
@click.option(
    "--preset",
    "--machine",
    "-m",
    "machine",
    default=None,
    metavar="NAME|FILE.toml",
    help="Machine preset to predict with (see `vmmu presets`); default: the preset of this "
    "machine's processor (vendor, family and model from /proc/cpuinfo), zen3 when none is.",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Native runs of each combination (ratios pair runs of the same round).",
)
@click.option(
    "--keep",
    "keep",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Keep the recorded traces in DIR (default: a temporary directory).",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="PATH=VALUE",
    callback=_sets,
    help="Change the preset for every prediction (repeatable), e.g. machine.core.mshrs=10.",
)
@click.option(
    "--sensitivity",
    multiple=True,
    metavar="PATH=LO:HI",
    callback=_sensitivity,
    help="Also predict with PATH at LO and at HI and print each ratio's verdict per value "
    "(repeatable), e.g. machine.core.mshrs=10:16.",
)
@click.option(
    "--reuse",
    metavar="FILE.json",
    type=click.Path(dir_okay=False, exists=True),
    help="Measure and record nothing: take a saved check (--save) and its traces (--keep DIR, "
    "required) and predict again, on --preset, with --set and --sensitivity (for the "
    "saved footprints --footprint names, all by default).",
)
@click.option(
    "--window-probe/--no-window-probe",
    default=True,
    show_default=True,
    help="Measure the core's window (its reorder buffer) before and after the probe's runs "
    "and predict for each state it shows: the whole window, and half of it when a sibling "
    "thread (SMT) shares the core.",
)
@click.option(
    "--windows",
    "windows",
    default=None,
    callback=_list(window.WINDOWS),
    metavar="full,half",
    help="Predict for these window states whatever the window probe shows (half: the "
    "preset's rob and store_queue halved), e.g. with --reuse of a check saved without them.",
)
@click.option(
    "--page-probe/--no-page-probe",
    default=True,
    show_default=True,
    help="Read the host's page size from the TLB's reach (a chase of one line per 4 KiB page "
    "in 2 MiB and in 4 KiB guest pages) and predict for it alone when it tells; both when not.",
)
@click.option(
    "--host-pages",
    "host_pages",
    default=None,
    callback=_list(host.HOST_PAGES),
    metavar="4K,2M",
    help="Predict for these host page sizes whatever the page probe shows (also with --reuse).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole check as JSON.")
@click.option(
    "--save",
    metavar="FILE.json",
    type=click.Path(dir_okay=False),
    help="Also write the whole check as JSON to FILE.json.",
)
def host_cmd(
    footprints: list[int],
    pages: list[str],
    patterns: list[str],
    accesses: int,
    record_accesses: int,
    machine: str | None,
    runs: int,
    keep: str | None,
    sets: list[tuple[str, str]],
    sensitivity: list[tuple[str, list[str]]],
    reuse: str | None,
    window_probe: bool,
    windows: list[str] | None,
    page_probe: bool,
    host_pages: list[str] | None,
    as_json: bool,
    save: str | None,
) -> None:
    """Time a probe on this machine and set it beside vmmu's prediction for it.

    The probe touches one random 64-byte line per access as a dependent chase or as
    independent loads. Each combination is timed natively (all in one sitting), recorded
    with `vmmu record`, and simulated with nested paging on MACHINE for the host page size
    the page probe reads (4K and 2M where it cannot tell) and each state of the core's window
    the window probe sees, under the interval core model and the additive one.
    Prints ns per access and the ratios dependent/independent (band ±25%) and 4K/2M (±15%).
    Needs gcc, Valgrind's headers and vmmu's Valgrind tool (make install).
    """
    err = Console(file=sys.stderr, highlight=False)
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    if reuse and not keep:
        raise click.BadParameter(
            "--reuse needs --keep DIR, the traces' directory", param_hint="--keep"
        )
    with Progress(*columns, console=err, transient=False) as bar:
        steps = _Steps(bar)
        if reuse:
            try:
                saved = json.loads(Path(reuse).read_text(encoding="utf-8"))
                source = click.get_current_context().get_parameter_source("footprints")
                only = None if source == click.core.ParameterSource.DEFAULT else footprints
                check = host.resimulate(
                    saved,
                    Path(keep or "."),
                    machine,
                    steps,
                    sets,
                    sensitivity,
                    only,
                    windows,
                    host_pages,
                )
            except (ValueError, KeyError) as e:
                raise click.BadParameter(f"{reuse}: {e}", param_hint="--reuse") from None
        else:
            check = host.check_host(
                machine=machine,
                footprints=footprints,
                pages=pages,
                patterns=patterns,
                accesses=accesses,
                record_accesses=record_accesses,
                runs=runs,
                steps=steps,
                work_dir=Path(keep) if keep else None,
                sets=sets,
                sensitivity=sensitivity,
                window_probe=window_probe,
                windows=windows,
                page_probe=page_probe,
                host_pages=host_pages,
            )
        steps.finish()
    text = json.dumps(check.to_dict(), indent=2)
    if save:
        Path(save).write_text(text + "\n", encoding="utf-8")
    if as_json:
        click.echo(text)
        return
    out = Console(file=sys.stdout, highlight=False, soft_wrap=False, width=200)
    load = check.loadavg
    out.print(
        escape(f"{check.host['cpu']}, Linux {check.host['kernel']}, THP {check.host['thp']}; ")
        + f"{check.started}; load average (1, 5, 15 min) "
        f"{' '.join(f'{x:.2f}' for x in load['before'])} before measuring, "
        f"{' '.join(f'{x:.2f}' for x in load['after_measuring'])} after"
    )
    out.print(escape(f"preset {check.machine_reason}"))
    out.print(escape(_window_summary(check)))
    out.print(_measured_table(check))
    out.print(_causes_table(check))
    out.print(_ratio_table(check))
    if check.sensitivity:
        out.print(_sensitivity_table(check))
    out.print(escape(_page_summary(check)))
