"""Seed 002's reproduction, the claims: each finding of Table 1, Figure 6 and Tables 4–5 per
suite (and for the recorded programs, against IntCpu), Figure 6's largest gain across suites,
and MiscServer's Figures 7–9, each judged against the paper's own precision."""

from __future__ import annotations

import math
from collections.abc import Mapping

from vmmu import published as ref
from vmmu.repro import _suite
from vmmu.repro._claims import (
    Band,
    Claims,
    Criterion,
    above,
    below,
    holds,
    near,
    within,
)
from vmmu.repro._run import Context, Measured
from vmmu.repro.bhargava08 import setup
from vmmu.repro.bhargava08.metrics import figure9_gain, ntlb_accesses, pwc_accesses, pwc_hit_pct
from vmmu.repro.bhargava08.setup import SERVER


def definitions(c: Claims, m: Mapping[str, Measured], suite: str) -> None:
    """The rows that hold by construction: references per 2D walk (Law 2), on ``suite``."""
    c.definition(
        "refs_per_walk",
        "page-entry references of a 2D walk, 4-level guest over 4-level nested, no caching",
        ref.claim(
            "bhargava08_claims",
            "page entry references of a 2D walk with n guest and m nested levels",
        ),
        m[f"{suite}/nested/none"].full.walk_refs_per_walk,
        "references / walk",
        "nm + n + m: Law 2, pinned by the tests",
    )


def t1(suite: str, column: str) -> tuple[float, str]:
    return (
        ref.cell("bhargava08_table1", "suite", suite, column),
        ref.printed("bhargava08_table1", "suite", suite, column),
    )


def t4(suite: str, column: str) -> float:
    return ref.cell("bhargava08_table4", "suite", suite, column)


def t5(suite: str, column: str) -> float:
    return ref.cell("bhargava08_table5", "suite", suite, column)


def text_of(claim: str) -> str:
    return ref.claim("transcribed/bhargava08_text", claim)


def _range(text: str) -> tuple[float, float]:
    xs = ref.numbers(text)
    return xs[0], xs[1]


def _subject(key: str) -> tuple[str, str, str]:
    """What an explanation speaks of for workload set ``key``: a suite's single-stream proxy
    or its recorded programs (``SUITE/recorded``): subject, possessive, verb "to run"."""
    if _suite.reads_cache(key):
        return "the recorded programs", "the recorded programs'", "run"
    return "the single-stream proxy", "the proxy's", "runs"


def perfect_claims(
    c: Claims,
    key: str,
    suite: str,
    name: str,
    x: dict[str, float],
    additive: dict[str, float] | None = None,
) -> None:
    """Table 1's perfect-TLB opportunity, native and 2D, for workload set ``key`` judged
    against suite ``suite``'s; with ``additive`` (the same workload's figures under the
    additive core model) the rows are the interval core model's, keyed ``.../interval``, and
    their explanation compares the two models."""
    it, _its, run = _subject(key)
    for column, mk, text_claim in (
        ("perfect_tlb_gain_native_pct", "perfect_native", "perfect TLB opportunity native"),
        ("perfect_tlb_gain_2d_pct", "perfect_2d", None),
    ):
        v, v_text = t1(suite, column)
        if text_claim:
            lo, hi = _range(text_of(text_claim))
        else:
            lo = ref.numbers(text_of("perfect TLB opportunity 2D cpu"))[0]
            hi = ref.numbers(text_of("perfect TLB opportunity 2D server"))[0]
        label = "native" if mk == "perfect_native" else "2D"
        dim = "native" if label == "native" else "2d"
        if additive is None:
            row = f"t1/{mk}/{key}"
            claim = f"Table 1, {name}: perfect-TLB opportunity, {label}"
            explain = (
                f"the opportunity is walk cycles over the rest: {it} {run} at "
                f"{x['cpi_perfect_native']:.2f} cycles per instruction without translation (its "
                "data stalls and base CPI 1.0, not the paper's out-of-order core) and "
                f"{x[f'walk_cycles_{dim}']:.0f} cycles per walk"
            )
        else:
            row = f"t1/{mk}/{key}/interval"
            claim = f"Table 1, {name}: perfect-TLB opportunity, {label}, interval core model"
            explain = (
                f"the interval core stalls {x[f'stall_per_walk_{dim}']:.0f} cycles per "
                f"{label} walk (additive: {additive[f'stall_per_walk_{dim}']:.0f}), and {it} "
                f"{run} at {x['cpi_perfect_native']:.2f} cycles per instruction without "
                f"translation (additive: {additive['cpi_perfect_native']:.2f}): overlapped "
                f"walks and data misses; additive opportunity {additive[mk]:.1f}%"
            )
        c.judge(
            row,
            claim,
            f"{v_text}%",
            x[mk],
            "% speedup",
            near(
                v,
                0.5,
                Band(lo - 0.5, hi + 0.5),
                "§3.1 states whole percents: ±0.5; direction: §3.1's range across suites",
                1,
            ),
            explain,
        )


