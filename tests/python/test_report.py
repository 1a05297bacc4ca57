"""`vmmu plot`, `vmmu report` and the figures: what they draw, the errors they give, and a
report rendered in headless Chromium."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import vmmu
from conftest import install_note, require_tool
from vmmu import figures, headline
from vmmu._format import number
from vmmu.report import overheads, render_report, write_report
from vmmu.results import from_results, load
from vmmu.sweep import run_sweep

VMMU = str(Path(sys.executable).with_name("vmmu"))

SIZING = """
[sweep]
name = "sizing"
[base]
mode = "nested"
workload = "random:footprint=16M,refs=20K"
[grid]
pwc = ["2d", "2d+nt"]
"set.machine.pwc" = [
    {entries = 8, ways = 8}, {entries = 32, ways = 32}, {entries = 128, ways = 128},
]
"""


@pytest.fixture(scope="module")
def sizing_db(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sizing")
    spec = d / "sizing.toml"
    spec.write_text(SIZING)
    db = d / "sizing.duckdb"
    run_sweep(spec, db, workers=2)
    return db


@pytest.fixture(scope="module")
def modes() -> dict[str, vmmu.Result]:
    return vmmu.api.run_modes(workload="random:footprint=8M,refs=20K")


def timeline_result(base: vmmu.Result) -> dict:
    """A result as an adaptive run reports it: a timeline of windows and their modes."""
    d = base.to_dict()
    d["mode"] = "adaptive"
    d["mode_switches"] = 2
    d["timeline"] = [
        {"window": 0, "instructions": 1000, "cycles": 4000, "mode": "shadow"},
        {"window": 1, "instructions": 1000, "cycles": 9000, "mode": "shadow"},
        {"window": 2, "instructions": 1000, "cycles": 3000, "mode": "nested"},
        {"window": 3, "instructions": 500, "cycles": 1000, "mode": "shadow", "tlb_misses": 7},
    ]
    return d


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def plot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([VMMU, "plot", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def schema_keys() -> set[str]:
    """The dotted keys of real results of every mode, and of a run on two vCPUs."""
    keys: set[str] = set()
    for mode in vmmu.MODES:
        extra = {"time_scale": 1e-4} if mode == "adaptive" else {}
        keys |= set(vmmu.run(mode=mode, workload="random:footprint=8M,refs=20K", **extra).flat())
    two = "database:threads=4,queries=4,pool=16M,rows=16"
    keys |= set(vmmu.run(mode="shadow", vcpus=2, workload=two).flat())
    return keys


def test_every_headline_key_is_in_the_result_schema(schema_keys):
    absent = []
    for key in headline.result_keys():
        prefix, star, suffix = key.partition("*")
        if star:
            found = any(k.startswith(prefix) and k.endswith(suffix) for k in schema_keys)
        else:
            found = key in schema_keys
        if not found:
            absent.append(key)
    assert absent == []


def test_the_report_comparison_is_the_terminal_headline(modes):
    page = render_report(modes, title="headline")
    table = re.search(r'id="comparison">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    rows = [
        [html.unescape(re.sub("<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    ]
    over = vmmu.api.overhead(modes)
    lines = headline.lines([r.flat() for r in modes.values()], [over[m] for m in modes])
    assert rows == [[ln.label.strip(), *(ln.cells or [""] * len(modes))] for ln in lines]
    assert ["pwc hits", *(number(r.walk_caches["pwc"]["hits"]) for r in modes.values())] in rows


# --- vmmu plot ----------------------------------------------------------------------------


def test_plot_writes_a_png_and_an_svg(sizing_db, tmp_path):
    png = tmp_path / "f.png"
    r = plot(
        str(sizing_db),
        "--x",
        "set.machine.pwc.entries",
        "--y",
        "cycles",
        "--hue",
        "pwc",
        "-o",
        str(png),
    )
    assert r.returncode == 0, r.stderr
    w, h = png_size(png.read_bytes())
    assert w > 300 and h > 200
    svg = tmp_path / "f.svg"
    r = plot(
        str(sizing_db),
        "--kind",
        "sizing",
        "--x",
        "set.machine.pwc.entries",
        "--hue",
        "pwc",
        "--relative",
        "-o",
        str(svg),
    )
    assert r.returncode == 0, r.stderr
    assert "<svg" in svg.read_text()


def test_points_sharing_a_bar_are_an_error_naming_the_keys_they_differ_in(sizing_db, tmp_path):
    r = plot(str(sizing_db), "--x", "pwc", "--y", "cycles", "-o", str(tmp_path / "f.png"))
    assert r.returncode == 2
    assert "3 points share one value (x=2d)" in r.stderr
    assert "they differ in `set.machine.pwc.entries`" in r.stderr
    assert not (tmp_path / "f.png").exists()
    r = plot(str(sizing_db), "--x", "pwc", "--agg", "mean", "-o", str(tmp_path / "f.png"))
    assert r.returncode == 0, r.stderr


def test_an_unknown_column_is_named_with_a_suggestion(sizing_db, tmp_path):
    r = plot(str(sizing_db), "--x", "pwc", "--y", "cylces", "-o", str(tmp_path / "f.png"))
    assert r.returncode == 2
    assert "have no column `cylces` (did you mean `cycles`?)" in r.stderr
    r = plot(str(sizing_db), "--x", "pwc", "-o", str(tmp_path / "f.gif"))
    assert r.returncode == 2 and "use a .png, .svg or .pdf" in r.stderr


def test_where_selects_points_and_names_a_value_no_point_has(sizing_db, tmp_path):
    rs = load(sizing_db).where({"pwc": "2d", "set.machine.pwc.entries": "32"})
    assert len(rs) == 1 and rs.frame.iloc[0]["set.machine.pwc.entries"] == 32
    r = plot(
        str(sizing_db), "--kind", "heatmap", "--where", "pwc=3d", "-o", str(tmp_path / "f.png")
    )
    assert r.returncode == 2 and "no point of" in r.stderr and "pwc=3d" in r.stderr


def test_sizing_series_are_the_stored_values(sizing_db):
    rs = load(sizing_db)
    data = figures.series(rs, "set.machine.pwc.entries", "cycles", "pwc")
    df = rs.frame
    for _, row in data.iterrows():
        want = df[(df["pwc"] == row["hue"]) & (df["set.machine.pwc.entries"] == row["x"])]
        assert row["y"] == want.iloc[0]["cycles"]
    fig = figures.sizing(rs, "set.machine.pwc.entries", "cycles", hue="pwc", relative=True)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2
    for line in lines:
        ys = list(line.get_ydata())
        assert ys[0] == 0.0  # improvement over the smallest size is 0 at the smallest size
    assert fig.axes[0].get_xscale() == "log"


def test_speedup_is_native_cycles_over_cycles(modes):
    rs = from_results(modes)
    t = figures.speedup_table(rs).set_index("mode")
    native = modes["native"].cycles
    assert t.loc["nested", "speedup"] == pytest.approx(native / modes["nested"].cycles, rel=1e-12)
    assert t.loc["shadow", "speedup"] == pytest.approx(native / modes["shadow"].cycles, rel=1e-12)
    fig = figures.speedup(rs)
    heights = sorted(p.get_height() for p in fig.axes[0].patches)
    assert heights == pytest.approx(sorted(t["speedup"]))


def test_a_reports_overhead_is_the_apis_against_each_points_native(modes):
    big = vmmu.api.run_modes(workload="random:footprint=32M,refs=20K")
    rs = from_results([*modes.values(), *big.values()])
    over = overheads(rs)
    want = [*vmmu.api.overhead(modes).values(), *vmmu.api.overhead(big).values()]
    assert [over[i] for i in rs.ok.index] == want
    assert want[0] == 0.0 and all(w > 0 for w in want[1:3])


@pytest.fixture(scope="module")
def two_scales():
    """A stream of 1 MiB and a random workload over 64 MiB, each native and nested: their
    cycles differ by a factor of about 100."""
    runs = [
        vmmu.run(mode=mode, workload=w)
        for w in ("stream:footprint=1M,refs=5K", "random:footprint=64M,refs=20K")
        for mode in ("native", "nested")
    ]
    return from_results(runs)


def _panel_tops(fig) -> list[tuple[float, float]]:
    """Each panel's y-axis top and the largest value drawn in it."""
    out = []
    for ax in fig.axes:
        drawn = [p.get_height() for p in ax.patches] + [
            y for line in ax.get_lines() for y in line.get_ydata()
        ]
        out.append((ax.get_ylim()[1], max(drawn)))
    return out


