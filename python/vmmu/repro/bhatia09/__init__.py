"""Seed 004 — Bhatia 2009: VMware ESX, EPT (nested paging) vs shadow paging on Nehalem.

What is reproduced: the MMU-intensive kernel microbenchmarks (Figures 4 and 5: segv, pcd, nps,
fw; "up to 600%"), Apache compile at one vCPU (Figures 6 and 7), the system-call intensive
microbenchmarks ("equivalent"), and the TLB-intensive case (Figures 8 and 9: SPECjbb2005
needs guest large pages under EPT) with 171.swim's proxy at 4 KiB and 2 MiB guest pages.

The claims about more than one vCPU (Apache compile at 1, 2 and 4 vCPUs as ``make -jN``;
Database Hammer) are judged on :mod:`vmmu.repro.bhatia09.vcpus`'s runs, on the run's duration (the
slowest vCPU's clock).

What is not: Swingbench and Order-Entry (database servers dominated by I/O), and Citrix
XenApp's figure (its proxy, ``xenapp``, exists; the paper gives the session count but not the
VM's vCPUs).

Steady state: the microbenchmarks report a loop's rate, so each figure is a run with ``N``
iterations minus the run with none (as in kloster07).

Beside the proxies, the recorded suite's nearest entries (:data:`RECORDED`) run whole under the
same three systems and are judged by the same criteria: gcc for Apache compile (a compiler, one
process at a time), jvm-txn for the TLB-intensive SPECjbb2005 itself, and jvm-txn-thp with the
guest's transparent huge pages (``guest.thp = "madvise"``: the JVM advises its heap) for the
large-page row. The kernel microbenchmarks have no counterpart in the suite (it holds no
fork-, fault- or switch-loop program), and the vCPU rows run proxies only.
"""

from __future__ import annotations

from vmmu import published as ref
from vmmu.repro import _suite
from vmmu.repro._claims import (
    INF,
    Band,
    Claims,
    Criterion,
    Report,
    above,
    below,
    coverage,
    holds,
    near,
)
from vmmu.repro._paper import Paper, Param
from vmmu.repro._run import Context, Job, Measured, System, versus_native
from vmmu.repro.bhatia09 import vcpus

MACHINE, PROFILE = "nehalem-x5560", "esx-nehalem"

#: ESX backs guest memory with large pages when EPT is used (seed 004, "Hardware-assisted MMU
#: virtualization": "the ESX VMM and VMkernel aggressively try to use large pages for their own
#: memory when EPT is used"): the nested tables map 2 MiB pages. Shadow runs keep 4 KiB.
ESX_EPT = vcpus.ESX_EPT

#: 171.swim's ~190 MB of arrays, initialised page by page as the program does: the
#: TLB-intensive proxy (SPECjbb2005 in the paper, whose heap is large and sparsely reused).
SWIM = "swim:footprint=192M,prefault=0"

MICRO = ("segv", "pcd", "nps", "fw")

#: The recorded suite's entry nearest each workload row (``vmmu suite list``), and the guest
#: settings it runs with besides the row's own: the large-page row gives the guest Linux's
#: transparent huge pages where madvised.
RECORDED: dict[str, tuple[str, dict[str, str]]] = {
    "compile": ("gcc", {}),
    "swim": ("jvm-txn", {}),
    "swim_2m": ("jvm-txn-thp", {"guest.thp": "madvise"}),
}

PARAMETERS = (
    Param(
        "machine.kernel.context_switch",
        750,
        4_500,
        "½× to 3× the preset's estimate; lmbench lat_ctx reports 1–3 µs per switch on 2–3 GHz "
        "cores, pipe round trip included",
    ),
    Param(
        "machine.kernel.fork",
        10_000,
        60_000,
        "½× to 3× the preset's estimate of copy_process for a small process (~8 µs)",
    ),
    Param(
        "hypervisor.costs.exit_round_trip",
        1_000,
        3_000,
        "the profile's 2,000 is SplitX's Nehalem measurement under KVM; ESX's own path may be "
        "shorter or longer",
    ),
    Param(
        "nps.instrs",
        1_000,
        20_000,
        "lat_ctx's slice with 0 KiB (the pipe wrappers alone) to 64 KiB of data summed",
    ),
    Param(
        "swim.ipr",
        2,
        8,
        "instructions per array reference of a stencil: 2 (one add per load) to 8",
    ),
)