def suite_claims(
    c: Claims,
    key: str,
    suite: str,
    x: dict[str, float],
    ipr: int | None,
    calibrated: bool,
    about: str = "",
) -> None:
    """Table 1, Figure 6 and Table 4 (and Table 5 for server suites) for one workload set,
    judged against suite ``suite``'s published values; ``about`` says what a workload set that
    is not calibrated is (its programs' misses, footprints and instructions)."""
    name = key if key == suite else f"{key} (vs {suite})"
    _it, its, _run = _subject(key)
    tm, tm_text = t1(suite, "tlb_misses_per_100k_instr")
    col = ref.table("bhargava08_table1")["tlb_misses_per_100k_instr"]
    if calibrated:
        c.definition(
            f"t1/tlb_misses/{key}",
            f"Table 1, {name}: TLB misses per 100K instructions (calibrated input)",
            tm_text,
            x["tlb_misses"],
            "misses / 100K instr",
            f"the proxy's ipr ({ipr}) is solved for Table 1's rate, a property of the suite",
        )
    else:
        c.judge(
            f"t1/tlb_misses/{key}",
            f"Table 1, {name}: TLB misses per 100K instructions",
            tm_text,
            x["tlb_misses"],
            "misses / 100K instr",
            near(
                tm,
                0.05,
                Band(col.min() - 0.05, col.max() + 0.05),
                "Table 1's digit; direction: within the suites' range",
                1,
            ),
            f"the rate is the programs' own, run unchanged: {about}",
        )
    lat, lat_text = t1(suite, "walk_latency_2d_over_native_no_pwc")
    lo, hi = _range(text_of("2D walk latency vs native"))
    c.judge(
        f"t1/walk_latency/{key}",
        f"Table 1, {name}: 2D / native walk latency, no page-walk caching",
        f"{lat_text}×",
        x["walk_latency"],
        "×",
        near(
            lat,
            0.05,
            Band(lo - 0.05, hi + 0.05),
            "§3.1 states it to 0.1×: ±0.05; direction: §3.1's 3.9–4.6 across suites",
            2,
        ),
        f"a 2D walk takes {x['walk_cycles_2d']:.0f} cycles, a native one "
        f"{x['walk_cycles_native']:.0f}: the ratio is set by where {its} page entries "
        "are served (L2 11, L3 40, DRAM 120 cycles), i.e. by its page-entry locality",
    )
    perfect_claims(c, key, suite, name, x)
    _figure6(c, key, suite, name, x)
    r4, d4 = (
        t4(suite, "page_entry_l2_misses_2d_over_native"),
        text_of("page entry L2 misses 2D over native"),
    )
    lo, hi = _range(d4)
    c.judge(
        f"t4/l2miss_ratio/{key}",
        f"Table 4, {name}: page-entry L2 misses, 2D_PWC+NT / native",
        f"{r4:.2f}×",
        x["l2miss_ratio"],
        "×",
        near(
            r4,
            0.05,
            Band(lo - 0.05, hi + 0.05),
            "§6.3 states 0.1×: ±0.05; direction: §6.3's 2.7–5.5 across suites",
            2,
        ),
        f"the ratio counts page-entry references the L2 does not hold; {its} "
        "{G,gL1} and {nL1,gPA} entries (one per data page) decide it, and its native walks "
        "miss the L2 at a rate set by its footprint",
    )
    p4 = t4(suite, "page_entry_l2_miss_pct")
    col4 = ref.table("bhargava08_table4")["page_entry_l2_miss_pct"]
    c.judge(
        f"t4/l2miss_pct/{key}",
        f"Table 4, {name}: page-entry L2 miss rate under 2D_PWC+NT",
        f"{p4:.2f}%",
        x["l2miss_pct"],
        "%",
        near(
            p4,
            0.005,
            Band(col4.min() - 0.005, col4.max() + 0.005),
            "Table 4's digit; direction: within the suites' range",
            3,
        ),
        f"the PWC filters the easy references; the rest miss the L2 as often as {its} "
        "page-table footprint exceeds it (512 KiB L2, shared with data)",
    )
    if suite in SERVER and key == suite:
        for column, mk, text_claim, label in (
            (
                "tlb_miss_reduction_pct",
                "tlb_miss_red",
                "2MB nested pages: fewer TLB misses",
                "TLB misses",
            ),
            (
                "pwc_access_reduction_pct",
                "pwc_acc_red",
                "2MB nested pages: fewer PWC accesses",
                "PWC accesses",
            ),
            (
                "page_entry_l2_miss_reduction_pct",
                "l2miss_red",
                "2MB nested pages: fewer page entry L2 misses",
                "page-entry L2 misses",
            ),
        ):
            v = t5(suite, column)
            lo, hi = _range(text_of(text_claim))
            c.judge(
                f"t5/{mk}/{key}",
                f"Table 5, {name}: 2 MB nested pages remove this share of {label}",
                f"{ref.printed('bhargava08_table5', 'suite', suite, column)}%",
                x[mk],
                "% fewer",
                near(
                    v,
                    0.5,
                    Band(lo - 0.5, hi + 0.5),
                    "§6.5 states whole percents: ±0.5; direction: §6.5's range across suites",
                    1,
                ),
                _WHY_T5[mk],
            )


