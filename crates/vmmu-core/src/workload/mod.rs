//! Seeded synthetic workload generators, written `NAME[:k=v,k=v...]` (DESIGN.md "Workloads").
//!
//! Each generator imitates the memory behaviour of a workload the papers measure — streaming
//! (STREAM, 171.swim's sweeps), strided, uniform random (GUPS), pointer chasing (Zipf or
//! hot/cold, 429.mcf-like) and phase-changing mixes (403.gcc, 164.gzip) — reduced to what address
//! translation sees: which pages are touched, in what order, how often, read or written.
//! It does not model data values, dependences or timing between references; `ipr` stands in for
//! the instructions between them.
//!
//! Every generator emits the same layout (docs/workloads.md):
//! 1. `ProcessCreate { pid: 1 }`;
//! 2. `Mmap { start: base, len: footprint rounded up to 4 KiB, prot: RW, flags }`, an anonymous
//!    private region, with [`MapFlags::HUGE`] (`MAP_HUGETLB`) when `huge=1` and
//!    [`MapFlags::POPULATE`] when `prefault=1`; with `thp=hugepage` or `thp=nohugepage`, a
//!    `Madvise` of the whole region follows it;
//! 3. `refs` references (`phases` adds a `Phase` marker before each period), each 8 bytes,
//!    8-byte aligned, inside `[base, base + footprint)`, a load or a store by `write_ratio`,
//!    carrying `ipr` instructions.
//!
//! The same specification (seed included) gives a bit-identical stream (Law 7); references
//! cost a few nanoseconds each (a tight loop per batch, Xoshiro256++, no allocation).
//!
//! [`MapFlags::HUGE`]: crate::event::MapFlags::HUGE
//! [`MapFlags::POPULATE`]: crate::event::MapFlags::POPULATE

mod dist;
mod generators;
mod papers;
mod pattern;
mod source;
mod spec;

use crate::addr::Gva;
use crate::error::Result;
use crate::event::{Advice, Event, EventSource, MapFlags, Prot};
use generators::{GenDef, COMMON, GENERATORS, PHASES_DESCRIPTION, PHASES_OWN, REGION_ONLY};
use serde::Serialize;
use source::{Part, Synthetic};
use spec::{workload_error, Spec, Values};

/// Where a generator's region starts by default (its `base`): 64 GiB, aligned to 1 GiB so that
/// the region's upper page-table levels and large-page alignment do not depend on the
/// footprint.
pub const BASE: u64 = 0x10_0000_0000;

/// The top of the user half of a 4-level address space: a generator's region ends at or below it.
pub const USER_TOP: u64 = 1 << 47;

/// One generator, as `vmmu workloads` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct GeneratorInfo {
    /// The name used in a specification (`random`).
    pub name: &'static str,
    /// What it generates and which workload it imitates.
    pub description: &'static str,
    /// Every parameter it accepts, common ones first.
    pub params: Vec<ParamInfo>,
}

/// One parameter of a generator.
#[derive(Clone, Debug, Serialize)]
pub struct ParamInfo {
    /// The key in `k=v`.
    pub name: &'static str,
    /// The value used when the key is absent, as it would be written.
    pub default: String,
    /// Meaning and unit.
    pub description: &'static str,
}

/// Every generator with its parameters and defaults.
pub fn catalog() -> Vec<GeneratorInfo> {
    let info = |d: &spec::ParamDef| ParamInfo {
        name: d.name,
        default: d.default.to_string(),
        description: d.description,
    };
    let mut list: Vec<GeneratorInfo> = GENERATORS
        .iter()
        .map(|g| GeneratorInfo {
            name: g.name,
            description: g.description,
            params: generators::params_of(g).iter().map(info).collect(),
        })
        .collect();
    list.push(GeneratorInfo {
        name: "phases",
        description: PHASES_DESCRIPTION,
        params: COMMON.iter().chain(PHASES_OWN).map(info).collect(),
    });
    list.extend(papers::catalog());
    list
}

/// Opens a generator from a specification such as `random:footprint=1G,refs=1M`.
///
/// Errors ([`crate::Error::Workload`], naming the specification and the parameter): an unknown
/// generator (the message lists the known ones), an unknown parameter (lists the generator's),
/// a value that does not parse (says what was expected), a footprint below 8 bytes or beyond
/// the user half of the address space, a `write_ratio` outside [0, 1].
pub fn open(spec: &str) -> Result<Box<dyn EventSource>> {
    let parsed = Spec::parse(spec)?;
    let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    if parsed.name == "phases" {
        return open_phases(&parsed);
    }
    if let Some(r) = papers::open(&parsed) {
        return r;
    }
    let Some(g) = generators::find(parsed.name) else {
        return Err(unknown_generator(spec, parsed.name));
    };
    let v = Values::new(
        spec,
        g.name,
        "",
        generators::params_of(g),
        owned(&parsed.pairs),
    )?;
    let base = generators::base(&v)?;
    let footprint = generators::footprint(&v, base)?;
    let refs = v.count("refs")?;
    let mut gen = generators::ref_gen(&v, v.integer("seed")?)?;
    let pattern = generators::pattern(g, &v, footprint, &mut gen)?;
    let preamble = preamble(base, footprint, &v)?;
    let parts = vec![Part { pattern, gen }];
    Ok(Box::new(Synthetic::new(
        spec, base, preamble, parts, refs, None,
    )))
}

fn unknown_generator(spec: &str, name: &str) -> crate::Error {
    let known: Vec<&str> = catalog().iter().map(|g| g.name).collect();
    workload_error(
        spec,
        format!(
            "unknown generator `{name}`; {}known generators: {}",
            crate::error::did_you_mean(name, known.iter().copied()),
            known.join(", ")
        ),
    )
}