def _ratio(m: dict[str, Measured], k: str) -> float:
    return m[f"{k}/shadow"].cycles / m[f"{k}/nested"].cycles


#: Every table and figure of seed 004 and where this reproduction has it.
COVERAGE = (
    (
        "Figures 1–3",
        "native MMU, shadow page tables, hardware MMU (diagrams)",
        "the model itself (docs/architecture.md), not a result",
    ),
    ("Table 1", "the guest operating systems", "setup: a 64-bit Linux-like guest"),
    (
        "Figures 4, 5",
        "MMU-intensive kernel microbenchmarks, 32- and 64-bit",
        "`segv`, `pcd`, `nps`, `fw`, `micro_max`; `syscall` (a definition); 64-bit only: the "
        "per-benchmark bars are not transcribed",
    ),
    (
        "Figures 6, 7",
        "Apache compile, 1–4 vCPUs",
        "`compile` at one vCPU; `vcpus_compile` at 1, 2 and 4 vCPUs (make -jN)",
    ),
    (
        "Figures 8, 9",
        "SPECjbb2005 with small and large guest pages",
        "`swim`, `swim_2m` (171.swim's proxy as the TLB-intensive workload)",
    ),
    (
        "Figures 10–12",
        "Swingbench, Order-Entry, Database Hammer",
        "`databases`: Swingbench and Order-Entry not simulated (I/O); Database Hammer's vCPU "
        "scaling as `vcpus_database` (the database proxy, guest large pages)",
    ),
    (
        "§5 (Citrix XenApp)",
        "desktop sessions: EPT about 30% better",
        "`citrix`: not judged (the xenapp proxy exists; the VM's vCPU count is not given)",
    ),
)


def run(ctx: Context) -> Report:
    systems = {
        "native": System(MACHINE, "native"),
        "nested": System(MACHINE, "nested", PROFILE, set=tuple(ESX_EPT.items())),
        "shadow": System(MACHINE, "shadow", PROFILE, "hvm"),
    }
    work = {
        "segv": ("segv", "iterations", ctx.scale(2000, 150), None),
        "pcd": ("pcd", "iterations", ctx.scale(4000, 300), None),
        "nps": ("nps", "iterations", ctx.scale(40_000, 3000), None),
        "fw": ("fw", "iterations", ctx.scale(2000, 150), None),
        "syscall": ("aim9-brk_test", "iterations", ctx.scale(20_000, 2000), None),
        "compile": ("compile", "jobs", ctx.scale(20, 2), None),
        "swim": (SWIM, "points", ctx.scale(400_000, 40_000), None),
        "swim_2m": (SWIM, "points", ctx.scale(400_000, 40_000), "2M"),
    }
    jobs = []
    for k, (w, loop, n, gps) in work.items():
        for mode, s in systems.items():
            if gps is not None:
                s = System(s.machine, s.mode, s.profile, s.technique, s.pwc, gps, None, s.set)
            jobs.append(Job(f"{k}/{mode}", s, ctx.spec(w), loop, n, steady=True))
    m = ctx.measure(jobs)
    c = Claims()
    _micro(c, m)
    _compile(c, m)
    _tlb(c, m)
    recorded = _recorded(ctx, c, systems) if not ctx.values else "not run (a sensitivity trial)"
    _vcpus(c, ctx)
    _not_simulated(c)
    return Report(
        "bhatia09",
        "004",
        "VMware ESX: EPT (nested) vs shadow paging on Nehalem",
        {
            "machine": f"{MACHINE} (EPT, VPID)",
            "profile": PROFILE,
            "modes": "native, nested (2 MiB nested pages, as ESX backs EPT guests), shadow "
            "(technique hvm, 4 KiB)",
            "guest": "64-bit (long mode, 4 levels), one vCPU",
            "scale": "quick" if ctx.quick else "full",
            "workloads": {
                k: f"{ctx.spec(w)} {loop}={n} minus {loop}=0"
                + (f", guest.page_size={g}" if g else "")
                for k, (w, loop, n, g) in work.items()
            },
            "recorded": recorded,
        },
        c.rows,
        views=[coverage("004", COVERAGE)],
    )