_WHY_T5 = {
    "tlb_miss_red": "the proxies map 4 KiB guest pages only, so a 2 MiB nested page cannot "
    "widen a TLB entry (an entry holds the smaller of the two sizes); the paper's server guests "
    "used large pages (JVM heaps, database buffer pools, the kernel's direct map), which the "
    "proxies leave out",
    "pwc_acc_red": "with 2 MiB nested pages every nested walk loses its nL1 reference; the share "
    "of PWC accesses that removes depends on how many nested walks the NTLB already skipped",
    "l2miss_red": "2 MiB nested pages remove the {nL1,*} references, the ones that miss the L2 "
    "most; what remains is the guest's {G,gL1} and {G,gL2} entries",
}


def _figure6(c: Claims, key: str, suite: str, name: str, x: dict[str, float]) -> None:
    it, its, run = _subject(key)
    """Figure 6's speedups over no page-walk caching, and native's."""
    text = ref.claim("bhargava08_claims", "guest speedup of 2D_PWC over no caching")
    lo, hi = _range(text)
    named = {"WebServer": lo, "JavaServer": hi}
    if suite in named:
        crit = near(
            named[suite],
            0.5,
            Band(lo - 0.5, hi + 0.5),
            "§6.1 names this suite's "
            "speedup in whole percents: ±0.5; direction: the range across suites",
            1,
        )
    else:
        crit = within(lo, hi, 0.5, above(0.0), "§6.1's range across suites, ±0.5", 1)
    c.judge(
        f"f6/pwc_speedup/{key}",
        f"Figure 6, {name}: 2D_PWC speedup over no page-walk caching",
        text,
        x["pwc_speedup"],
        "% speedup",
        crit,
        f"the 2D PWC turns the 16 upper-level references into 2-cycle hits; the gain is bounded "
        f"by the share of {its} time in walks (perfect-TLB opportunity "
        f"{x['perfect_2d']:.0f}%)",
    )
    text = ref.claim("bhargava08_claims", "further gain of 2D_PWC+NT over 2D_PWC")
    vals = ref.numbers(text)
    named_nt = {"WebServer": vals[0], "JavaServer": vals[1], "MiscServer": vals[2]}
    lo, hi = min(vals), max(vals)
    if suite in named_nt:
        crit = near(
            named_nt[suite],
            0.05,
            Band(lo - 0.05, hi + 0.05),
            "§6.1 names this suite's gain to 0.1%: ±0.05; direction: the range across suites",
            2,
        )
    else:
        crit = within(lo, hi, 0.05, above(0.0), "§6.1's range across suites, ±0.05", 2)
    c.judge(
        f"f6/nt_gain/{key}",
        f"Figure 6, {name}: further gain of 2D_PWC+NT over 2D_PWC",
        text,
        x["nt_gain"],
        "% speedup",
        crit,
        "the NTLB skips nested walks whose references were mostly 2-cycle PWC hits already; "
        f"the gain is the few PWC misses it also skips, fewer in {it} than in "
        "the paper's commercial suites (instruction-side misses, larger guest page tables)",
    )
    for mk, claim_name, label in (
        ("native_vs_none", "native advantage over no caching", "native over no caching"),
        ("native_vs_2dnt", "native advantage over 2D_PWC+NT", "native over 2D_PWC+NT"),
    ):
        text = ref.claim("bhargava08_claims", claim_name)
        lo, hi = _range(text)
        c.judge(
            f"f6/{mk}/{key}",
            f"Figure 6, {name}: {label}",
            text,
            x[mk],
            "% faster",
            within(lo, hi, 0.5, above(0.0), "§6.1's range across suites, ±0.5", 1),
            "native walks need 4 references, 2D walks up to 24: the gap grows with "
            f"{its} TLB miss rate ({x['tlb_misses']:.0f} per 100K instructions) and with the "
            "page-entry misses in the L2",
        )
    text = text_of("2D_PWC+NT over no caching")
    lo, hi = _range(text)
    c.judge(
        f"f6/2dnt_vs_none/{key}",
        f"Figure 6, {name}: 2D_PWC+NT speedup over no page-walk caching",
        text,
        x["2dnt_vs_none"],
        "% speedup",
        within(lo, hi, 0.5, above(0.0), "§6.3's range across suites, ±0.5", 1),
        "as for 2D_PWC: bounded by the share of time in walks",
    )
    text = ref.claim("bhargava08_claims", "2D_PWC+NT with 2MB nested pages vs native")
    lo, hi = ref.numbers(text)[2:4]
    c.judge(
        f"f6/np2m_of_native/{key}",
        f"Figure 6, {name}: 2D_PWC+NT with 2 MB nested pages, % of native performance",
        text,
        x["np2m_of_native"],
        "% of native",
        within(
            lo,
            hi,
            0.5,
            Band(x["np4k_of_native"], 100.0, lo_open=True),
            "§6.1's range across suites, ±0.5; direction: nearer native than with 4 KB nested "
            "pages",
            1,
        ),
        f"with 4 KiB nested pages {it} {run} at {x['np4k_of_native']:.1f}% of native; 2 MiB "
        "nested pages shorten each nested walk by one reference, but the guest's own "
        "references ({G,gL1}, {G,gL2}) still miss",
    )
    text = text_of("share of native speedup delivered by page walk caching")
    lo, hi = _range(text)
    c.judge(
        f"f6/share_of_native/{key}",
        f"Figure 6, {name}: share of native's speedup 2D_PWC+NT delivers",
        text,
        x["share_of_native"],
        "%",
        within(
            lo,
            hi,
            0.5,
            Band(0.0, 100.0, lo_open=True, hi_open=True),
            "§6.1's range, ±0.5; direction: some, not all",
            1,
        ),
        "what the caches recover of the 2D overhead depends on how much of it is {G,gL1} and "
        "{nL1,gPA} references, which no PWC holds",
    )