@pytest.mark.parametrize("kind", ["bars", "line"])
def test_facet_panels_of_different_scales_each_have_their_own_y_axis(two_scales, kind):
    if kind == "bars":
        fig = figures.bars(two_scales, "mode", "cycles", facet="workload")
    else:
        fig = figures.line(two_scales, "instructions", "cycles", hue="mode", facet="workload")
    tops = _panel_tops(fig)
    assert len(tops) == 2
    small, big = sorted(largest for _, largest in tops)
    assert big > 50 * small, "the fixture's two scales"
    for top, largest in tops:
        assert largest <= top < 2 * largest, (top, largest)


def test_walk_heatmap_cells_are_references_per_thousand_instructions(modes):
    r = modes["nested"]
    fig = figures.walk_heatmaps([r.to_dict()], ["nested"])
    ax = fig.axes[0]
    grid = ax.images[0].get_array()
    assert grid.shape == (5, 5)  # rows gL4..gL1, gPA; columns nL4..nL1, G
    assert [t.get_text() for t in ax.get_xticklabels()] == ["nL4", "nL3", "nL2", "nL1", "G"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["gL4", "gL3", "gL2", "gL1", "gPA"]
    per_kilo = 1000.0 / r.instructions
    assert grid[4, 3] == pytest.approx(r.walk_refs_by_step["nL1,gPA"] * per_kilo)
    assert grid[0, 4] == pytest.approx(r.walk_refs_by_step["G,gL4"] * per_kilo)
    assert bool(grid.mask[4, 4])  # {G, gPA} does not exist
    native = figures.walk_heatmaps([modes["native"].to_dict()], ["native"]).axes[0]
    assert native.images[0].get_array().shape == (1, 4)


def test_timeline_draws_each_window_and_each_mode_switch(modes, tmp_path):
    result = timeline_result(modes["nested"])
    fig = figures.timeline(result)
    ax = fig.axes[0]
    spans = [p for p in ax.patches]
    assert len(spans) == 4
    switches = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert [ln.get_xdata()[0] for ln in switches] == [2000.0, 3000.0]
    cpi = next(ln for ln in ax.get_lines() if ln.get_label() == "CPI")
    assert list(cpi.get_ydata()) == [4.0, 4.0, 9.0, 9.0, 3.0, 3.0, 2.0, 2.0]
    assert "4 windows, 2 mode switches" in fig.texts[0].get_text()
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(result))
    r = plot(str(path), "--kind", "timeline", "-o", str(tmp_path / "t.png"))
    assert r.returncode == 0, r.stderr
    bad = dict(result, timeline=[{"window": 0, "cycles": 5}])
    with pytest.raises(ValueError, match="timeline window 0 lacks instructions, mode"):
        figures.timeline(bad)