/// `ProcessCreate { pid: 1 }`, the `Mmap` of the region at `base` (`huge`, `prefault`), and
/// the `Madvise` of `thp` when it asks for one.
fn preamble(base: u64, footprint: u64, v: &Values) -> Result<Vec<Event>> {
    let mut flags = 0;
    if v.flag("huge")? {
        flags |= MapFlags::HUGE;
    }
    if v.flag("prefault")? {
        flags |= MapFlags::POPULATE;
    }
    let len = footprint.div_ceil(4096) * 4096;
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        Event::mmap(Gva::new(base), len, Prot::RW, MapFlags(flags)),
    ];
    let advice = match v.choice("thp", &["none", "hugepage", "nohugepage"])? {
        "hugepage" => Some(Advice::HUGEPAGE),
        "nohugepage" => Some(Advice::NOHUGEPAGE),
        _ => None,
    };
    if let Some(a) = advice {
        ev.push(Event::madvise(Gva::new(base), len, Advice(a)));
    }
    Ok(ev)
}

/// `phases:a=GEN,b=GEN[,c=GEN,d=GEN],period=N[,X.param=v...]`.
fn open_phases(parsed: &Spec) -> Result<Box<dyn EventSource>> {
    let spec = parsed.text;
    let (prefixed, top): (Vec<_>, Vec<_>) = parsed.pairs.iter().partition(|(k, _)| k.contains('.'));
    let top: Vec<(String, String)> = top
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let defs: Vec<_> = COMMON.iter().chain(PHASES_OWN).copied().collect();
    let v = Values::new(spec, "phases", "", defs, top.clone())?;
    let base = generators::base(&v)?;
    let period = v.count("period")?;
    if period == 0 {
        return Err(v.error(
            "period",
            "expected at least 1 reference per phase, found `0`",
        ));
    }
    let refs = v.count("refs")?;
    if refs.div_ceil(period) > u32::MAX as u64 {
        return Err(v.error(
            "period",
            "too short: more than 2^32 phases (phase ids are 32-bit)",
        ));
    }
    let seed = v.integer("seed")?;

    // The active phases, in order a, b, c, d (those set to `none` left out).
    let mut phases: Vec<(&'static str, &'static GenDef)> = Vec::new();
    for letter in ["a", "b", "c", "d"] {
        let name = v.raw(letter);
        if name == "none" && letter != "a" {
            continue;
        }
        match generators::find(name) {
            Some(g) => phases.push((letter, g)),
            None => {
                return Err(v.error(
                    letter,
                    format!(
                        "unknown generator `{name}`; {}a phase is one of {}{}",
                        crate::error::did_you_mean(name, GENERATORS.iter().map(|g| g.name)),
                        GENERATORS
                            .iter()
                            .map(|g| g.name)
                            .collect::<Vec<_>>()
                            .join(", "),
                        if letter == "a" { "" } else { ", or none" }
                    ),
                ))
            }
        }
    }
    for (k, _) in &prefixed {
        let letter = k.split_once('.').map_or("", |(l, _)| l);
        if !phases.iter().any(|(l, _)| *l == letter) {
            let active: Vec<&str> = phases.iter().map(|(l, _)| *l).collect();
            return Err(workload_error(
                spec,
                format!(
                    "parameter `{k}` names no phase; the phases are {}",
                    active.join(", ")
                ),
            ));
        }
    }

    let mut parts = Vec::new();
    let mut region = 0u64;
    for (index, (letter, g)) in phases.iter().enumerate() {
        // What applies to this phase: the shared per-reference parameters given at the top,
        // then its own prefixed ones (which win).
        let mut given: Vec<(String, String)> = top
            .iter()
            .filter(|(k, _)| ["footprint", "ipr", "write_ratio"].contains(&k.as_str()))
            .cloned()
            .collect();
        for (k, val) in &prefixed {
            let Some((l, key)) = k.split_once('.') else {
                continue;
            };
            if l != *letter {
                continue;
            }
            if REGION_ONLY.contains(&key) {
                return Err(workload_error(
                    spec,
                    format!("parameter `{k}`: `{key}` belongs to the whole workload; write it without the `{letter}.` prefix"),
                ));
            }
            given.retain(|(gk, _)| gk != key);
            given.push((key.to_string(), val.to_string()));
        }
        let prefix = format!("{letter}.");
        let pv = Values::new(spec, g.name, &prefix, generators::params_of(g), given)?;
        let footprint = generators::footprint(&pv, base)?;
        region = region.max(footprint);
        let phase_seed = seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut gen = generators::ref_gen(&pv, phase_seed)?;
        let pattern = generators::pattern(g, &pv, footprint, &mut gen)?;
        parts.push(Part { pattern, gen });
    }
    let preamble = preamble(base, region, &v)?;
    Ok(Box::new(Synthetic::new(
        spec,
        base,
        preamble,
        parts,
        refs,
        Some(period),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_lists_every_generator_with_its_defaults() {
        let cat = catalog();
        let names: Vec<&str> = cat.iter().map(|g| g.name).collect();
        assert_eq!(
            names[..5],
            ["stream", "stride", "random", "pointer-chase", "phases"]
        );
        let chase = &cat[3];
        let wr = chase
            .params
            .iter()
            .find(|p| p.name == "write_ratio")
            .unwrap();
        assert_eq!(wr.default, "0");
        // Every default parses: opening each generator with no parameters works.
        for g in &cat {
            open(g.name).unwrap_or_else(|e| panic!("{}: {e}", g.name));
        }
    }
}
