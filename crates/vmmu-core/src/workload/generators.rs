//! The generator table: each generator's name, description and parameters, and how its
//! parameters become an address [`Pattern`].
//!
//! One table feeds the parser, the defaults and `vmmu workloads`, so they cannot disagree.

use super::dist::{Scatter, Zipf};
use super::pattern::{Pattern, RefGen, REF_SIZE};
use super::spec::{ParamDef, Values};
use super::USER_TOP;
use crate::error::Result;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// One generator of the catalog.
pub(crate) struct GenDef {
    pub name: &'static str,
    pub description: &'static str,
    /// Common parameters whose default differs for this generator.
    pub overrides: &'static [(&'static str, &'static str)],
    /// The generator's own parameters.
    pub own: &'static [ParamDef],
}

const fn p(name: &'static str, default: &'static str, description: &'static str) -> ParamDef {
    ParamDef {
        name,
        default,
        description,
    }
}

/// Parameters every generator accepts.
pub(crate) const COMMON: &[ParamDef] = &[
    p("footprint", "64M", "bytes of the one anonymous region every reference falls in (binary multiples: 64M = 64 MiB); mapped at `base`, length rounded up to 4 KiB"),
    p("base", "64G", "where the region is mapped (binary multiples: 64G = 0x10_0000_0000, 1 GiB aligned so large pages fit; 32-bit and PAE guests need base + footprint within 4G, e.g. base=1G)"),
    p("refs", "1M", "number of memory references (decimal multiples: 1M = 10^6)"),
    p("ipr", "3", "instructions per reference: each reference retires this many instructions (its own included)"),
    p("write_ratio", "0.3", "fraction of references that are stores (the rest are loads), drawn per reference"),
    p("seed", "1", "seed of the generator's random numbers (Xoshiro256++); same spec and seed, same stream"),
    p("prefault", "0", "1: the mmap carries MAP_POPULATE, so the whole footprint is mapped before the first reference"),
    p("huge", "0", "1: the mmap carries MAP_HUGETLB (MapFlags::HUGE): hugetlbfs pages where guest.hugetlb_pages holds them, else an ordinary mapping; under guest.page_size = 2M or mixed, large pages as every region gets"),
    p("thp", "none", "hugepage or nohugepage: an madvise(MADV_HUGEPAGE / MADV_NOHUGEPAGE) of the whole region follows the mmap, so guest.thp = madvise gives it transparent huge pages (or always does not); none: no madvise"),
];

/// Common parameters that belong to the region, not to one phase of `phases`.
pub(crate) const REGION_ONLY: &[&str] = &["refs", "seed", "prefault", "huge", "thp", "base"];

/// The pattern generators (everything but `phases`).
pub(crate) const GENERATORS: &[GenDef] = &[
    GenDef {
        name: "stream",
        description: "sequential sweep through the footprint, wrapping around (STREAM, 171.swim's array sweeps): consecutive references share a page, one new page every 4 KiB / elem references",
        overrides: &[],
        own: &[
            p("elem", "8", "bytes between consecutive elements of an array (a positive multiple of 8)"),
            p("arrays", "1", "arrays swept in lockstep (the footprint split into this many equal arrays; a[i], b[i], c[i], a[i+1]...)"),
        ],
    },
    GenDef {
        name: "stride",
        description: "fixed-stride walk: reference i is at BASE + (i × stride) mod footprint (a page stride misses the TLB on every reference until the footprint fits its reach)",
        overrides: &[],
        own: &[p("stride", "4096", "bytes between consecutive references (a positive multiple of 8)")],
    },
    GenDef {
        name: "random",
        description: "uniform random 8-byte-aligned references over the footprint (GUPS / HPCC RandomAccess, the TLB-hostile 171.swim-like end of seed 002's workloads)",
        overrides: &[],
        own: &[],
    },
    GenDef {
        name: "pointer-chase",
        description: "dependent loads of nodes drawn from a skewed popularity (Zipf or hot/cold): linked lists, trees and hash tables of 429.mcf, databases, key-value stores",
        overrides: &[("write_ratio", "0")],
        own: &[
            p("dist", "zipf", "node popularity: `zipf` (rank k drawn ∝ k^-alpha) or `hotcold` (hot_prob of the references go to hot_fraction of the nodes)"),
            p("alpha", "0.99", "Zipf exponent (≥ 0; 0 is uniform, 0.99 is YCSB's default)"),
            p("hot_fraction", "0.1", "hotcold: fraction of the nodes that are hot (0..1]"),
            p("hot_prob", "0.9", "hotcold: probability that a reference goes to a hot node [0..1]"),
            p("node", "64", "bytes per node (a positive multiple of 8); each reference loads a node's first 8 bytes"),
            p("scatter", "1", "1: popular nodes are spread over the footprint by a seeded permutation (a fragmented heap); 0: node of rank k is the k-th node (hot data packed at the start)"),
            p("chains", "1", "chases interleaved (1..=255): each reference's address is the value loaded `chains` references before it, so 1 is one chase whose every load waits for the previous one and k are k chases whose loads overlap"),
        ],
    },
];

/// The `phases` generator's own parameters.
pub(crate) const PHASES_OWN: &[ParamDef] = &[
    p(
        "a",
        "random",
        "generator of phase a (any generator but phases)",
    ),
    p("b", "stream", "generator of phase b"),
    p("c", "none", "generator of phase c, or none"),
    p("d", "none", "generator of phase d, or none"),
    p(
        "period",
        "100K",
        "references per phase before switching to the next (a, b, c, d, a, ...)",
    ),
];

