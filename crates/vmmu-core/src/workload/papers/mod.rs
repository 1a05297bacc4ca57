//! Workloads named after the benchmarks the papers measure (seed 000's MemoryMotion and Aim9
//! memory tests, seed 004's kernel microbenchmarks and Apache compile, seed 001's 171.swim,
//! 434.zeusmp, 403.gcc and 164.gzip, the insensitive 301.apsi, 191.fma3d and 186.crafty, and
//! `mixed-phases` for adaptive paging), written `NAME[:k=v,...]` like the pattern generators.
//!
//! Where a pattern generator is one process touching one region, these are *programs*: they
//! create processes, fork, exec, exit and switch between them, map text, data, heap (brk),
//! shared-library and stack regions as a Linux process does, fetch instructions from their code
//! and grow and shrink their address spaces, because what separates shadow from nested paging
//! is exactly that activity (guest page-table writes, CR3 writes, page faults). Each workload
//! documents what it imitates, and its parameters shape it (docs/workloads.md, "Workloads
//! from the papers").
//!
//! Every workload is seeded and deterministic (Law 7), knows its exact event count
//! (`len_hint`), and produces its events in chunks of one loop iteration (or a bounded run of
//! references) into a reused buffer: nothing is allocated per event.

mod aim9;
mod compile;
mod cpu;
mod kernel;
mod memorymotion;
mod phases;
mod script;
mod server;

use super::spec::{ParamDef, Spec, Values};
use super::{GeneratorInfo, ParamInfo};
use crate::error::Result;
use crate::event::EventSource;
use script::{Script, ScriptSource};

/// One workload of this family: its name, what it imitates, its parameters and its builder.
pub(crate) struct PaperDef {
    pub name: &'static str,
    pub description: &'static str,
    pub own: &'static [ParamDef],
    pub build: fn(&Values) -> Result<Box<dyn Script>>,
}

pub(crate) const fn p(
    name: &'static str,
    default: &'static str,
    description: &'static str,
) -> ParamDef {
    ParamDef {
        name,
        default,
        description,
    }
}

/// Parameters every workload of this family accepts.
const COMMON: &[ParamDef] = &[
    p("seed", "1", "seed of the workload's random choices (Xoshiro256++); same spec and seed, same stream"),
    p("bits", "64", "address-space layout: 64 (x86-64 Linux: text at 0x400000, libraries and stack near 0x7fff_ffff_f000) or 32 (i386 Linux: text at 0x08048000, stack below 0xc0000000) for 32-bit and PAE guests"),
];

/// Every workload of the family, in catalog order.
const PAPERS: &[PaperDef] = &[
    memorymotion::MEMORYMOTION,
    aim9::PAGE_TEST,
    aim9::BRK_TEST,
    aim9::FORK_TEST,
    aim9::EXEC_TEST,
    aim9::SHELL_RTNS,
    kernel::SEGV,
    kernel::PCD,
    kernel::NPS,
    kernel::FW,
    compile::COMPILE,
    server::DATABASE,
    server::XENAPP,
    cpu::SWIM,
    cpu::ZEUSMP,
    cpu::GCC,
    cpu::APSI,
    cpu::FMA3D,
    cpu::CRAFTY,
    phases::GZIP,
    phases::MIXED_PHASES,
];

fn params_of(d: &PaperDef) -> Vec<ParamDef> {
    d.own.iter().chain(COMMON).copied().collect()
}

/// Opens `parsed` if it names a workload of this family (`None` otherwise, so the caller can
/// report an unknown generator).
pub(crate) fn open(parsed: &Spec) -> Option<Result<Box<dyn EventSource>>> {
    let d = PAPERS.iter().find(|d| d.name == parsed.name)?;
    Some(open_def(d, parsed))
}

fn open_def(d: &PaperDef, parsed: &Spec) -> Result<Box<dyn EventSource>> {
    let given: Vec<(String, String)> = parsed
        .pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let v = Values::new(parsed.text, d.name, "", params_of(d), given)?;
    // The common parameters are checked even by workloads that draw no random number.
    v.integer("seed")?;
    script::Layout::of(&v)?;
    let script = (d.build)(&v)?;
    Ok(Box::new(ScriptSource::new(parsed.text, script)))
}

/// The catalog entries of this family, with their parameters (own first, then `seed`, `bits`).
pub(crate) fn catalog() -> Vec<GeneratorInfo> {
    PAPERS
        .iter()
        .map(|d| GeneratorInfo {
            name: d.name,
            description: d.description,
            params: params_of(d)
                .iter()
                .map(|q| ParamInfo {
                    name: q.name,
                    default: q.default.to_string(),
                    description: q.description,
                })
                .collect(),
        })
        .collect()
}