def across_suites(c: Claims, per: Mapping[str, dict[str, float]]) -> None:
    text = text_of("2D_PWC+NT with 2MB nested pages over 2D_PWC+NT")
    top = ref.numbers(text)[0]
    best = max(per, key=lambda s: per[s]["np2m_over_2dnt"])
    v = per[best]["np2m_over_2dnt"]
    c.judge(
        "f6/np2m_over_2dnt/max",
        "Figure 6: largest gain of 2 MB nested pages over 2D_PWC+NT, across suites",
        text,
        v,
        "% speedup",
        near(top, 0.5, above(0.0), "§6.1's 'up to 21%' in whole percents: ±0.5", 1),
        f"on {best}: the proxies keep 4 KiB guest pages, so 2 MiB nested pages only shorten "
        "walks and never widen TLB entries",
        ", ".join(f"{s} {per[s]['np2m_over_2dnt']:.1f}%" for s in per),
    )


def figure7(c: Claims, m: Mapping[str, Measured]) -> None:
    a, b = m["MiscServer/nested/2d"].full, m["MiscServer/nested/2d+nt"].full
    text = ref.claim("bhargava08_claims", "2D_PWC+NT accesses vs 2D_PWC")
    total = 100.0 * (1 - (pwc_accesses(b) + ntlb_accesses(b)) / pwc_accesses(a))
    misses = 100.0 * (1 - b["walk_caches"]["pwc"]["misses"] / a["walk_caches"]["pwc"]["misses"])
    pwc = 100.0 * (1 - pwc_accesses(b) / pwc_accesses(a))
    pwc_text = text_of("2D_PWC+NT PWC accesses vs 2D_PWC")
    for key, claim, paper_text, v, target, explain in (
        (
            "f7/accesses",
            "Figure 7, MiscServer: 2D_PWC+NT's PWC + NTLB accesses, fewer than 2D_PWC's PWC "
            "accesses",
            text,
            total,
            ref.numbers(text)[0],
            "one NTLB hit replaces four nested PWC lookups, but every walk also pays an NTLB "
            "lookup per guest row",
        ),
        (
            "f7/pwc_accesses",
            "Figure 7, MiscServer: PWC accesses, 2D_PWC+NT vs 2D_PWC",
            pwc_text,
            pwc,
            ref.numbers(pwc_text)[0],
            "the NTLB skips the nested rows of gL4–gL1; the gPA row and the G column are never "
            "skipped",
        ),
        (
            "f7/pwc_misses",
            "Figure 7, MiscServer: PWC misses, 2D_PWC+NT vs 2D_PWC",
            text,
            misses,
            ref.numbers(text)[1],
            "the skipped references were mostly hits; the misses that remain are {nL1,gPA} "
            "and {G,gL2}, which the NTLB cannot skip",
        ),
    ):
        c.judge(
            key,
            claim,
            paper_text,
            v,
            "% fewer",
            near(target, 0.5, above(0.0), "§6.2 in whole percents: ±0.5; direction: fewer", 1),
            explain,
        )