/// Description of `phases`.
pub(crate) const PHASES_DESCRIPTION: &str = "alternates generators every `period` references (the phase changes of 403.gcc and 164.gzip), emitting a Phase marker (id = 0, 1, 2... per period) at each switch; a phase's own parameters are written with its letter: `phases:a=random,b=stride,b.stride=64,a.footprint=1G`; footprint, ipr and write_ratio apply to every phase unless overridden that way; the region is as large as the largest phase footprint";

/// The declared parameters of `g`: the common ones (with `g`'s defaults) then its own.
pub(crate) fn params_of(g: &GenDef) -> Vec<ParamDef> {
    let mut defs: Vec<ParamDef> = COMMON
        .iter()
        .map(|d| match g.overrides.iter().find(|(n, _)| *n == d.name) {
            Some((_, default)) => ParamDef { default, ..*d },
            None => *d,
        })
        .collect();
    defs.extend_from_slice(g.own);
    defs
}

/// The generator named `name`, if any.
pub(crate) fn find(name: &str) -> Option<&'static GenDef> {
    GENERATORS.iter().find(|g| g.name == name)
}

/// The region's base, checked: 4 KiB aligned and inside the 47-bit user half.
pub(crate) fn base(v: &Values) -> Result<u64> {
    let b = v.bytes("base")?;
    if b % 4096 != 0 || b >= USER_TOP {
        return Err(v.error(
            "base",
            format!(
                "`{}` must be a multiple of 4K below 2^47 (the user half of a 4-level address \
                 space)",
                v.raw("base")
            ),
        ));
    }
    Ok(b)
}

/// The footprint parameter, checked: at least one 8-byte reference, and the region
/// `[base, base + footprint rounded up to 4 KiB)` within the 47-bit user half.
pub(crate) fn footprint(v: &Values, base: u64) -> Result<u64> {
    let f = v.bytes("footprint")?;
    if f < REF_SIZE {
        return Err(v.error(
            "footprint",
            format!(
                "must be at least {REF_SIZE} bytes (one reference), found `{}`",
                v.raw("footprint")
            ),
        ));
    }
    let room = USER_TOP - base;
    if f > room {
        return Err(v.error(
            "footprint",
            format!(
                "`{}` does not fit in the 47-bit user address space above base {base:#x}: at \
                 most {room} bytes",
                v.raw("footprint")
            ),
        ));
    }
    Ok(f)
}

/// The reference maker of a generator (its RNG seeded with `seed`).
pub(crate) fn ref_gen(v: &Values, seed: u64) -> Result<RefGen> {
    Ok(RefGen::new(
        Xoshiro256PlusPlus::seed_from_u64(seed),
        v.count_u32("ipr")?,
        v.ratio("write_ratio")?,
    ))
}

/// The address pattern of generator `g` with resolved values `v`; `footprint` is checked.
pub(crate) fn pattern(g: &GenDef, v: &Values, footprint: u64, rng: &mut RefGen) -> Result<Pattern> {
    let span = footprint - footprint % REF_SIZE;
    match g.name {
        "stream" => {
            let elem = v.multiple_of_8("elem")?;
            let arrays = v.count("arrays")?;
            if arrays == 0 {
                return Err(v.error("arrays", "expected at least 1 array, found `0`"));
            }
            let array_len = (footprint / arrays) & !(REF_SIZE - 1);
            if array_len == 0 {
                return Err(v.error(
                    "arrays",
                    format!("{arrays} arrays leave less than {REF_SIZE} bytes each in a footprint of {footprint} bytes"),
                ));
            }
            Ok(Pattern::sweep(array_len, arrays, elem))
        }
        "stride" => Ok(Pattern::sweep(span, 1, v.multiple_of_8("stride")?)),
        "random" => Ok(Pattern::Random {
            slots: span / REF_SIZE,
        }),
        "pointer-chase" => chase(v, footprint, rng),
        other => unreachable!("generator `{other}` has no pattern"),
    }
}

fn chase(v: &Values, footprint: u64, g: &mut RefGen) -> Result<Pattern> {
    let node_bytes = v.multiple_of_8("node")?;
    if node_bytes > footprint {
        return Err(v.error(
            "node",
            format!(
                "a node of {node_bytes} bytes does not fit in the footprint of {footprint} bytes"
            ),
        ));
    }
    let nodes = footprint / node_bytes;
    let scatter = if v.flag("scatter")? {
        Some(Scatter::new(nodes, &mut g.rng))
    } else {
        None
    };
    // Every parameter is checked, whichever distribution uses it, so a typo never hides.
    let dist = v.choice("dist", &["zipf", "hotcold"])?;
    let alpha = v.float("alpha")?;
    let frac = v.ratio("hot_fraction")?;
    if frac == 0.0 {
        return Err(v.error("hot_fraction", "expected a fraction in (0, 1], found `0`"));
    }
    let hot_prob = v.ratio("hot_prob")?;
    let chains = v.count("chains")?;
    g.dep = u8::try_from(chains)
        .ok()
        .filter(|&k| k > 0)
        .ok_or_else(|| {
            v.error(
                "chains",
                format!(
                    "expected 1..=255 interleaved chases, found `{}`",
                    v.raw("chains")
                ),
            )
        })?;
    if dist == "zipf" {
        return Ok(Pattern::Zipf {
            zipf: Zipf::new(nodes, alpha),
            node_bytes,
            scatter,
        });
    }
    let hot = ((frac * nodes as f64).ceil() as u64).clamp(1, nodes);
    let hot_threshold = if hot_prob >= 1.0 {
        u64::MAX
    } else {
        (hot_prob * 18_446_744_073_709_551_616.0) as u64
    };
    Ok(Pattern::HotCold {
        nodes,
        hot,
        hot_threshold,
        node_bytes,
        scatter,
    })
}