def _micro(c: Claims, m: dict[str, Measured]) -> None:
    text = ref.claim(
        "bhatia09_claims", "EPT vs shadow on MMU-intensive microbenchmarks (segv pcd nps fw)"
    )
    top = 1 + ref.numbers(text)[0] / 100  # "600% better": shadow takes 7x as long
    tol = 0.5  # "600%" is stated to the hundred percent: ±50% of the time, ±0.5 in the factor
    why = f"'up to {ref.numbers(text)[0]:.0f}%' to the hundred percent: factor ≤ {top + tol:g}"
    for k in MICRO:
        r = _ratio(m, k)
        c.judge(
            k,
            f"{k}: EPT faster than shadow paging, by at most the suite's largest gain",
            f"{text} (Figures 4, 5; per-benchmark bars not transcribed)",
            r,
            "× (shadow / nested)",
            Criterion(Band(1.0, top + tol, lo_open=True), above(1.0), why, 2),
            f"the gain exceeds the paper's largest ({top:g}×): {_WHY_MICRO[k]}"
            if r > 1
            else "shadow paging is not slower here: the proxy's loop exits too rarely",
            versus_native(m, k),
        )
    gains = {k: _ratio(m, k) for k in MICRO}
    best = max(gains, key=lambda k: gains[k])
    c.judge(
        "micro_max",
        "largest microbenchmark gain of EPT over shadow paging",
        f"{text} = {top:g}×",
        gains[best],
        "× (shadow / nested)",
        near(top, tol, above(1.0), "'600%' to the hundred percent: ±0.5 in the factor", 2),
        f"on {best}: {_WHY_MICRO[best]}"
        if gains[best] > top
        else f"on {best}, below the paper's largest gain: the proxies exit less per unit of "
        "native work than the real microbenchmarks",
        ", ".join(f"{k} {v:.2f}" for k, v in gains.items()),
    )
    r = _ratio(m, "syscall")
    c.definition(
        "syscall",
        "system-call intensive microbenchmarks: EPT and shadow equivalent",
        ref.claim("bhatia09_claims", "system-call intensive microbenchmarks"),
        r,
        "× (shadow / nested)",
        "vmmu's system-call proxy (aim9-brk_test) writes no page-table entry, so neither mode "
        "exits and they are equal by construction",
        versus_native(m, "syscall"),
    )


_WHY_MICRO = {
    "segv": "every round maps, faults and unmaps 64 pages, 3 exits per page under shadow paging",
    "pcd": "each created process costs a fork's emulated writes and its teardown's, and each "
    "slice a CR3 exit",
    "nps": "each switch is a CR3 write (an exit) and its pages' hidden faults under shadow "
    "paging, against a few thousand native cycles; the real lat_ctx pays two pipe system "
    "calls and the scheduler per switch, which the proxy charges only as "
    "machine.kernel.context_switch",
    "fw": "each batch forks four children: emulated writes for every write-protected PTE, then "
    "their teardown",
}


def _compile_criterion() -> tuple[str, Criterion]:
    """Apache compile's claim text and criterion: above 1, at most the 4-vCPU gain."""
    text = ref.claim("bhatia09_claims", "EPT vs shadow on MMU-intensive benchmarks")
    top = 1 + ref.numbers(text)[0] / 100
    return text, Criterion(
        Band(1.0, top + 0.005, lo_open=True),
        above(1.0),
        f"the 4-vCPU gain, {top:g}× (±0.005), bounds the 1-vCPU one",
        3,
    )