#: The Figure 8 cells §6.2 says hit in the PWC "for less than half of the accesses".
F8_LESS_THAN_HALF = ("G,gL2", "nL2,gPA")


def figure8(c: Claims, m: Mapping[str, Measured]) -> None:
    r = m["MiscServer/nested/2d+nt"].full
    c.definition(
        "f8/G_gL1_hits",
        "Figure 8: {G,gL1} PWC hit rate",
        text_of("{G gL1} PWC hit rate"),
        pwc_hit_pct(r, "G,gL1"),
        "% hits",
        "the PWC does not hold {G,gL1} entries (pwc.cache_g_l1 = false, seed 002 §4.2)",
    )
    text = ref.claim("bhargava08_claims", "{nL1 gPA} PWC hit rate")
    per_mille = ref.numbers(text)[0]
    hit = pwc_hit_pct(r, "nL1,gPA")
    c.judge(
        "f8/nL1_gPA_hits",
        "Figure 8, MiscServer under 2D_PWC+NT: {nL1,gPA} PWC hit rate",
        f"{text} ({per_mille / 10:.1f}%)",
        hit,
        "% hits",
        near(
            per_mille / 10,
            0.05,
            below(50.0),
            "§6.2 'roughly seven out of 1,000', in whole accesses per 1,000: ±0.5‰; direction: "
            "under half, the rate below which §6.2 doubts an entry is worth caching",
            digits=2,
        ),
        "a {nL1,gPA} entry maps the data page itself: it hits only when the proxy returns "
        "to a data page whose entry is still among the PWC's 24; the proxy's Zipf skew over "
        "its 4 GiB decides how often that is, and the paper's suites reused data pages "
        "differently",
    )
    half = text_of("{G gL2} and {nL2 gPA} PWC hit rate")
    for cell in F8_LESS_THAN_HALF:
        col, row = cell.split(",")
        space = "guest-virtual" if col == "G" else "guest-physical"
        c.judge(
            f"f8/{col}_{row}_hits",
            f"Figure 8, MiscServer under 2D_PWC+NT: {{{cell}}} PWC hit rate",
            half,
            pwc_hit_pct(r, cell),
            "% hits",
            holds(below(50.0), "§6.2 states the bound only", digits=1),
            f"each {{{cell}}} entry covers 2 MiB of {space}"
            " memory; how often one is still among the PWC's 24 is set by how the proxy's "
            "skewed lookups spread over its 2 MiB regions, more concentrated here than in the "
            "paper's suites",
        )
    gain_text = text_of("not caching {nL1 gPA}")
    gain = 100.0 * (m["MiscServer/nested/2d+nt"].cycles / m["fig8/no_nl1_gpa"].cycles - 1)
    c.judge(
        "f8/no_nl1_gpa",
        "§6.2, MiscServer: speedup of 2D_PWC+NT when {nL1,gPA} entries are not cached",
        gain_text,
        gain,
        "% speedup",
        near(
            ref.numbers(gain_text)[0],
            0.05,
            above(0.0),
            "§6.2 to 0.1%: ±0.05; direction: a gain",
            digits=2,
        ),
        f"with {hit:.2f}% of {{nL1,gPA}} lookups hitting, the entries evict others from the "
        "24-entry PWC; how much the other cells gain from the freed entries depends on how "
        "many distinct upper-level entries the proxy's walks need",
    )
    c.not_simulated(
        "f3/unique_entries",
        "Figure 3: share of unique page entries at {nL1,gPA} and {G,gL1}",
        ref.claim("bhargava08_claims", "share of unique page entries at {nL1 gPA} and {G gL1}"),
        "vmmu counts references per {column,row}, not distinct entries; needed: a count of "
        "distinct page-entry addresses per {column,row} (a set per cell, off the hot path)",
    )