# --- vmmu report --------------------------------------------------------------------------


def images(page: str) -> list[bytes]:
    return [
        base64.b64decode(m) for m in re.findall(r'<img src="data:image/png;base64,([^"]+)"', page)
    ]


def test_report_of_a_sweep_has_its_sections_and_only_inline_images(sizing_db, tmp_path):
    out = tmp_path / "r.html"
    r = subprocess.run(
        [VMMU, "report", str(sizing_db), "-o", str(out)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    for title in (
        "Overview",
        "Comparison",
        "Cycles by cause",
        "Sweep curves",
        "Walk references by step",
    ):
        assert f"<h2>{title}</h2>" in page
    assert "vmmu report — sizing" in page
    assert not re.search(r'(src|href)="(https?:)?//', page), "a report loads nothing"
    imgs = images(page)
    assert len(imgs) == page.count("<img ") == 4  # breakdown, 2 sizing curves, heat maps
    assert all(min(png_size(b)) > 100 for b in imgs)


def test_report_of_compare_json_with_a_timeline_and_a_failed_point(modes, tmp_path):
    results = dict(modes)
    results["adaptive"] = vmmu.Result(timeline_result(modes["nested"]))
    page = render_report(results, title="modes")
    for title in ("Comparison", "Cycles by cause", "Speedup against native", "Timelines"):
        assert f"<h2>{title}</h2>" in page
    assert ">overhead vs native<" in page
    over = 100 * (modes["shadow"].cycles / modes["native"].cycles - 1)
    assert f"{over:+.1f}%" in page
    assert len(images(page)) == 4


def test_write_report_takes_tables_from_python(tmp_path):
    import pandas as pd

    df = pd.DataFrame(
        {
            "claim": ["a <b>", "c"],
            "paper": [1.0, 2.0],
            "vmmu": [1.1, 3.0],
            "verdict": ["reproduced", "differs"],
        },
        index=["r1", "r2"],
    )
    df.attrs.update({"title": "a paper", "machine": "bhargava08"})
    out = write_report(tmp_path / "sub" / "t.html", tables={"paper1": df})
    page = out.read_text()
    assert "paper1 — a paper" in page
    assert "a &lt;b&gt;" in page  # text is escaped
    assert '<tr class="differs">' in page
    assert '<td class="verdict">reproduced</td>' in page


def test_compare_report_option_writes_the_page(invoke, tmp_path):
    out = tmp_path / "c.html"
    r = invoke("compare", "--workload", "random:footprint=4M,refs=20K", "--report", str(out))
    assert r.exit_code == 0, r.stderr
    assert f"report: {out}" in r.stderr
    page = out.read_text()
    assert "vmmu compare — random:footprint=4M,refs=20K" in page
    assert "<h2>Speedup against native</h2>" in page


def test_repro_report_option_writes_one_page_per_paper(invoke, tmp_path):
    out = tmp_path / "bh.html"
    r = invoke("repro", "bhargava08", "--quick", "--report", str(out))
    assert r.exit_code == 0, r.stderr
    page = out.read_text()
    assert "vmmu repro bhargava08" in page and "f6/nt_gain/MiscServer" in page
    assert "Every table and figure of seed 002" in page  # the views come along
    assert re.search(r"\d+ reproduced, \d+ same direction, \d+ differs \(\d+ findings\)", page)


def test_report_of_an_unknown_json_names_the_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    r = subprocess.run(
        [VMMU, "report", str(bad), "-o", str(tmp_path / "r.html")], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert f"{bad}: not a vmmu result" in r.stderr


# --- in a browser -------------------------------------------------------------------------

#: Put first in <head>: records errors and console.error, and on load writes each image's
#: decoded size into the page, which --dump-dom prints.
CHECKER = """<script>
window.__errors = [];
window.addEventListener('error', function (e) {
  var t = e.target;
  window.__errors.push(String(e.message || (t && (t.src || t.href)) || 'error'));
}, true);
var __consoleError = console.error;
console.error = function () { window.__errors.push(Array.from(arguments).join(' '));
  __consoleError.apply(console, arguments); };
window.addEventListener('load', function () {
  var imgs = Array.from(document.images).map(function (i) {
    return {complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
            shown: i.getBoundingClientRect().width}; });
  var pre = document.createElement('pre'); pre.id = '__check';
  pre.textContent = JSON.stringify({images: imgs, errors: window.__errors});
  document.body.appendChild(pre);
});
</script>"""


@pytest.fixture(scope="module")
def chromium() -> str:
    """The headless Chromium the browser test runs (module-scoped, so a missing one is told
    before the other fixtures run)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    require_tool(path is not None, "headless Chromium is not installed", install_note("chromium"))
    return str(path)


def test_report_renders_in_headless_chromium(chromium, sizing_db, modes, tmp_path):
    browser = chromium
    results = dict(modes)
    results["adaptive"] = vmmu.Result(timeline_result(modes["nested"]))
    page = render_report(results, title="browser check")
    n_images = page.count("<img ")
    assert n_images >= 4
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("<head>", "<head>\n" + CHECKER, 1))
    r = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    m = re.search(r'<pre id="__check">(.*?)</pre>', r.stdout, re.S)
    assert m, f"the page did not load: {r.stderr[-2000:]}"
    check = json.loads(html.unescape(m.group(1)))
    assert check["errors"] == []
    assert len(check["images"]) == n_images
    for img in check["images"]:
        assert img["complete"] and img["w"] > 100 and img["h"] > 100 and img["shown"] > 0, img
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    assert console == []