def _swim_2m_criterion(r4: float) -> Criterion:
    """The large-page row's criterion, given the 4 KiB row's ratio ``r4``."""
    return Criterion(
        Band(1.0, INF),
        above(r4),
        "'match or beat': ≥ 1; direction: large pages close the gap (ratio above the 4 KiB one)",
        3,
    )


#: The TLB-intensive rows: key, claim, criterion of the 4 KiB row.
SWIM_CLAIM = "TLB-intensive, 4 KiB guest pages: shadow paging faster than EPT"
SWIM_2M_CLAIM = "TLB-intensive, 2 MiB guest pages: EPT matches or beats shadow paging"
SWIM_CRITERION = holds(below(1.0), "the paper states the direction only")
COMPILE_CLAIM = "Apache compile, 1 vCPU: EPT faster, less than at 4 vCPUs"


def _compile(c: Claims, m: dict[str, Measured]) -> None:
    text, crit = _compile_criterion()
    r = _ratio(m, "compile")
    c.judge(
        "compile",
        COMPILE_CLAIM,
        f"{text}; the gain grows with vCPUs",
        r,
        "× (shadow / nested)",
        crit,
        "the `compile` proxy's short-lived processes exit under shadow paging more than a "
        "1-vCPU Apache compile does: the paper's 48% is at 4 vCPUs and shrinks with fewer",
        versus_native(m, "compile"),
    )


def _tlb(c: Claims, m: dict[str, Measured]) -> None:
    text = ref.claim("bhatia09_claims", "TLB-intensive (SPECjbb2005)")
    r4 = _ratio(m, "swim")
    c.judge(
        "swim",
        SWIM_CLAIM,
        f"{text} (Figures 8, 9)",
        r4,
        "× (shadow / nested)",
        SWIM_CRITERION,
        "the proxy's TLB misses cost less under EPT with 2 MiB nested pages than its faults "
        "and hidden fills cost under shadow paging",
        versus_native(m, "swim"),
    )
    r2 = _ratio(m, "swim_2m")
    c.judge(
        "swim_2m",
        SWIM_2M_CLAIM,
        text,
        r2,
        "× (shadow / nested)",
        _swim_2m_criterion(r4),
        "EPT still loses with 2 MiB guest pages: the proxy's random references miss even the "
        "2 MiB TLB entries and each 2D walk still costs more than a shadow walk",
        f"4 KiB guest pages: {r4:.3f}; " + versus_native(m, "swim_2m"),
    )


def _recorded(ctx: Context, c: Claims, systems: dict[str, System]) -> str:
    """The compile and TLB-intensive rows on the recorded suite's nearest entries
    (:data:`RECORDED`), each trace run whole under the three systems; returns the setup's
    text."""

    def row_systems(row: str) -> dict[str, System]:
        extra = {p.replace(".", "__"): v for p, v in RECORDED[row][1].items()}
        return {mode: s.with_set(**extra) for mode, s in systems.items()}

    names = {k: n for k, (n, _) in RECORDED.items()}
    recs, have, m = _suite.run_whole(ctx, names, row_systems)
    ratio = {k: _ratio(m, f"{k}.recorded") for k in have}
    tlb = ref.claim("bhatia09_claims", "TLB-intensive (SPECjbb2005)")
    compile_text, compile_crit = _compile_criterion()
    rows = {
        "compile": (COMPILE_CLAIM, f"{compile_text}; the gain grows with vCPUs", compile_crit),
        "swim": (SWIM_CLAIM, f"{tlb} (Figures 8, 9)", SWIM_CRITERION),
        "swim_2m": (SWIM_2M_CLAIM, tlb, _swim_2m_criterion(ratio.get("swim", 1.0))),
    }
    for k, (claim, paper, crit) in rows.items():
        name = RECORDED[k][0]
        if k not in have:
            _suite.not_recorded(c, k, f"{claim}, recorded", paper, [recs[name]])
            continue
        r = ratio[k]
        c.judge(
            _suite.key(k),
            f"{claim} ({name}, recorded)",
            paper,
            r,
            "× (shadow / nested)",
            crit,
            f"{'shadow' if r < 1 else 'nested'} paging wins on {have[k].about()}"
            + (
                ""
                if k != "swim_2m" or "swim" not in have
                else f"; 4 KiB guest pages: {ratio['swim']:.3f}"
            ),
            versus_native(m, f"{k}.recorded"),
        )
    c.not_simulated(
        _suite.key("micro"),
        "MMU-intensive kernel microbenchmarks (segv, pcd, nps, fw), recorded",
        "Figures 4, 5",
        "the suite holds no program whose loop is a fault, fork or context switch: the "
        "microbenchmarks run as proxies only",
    )
    return (
        _suite.describe(recs.values())
        + "; each trace whole (start-up included); "
        + ", ".join(
            f"{k} ← {n}" + "".join(f", {p}={v}" for p, v in g.items())
            for k, (n, g) in RECORDED.items()
        )
    )