def figure9(c: Claims, m: Mapping[str, Measured], ctx: Context, web: bool) -> None:
    base = float(m["MiscServer/nested/2d+nt"].cycles)
    ntlb16 = 100.0 * (m["MiscServer/nested/2d"].cycles / base - 1)
    text = ref.claim("bhargava08_claims", "NTLB 16 entries gain on MiscServer")
    c.judge(
        "f9/ntlb16",
        "Figure 9, MiscServer: the first 16 NTLB entries (2D_PWC+NT over 2D_PWC)",
        text,
        ntlb16,
        "% speedup",
        near(ref.numbers(text)[0], 0.5, above(0.0), "§6.4 in whole percents: ±0.5", 1),
        "as Figure 6's NTLB gain: most of what the NTLB skips was a PWC hit already",
    )
    text = ref.claim("bhargava08_claims", "L2 DTLB 8096 entries vs PWC 8096 entries (MiscServer)")
    dtlb_paper, pwc_paper = ref.numbers(text)[0], ref.numbers(text)[1]
    g_pwc = figure9_gain(m, "fig9/pwc8096/ntlb16")
    g_dtlb = figure9_gain(m, "fig9/dtlb8096")
    c.judge(
        "f9/pwc8096",
        "Figure 9, MiscServer: an 8096-entry PWC over the 24-entry baseline",
        text,
        g_pwc,
        "% speedup",
        near(pwc_paper, 0.05, above(0.0), "§6.4 to 0.1%: ±0.05", 2),
        "a PWC that holds every upper-level entry still misses {G,gL1} (never cached) and the "
        "{nL1,gPA} entries of the proxy's 4 GiB, one per data page",
    )
    c.judge(
        "f9/dtlb8096",
        "§6.4, MiscServer: an 8096-entry L2 DTLB over the baseline",
        text,
        g_dtlb,
        "% speedup",
        near(dtlb_paper, 0.05, above(0.0), "§6.4 to 0.1%: ±0.05", 2),
        "8096 TLB entries cover 32 MiB of the proxy's 4 GiB: its Zipf tail still misses",
    )
    c.judge(
        "f9/tlb_beats_pwc",
        "§6.4, MiscServer: TLB entries buy more than PWC entries (8096 each)",
        text,
        g_dtlb - g_pwc,
        "% points",
        holds(above(0.0), "the paper states the direction (11.3% > 8.5%)", 2),
        "an 8096-entry PWC removes most upper-level and nested misses of every remaining "
        "walk, while 8096 more TLB entries (32 MiB of reach) remove only the walks to the "
        "proxy's hottest pages; the paper's suites had more reuse within that reach "
        "(instruction side, kernel, stacks) than a Zipf lookup over 4 GiB",
    )
    if web:
        webserver(c, m, ctx)


def webserver(c: Claims, m: Mapping[str, Measured], ctx: Context) -> None:
    """§6.4's bound on WebServer's gain from the largest PWC and NTLB."""
    big = max(n for _, _, n, _ in setup.figure9_configs(ctx))
    web_base = float(m["WebServer/nested/2d+nt"].cycles)
    g_web = 100.0 * (web_base / m["fig9/web/pwc8096g"].cycles - 1)
    g_misc = figure9_gain(m, f"fig9/pwc8096g/ntlb{big}")
    text = text_of("WebServer gain from larger PWC and NTLB")
    c.judge(
        "f9/webserver",
        f"§6.4, WebServer: the largest configuration (8096-entry PWC with {{G,gL1}}, {big}-entry "
        "NTLB) gains at most 4%",
        text,
        g_web,
        "% speedup",
        Criterion(
            Band(-math.inf, 4.5),
            below(g_misc),
            "'no greater than 4%' in whole percents: ≤ 4.5; direction: less than MiscServer's gain",
            1,
        ),
        f"MiscServer gains {g_misc:.1f}% from the same configuration; the WebServer proxy's "
        "Zipf-1.0 file set over 2 GiB has as many distinct leaf entries per walk",
    )