def _vcpus(c: Claims, ctx: Context) -> None:
    rows = vcpus.run(quick=ctx.quick, runner=ctx.run)
    ratio = {(r["workload"], r["vcpus"]): 1 + r["nested_advantage"] for r in rows}
    share = {(r["workload"], r["vcpus"]): r["shadow_lock_wait_share"] for r in rows}
    why = dict(zip(vcpus.WORKLOADS, vcpus.explain(rows), strict=True))
    grows = ref.claim("bhatia09_claims", "EPT gain grows with vCPUs")
    top_text = ref.claim("bhatia09_claims", "EPT vs shadow on MMU-intensive benchmarks")
    top = 1 + ref.numbers(top_text)[0] / 100
    for name in vcpus.WORKLOADS:
        r1, r2, r4 = (ratio[(name, n)] for n in (1, 2, 4))
        series = f"1 vCPU {r1:.3f}, 2 vCPUs {r2:.3f}"
        if name == "compile":
            crit = near(
                top,
                0.005,
                above(max(r1, r2)),
                f"the paper's 48% at 4 vCPUs to its digit; direction: the gain grows ({series})",
            )
            paper = f"{top_text}; {grows}"
            claim = "Apache compile at 4 vCPUs (make -j4): EPT's gain, grown from 1 and 2 vCPUs"
        else:
            crit = holds(
                above(max(r1, r2)),
                f"the paper states the direction only; the gain must grow ({series})",
            )
            paper = grows
            claim = "Database Hammer at 4 vCPUs: EPT's gain, grown from 1 and 2 vCPUs"
        c.judge(
            f"vcpus_{name}",
            claim,
            paper,
            r4,
            "× (shadow / nested, duration)",
            crit,
            f"{why[name]}. Shadow paging's handlers serialize on the pager lock and its "
            f"shootdowns exit on every vCPU; the magnitude follows the proxy's fault rate and "
            f"the profile's assumed handler costs (esx-nehalem: Xen 3.0.4's ×0.8)",
            f"{series}, 4 vCPUs {r4:.3f}; shadow time waiting for the pager lock at 4 vCPUs: "
            f"{share[(name, 4)]:.1%}",
        )


def _not_simulated(c: Claims) -> None:
    c.not_simulated(
        "citrix",
        "Citrix XenApp (process creation and switching): EPT about 30% better",
        ref.claim("bhatia09_claims", "Citrix XenApp (process creation and switching)"),
        "the xenapp proxy imitates its process creation and switching, but the paper gives "
        "neither the VM's vCPU count nor a per-session rate to compare with; a recorded session "
        "trace of a Windows Server 2003 guest would be needed for the figure itself",
    )
    c.not_simulated(
        "databases",
        "Swingbench and Order-Entry (Figures 10, 11)",
        "no MMU-related gain at low vCPU counts; large pages in the guest",
        "database servers with I/O and several vCPUs; no proxy",
    )


PAPER = Paper(
    "bhatia09",
    "004",
    "VMware ESX on Nehalem: EPT vs shadow paging (microbenchmarks, compile, TLB-intensive)",
    run,
    PARAMETERS,
)
