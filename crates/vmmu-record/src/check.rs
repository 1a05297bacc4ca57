//! `vmmu trace check`: replays a trace's address-space events and reports every reference
//! outside the mappings of its process (docs/recording.md, "Checking a trace").
//!
//! The replay follows the guest OS model's rules (`guest`): `mmap` replaces what was there,
//! `munmap` and `mprotect` of a range with nothing mapped are impossible events, so is a
//! `madvise` of a range not mapped whole (Linux fails it with `ENOMEM`), the first
//! `brk` of an image sets where its heap starts, a fork copies the parent's mappings, an exec
//! starts empty. A trace that passes runs in the simulator without a touch of unmapped memory
//! and without a write to a read-only mapping (which the model treats as a segmentation
//! fault). A process that never saw a mapping event (lackey and ChampSim traces) has every page
//! mapped on first touch: its references are counted as unchecked, not as failures.

use rustc_hash::FxHashMap;
use serde::Serialize;
use vmmu_core::error::{Error, Result};
use vmmu_core::event::{Event, EventSource, Prot};
use vmmu_core::event::{Madvise, Mmap, Mprotect, Mremap, Munmap};
use vmmu_core::interval::RangeMap;

/// How many examples of each problem a report keeps.
const EXAMPLES: usize = 10;

/// A reference the check rejected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BadRef {
    /// 0-based index of the event in the trace.
    pub event: u64,
    /// The address referenced.
    pub va: u64,
    /// `load`, `store`, `modify` or `fetch`.
    pub kind: &'static str,
    /// Why: `outside every mapping` or `write to a read-only mapping`.
    pub reason: &'static str,
}

/// An address-space event the guest OS model would reject.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BadEvent {
    /// 0-based index of the event in the trace.
    pub event: u64,
    /// The process it applies to.
    pub pid: u32,
    /// The event, printed.
    pub what: String,
    /// Why it cannot happen.
    pub reason: String,
}

/// The check of one process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProcessCheck {
    /// Process id.
    pub pid: u32,
    /// References it made.
    pub refs: u64,
    /// References outside every mapping.
    pub outside: u64,
    /// Writes to read-only mappings.
    pub readonly_writes: u64,
    /// References made while it had no mapping events (mapped on first touch, unchecked).
    pub unchecked: u64,
    /// The first few bad references.
    pub examples: Vec<BadRef>,
}

/// What `trace check` found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The trace checked.
    pub trace: String,
    /// Events replayed.
    pub events: u64,
    /// References replayed.
    pub refs: u64,
    /// References outside every mapping, over all processes.
    pub outside: u64,
    /// Writes to read-only mappings, over all processes.
    pub readonly_writes: u64,
    /// References not checkable (their process had no mapping events).
    pub unchecked: u64,
    /// Impossible address-space events.
    pub bad_events: u64,
    /// The first few impossible events.
    pub bad_event_examples: Vec<BadEvent>,
    /// Per process, in order of first appearance.
    pub processes: Vec<ProcessCheck>,
    /// True when nothing was rejected.
    pub ok: bool,
}

impl CheckReport {
    /// A human-readable summary, one line per process with problems.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{}: {} events, {} references, {} processes\n",
            self.trace,
            self.events,
            self.refs,
            self.processes.len()
        );
        for p in &self.processes {
            s += &format!(
                "  pid {}: {} references, {} outside every mapping, {} writes to read-only mappings{}\n",
                p.pid,
                p.refs,
                p.outside,
                p.readonly_writes,
                if p.unchecked > 0 {
                    format!(", {} unchecked (no mapping events)", p.unchecked)
                } else {
                    String::new()
                }
            );
            for b in &p.examples {
                s += &format!(
                    "    event {}: {} at {:#x}: {}\n",
                    b.event, b.kind, b.va, b.reason
                );
            }
        }
        for b in &self.bad_event_examples {
            s += &format!(
                "  event {} (pid {}): {}: {}\n",
                b.event, b.pid, b.what, b.reason
            );
        }
        s += if self.ok {
            "OK: every reference is inside a mapping of its process\n"
        } else {
            "FAILED\n"
        };
        s
    }
}

/// A process's mappings as the checker replays them: the one interval set of vmmu, each range
/// with its protection, and the index of the last range a reference fell in.
#[derive(Clone, Debug, Default)]
struct Space {
    vmas: RangeMap<Prot>,
    hint: usize,
    heap: Option<(u64, u64)>,
    implicit: bool,
}

impl Space {
    fn new() -> Space {
        Space {
            implicit: true,
            ..Space::default()
        }
    }

    /// The protection of the mapping holding `va`.
    #[inline(always)]
    fn find(&mut self, va: u64) -> Option<Prot> {
        self.vmas.get_near(va, &mut self.hint).map(|r| r.value)
    }
}

/// Whether every byte of `[lo, hi)` is mapped.
fn mapped_whole(vmas: &RangeMap<Prot>, lo: u64, hi: u64) -> bool {
    let mut at = lo;
    while at < hi {
        match vmas.get(at) {
            Some(r) => at = r.end,
            None => return false,
        }
    }
    true
}

fn page_up(x: u64) -> u64 {
    x.saturating_add(0xfff) & !0xfff
}

/// The replay state.
struct Checker {
    spaces: FxHashMap<u32, Space>,
    order: Vec<u32>,
    procs: FxHashMap<u32, ProcessCheck>,
    cur: Option<u32>,
    report: CheckReport,
}

impl Checker {
    fn new(trace: String) -> Self {
        Checker {
            spaces: FxHashMap::default(),
            order: Vec::new(),
            procs: FxHashMap::default(),
            cur: None,
            report: CheckReport {
                trace,
                ..CheckReport::default()
            },
        }
    }

    fn proc_check(&mut self, pid: u32) -> &mut ProcessCheck {
        if !self.procs.contains_key(&pid) {
            self.order.push(pid);
        }
        self.procs.entry(pid).or_insert_with(|| ProcessCheck {
            pid,
            ..ProcessCheck::default()
        })
    }

    fn bad(&mut self, idx: u64, pid: u32, e: &Event, reason: impl Into<String>) {
        self.report.bad_events += 1;
        if self.report.bad_event_examples.len() < EXAMPLES {
            self.report.bad_event_examples.push(BadEvent {
                event: idx,
                pid,
                what: format!("{e:?}"),
                reason: reason.into(),
            });
        }
    }

    fn current(&mut self) -> u32 {
        match self.cur {
            Some(p) => p,
            None => {
                // A trace with no process events runs as an implicit pid 1.
                self.spaces.insert(1, Space::new());
                self.proc_check(1);
                self.cur = Some(1);
                1
            }
        }
    }

    fn event(&mut self, idx: u64, e: &Event) {
        match *e {
            Event::Ref(r) => {
                let pid = self.current();
                let s = self.spaces.get_mut(&pid).expect("current space");
                let verdict = if s.implicit {
                    Err(None)
                } else {
                    let last = r.va.raw().wrapping_add(r.size.max(1) as u64 - 1);
                    match (s.find(r.va.raw()), s.find(last)) {
                        (Some(prot), Some(_)) if r.kind.is_write() && !prot.write() => {
                            Err(Some("write to a read-only mapping"))
                        }
                        (Some(_), Some(_)) => Ok(()),
                        _ => Err(Some("outside every mapping")),
                    }
                };
                let p = self.proc_check(pid);
                p.refs += 1;
                match verdict {
                    Ok(()) => {}
                    Err(None) => p.unchecked += 1,
                    Err(Some(reason)) => {
                        if reason.starts_with("write") {
                            p.readonly_writes += 1;
                        } else {
                            p.outside += 1;
                        }
                        if p.examples.len() < EXAMPLES {
                            p.examples.push(BadRef {
                                event: idx,
                                va: r.va.raw(),
                                kind: match r.kind {
                                    vmmu_core::event::AccessKind::Load => "load",
                                    vmmu_core::event::AccessKind::Store => "store",
                                    vmmu_core::event::AccessKind::Modify => "modify",
                                    vmmu_core::event::AccessKind::Fetch => "fetch",
                                },
                                reason,
                            });
                        }
                    }
                }
            }
            Event::Compute { .. } | Event::Phase { .. } => {}
            Event::ProcessCreate { pid } => {
                if self.spaces.contains_key(&pid) {
                    self.bad(idx, pid, e, "the process already exists");
                }
                self.spaces.insert(pid, Space::new());
                self.proc_check(pid);
                if self.cur.is_none() {
                    self.cur = Some(pid);
                }
            }
            Event::Fork { parent, child } => {
                if self.cur != Some(parent) {
                    self.bad(idx, parent, e, "the parent is not the running process");
                }
                match self.spaces.get(&parent).cloned() {
                    Some(s) => {
                        self.spaces.insert(child, s);
                        self.proc_check(child);
                    }
                    None => self.bad(idx, parent, e, "no such parent process"),
                }
            }
            Event::Exec { pid } => match self.spaces.get_mut(&pid) {
                Some(s) => *s = Space::new(),
                None => self.bad(idx, pid, e, "no such process"),
            },
            Event::Exit { pid } => {
                if self.spaces.remove(&pid).is_none() {
                    self.bad(idx, pid, e, "no such process");
                }
                if self.cur == Some(pid) {
                    self.cur = None;
                }
            }
            Event::Switch { pid } => {
                if self.spaces.contains_key(&pid) {
                    self.cur = Some(pid);
                } else {
                    self.bad(idx, pid, e, "no such process");
                }
            }
            _ => self.os_event(idx, e),
        }
    }

    fn os_event(&mut self, idx: u64, e: &Event) {
        let pid = self.current();
        let s = self.spaces.get_mut(&pid).expect("current space");
        let problem: Option<&str> = match *e {
            Event::Mmap(ref w) => {
                let Mmap {
                    start, len, prot, ..
                } = **w;
                if start.raw() & 0xfff != 0 || len == 0 {
                    Some("start must be page aligned and length non-zero")
                } else {
                    s.implicit = false;
                    s.vmas
                        .insert(start.raw(), start.raw().saturating_add(page_up(len)), prot);
                    None
                }
            }
            Event::Munmap(ref w) => {
                let Munmap { start, len } = **w;
                let hi = start.raw().saturating_add(page_up(len));
                if s.vmas.overlaps(start.raw(), hi) {
                    s.vmas.remove(start.raw(), hi);
                    None
                } else {
                    Some("nothing is mapped there")
                }
            }
            Event::Mprotect(ref w) => {
                let Mprotect { start, len, prot } = **w;
                let hi = start.raw().saturating_add(page_up(len));
                if s.vmas.modify(start.raw(), hi, |_| prot) {
                    None
                } else {
                    Some("nothing is mapped there")
                }
            }
            Event::Madvise(ref w) => {
                let Madvise { start, len, .. } = **w;
                let hi = start.raw().saturating_add(page_up(len));
                if mapped_whole(&s.vmas, start.raw(), hi) {
                    None
                } else {
                    Some("part of the range is not mapped")
                }
            }
            Event::Mremap(ref w) => {
                let Mremap {
                    old,
                    old_len,
                    new,
                    new_len,
                } = **w;
                match s.find(old.raw()) {
                    Some(prot) => {
                        s.vmas
                            .remove(old.raw(), old.raw().saturating_add(page_up(old_len)));
                        s.vmas
                            .insert(new.raw(), new.raw().saturating_add(page_up(new_len)), prot);
                        None
                    }
                    None => Some("nothing is mapped at the old address"),
                }
            }
            Event::Brk { end } => match s.heap {
                None => {
                    s.heap = Some((end.raw(), end.raw()));
                    None
                }
                Some((base, cur)) => {
                    let new_end = page_up(end.raw());
                    if new_end < base {
                        Some("below the heap start")
                    } else {
                        s.implicit = false;
                        let cur_pg = page_up(cur);
                        if new_end > cur_pg {
                            s.vmas.insert(cur_pg, new_end, Prot::RW);
                        } else if new_end < cur_pg {
                            s.vmas.remove(new_end, cur_pg);
                        }
                        s.heap = Some((base, new_end));
                        None
                    }
                }
            },
            _ => None,
        };
        if let Some(reason) = problem {
            self.bad(idx, pid, e, reason);
        }
    }

    fn finish(mut self) -> CheckReport {
        let mut r = self.report;
        for pid in self.order {
            let p = self.procs.remove(&pid).expect("listed");
            r.refs += p.refs;
            r.outside += p.outside;
            r.readonly_writes += p.readonly_writes;
            r.unchecked += p.unchecked;
            r.processes.push(p);
        }
        r.ok = r.outside == 0 && r.readonly_writes == 0 && r.bad_events == 0;
        r
    }
}

/// Checks every event of `src`. `progress(events replayed)` is called about every four
/// million events; returning false stops with [`Error::Interrupted`].
pub fn check_source(
    src: &mut dyn EventSource,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<CheckReport> {
    let mut c = Checker::new(src.describe());
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut idx = 0u64;
    let mut next_report = 1u64 << 22;
    loop {
        buf.clear();
        if src.next_batch(&mut buf, 64 * 1024)? == 0 {
            break;
        }
        for e in &buf {
            c.event(idx, e);
            idx += 1;
        }
        if idx >= next_report {
            next_report = idx + (1 << 22);
            if !progress(idx) {
                return Err(Error::Interrupted { events: idx });
            }
        }
    }
    progress(idx);
    c.report.events = idx;
    Ok(c.finish())
}

/// Checks the trace file at `path` (any format [`vmmu_core::trace::open`] reads); `progress` as
/// for [`check_source`].
pub fn check(path: &str, progress: &mut dyn FnMut(u64) -> bool) -> Result<CheckReport> {
    let mut src = vmmu_core::trace::open(path)?;
    let mut r = check_source(src.as_mut(), progress)?;
    r.trace = path.to_string();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmmu_core::addr::Gva;
    use vmmu_core::event::{AccessKind, MapFlags, MemRef, VecSource};

    fn r(va: u64, kind: AccessKind) -> Event {
        Event::Ref(MemRef {
            va: Gva::new(va),
            kind,
            size: 8,
            instrs: 0,
            dep: 0,
        })
    }
    fn mmap(start: u64, len: u64, prot: Prot) -> Event {
        Event::mmap(Gva::new(start), len, prot, MapFlags(0))
    }
    fn run(ev: Vec<Event>) -> CheckReport {
        check_source(&mut VecSource::new("t", ev), &mut |_| true).unwrap()
    }

    #[test]
    fn references_inside_mappings_pass() {
        let rep = run(vec![
            Event::ProcessCreate { pid: 3 },
            mmap(0x1000, 0x2000, Prot::RW),
            Event::Brk {
                end: Gva::new(0x10000),
            },
            Event::Brk {
                end: Gva::new(0x12000),
            },
            r(0x1000, AccessKind::Load),
            r(0x2ff8, AccessKind::Store),
            r(0x11ff8, AccessKind::Modify),
        ]);
        assert!(rep.ok, "{}", rep.to_text());
        assert_eq!(rep.refs, 3);
    }

    #[test]
    fn outside_references_and_readonly_writes_are_reported_per_process() {
        let rep = run(vec![
            Event::ProcessCreate { pid: 3 },
            mmap(0x1000, 0x1000, Prot(Prot::READ)),
            r(0x1000, AccessKind::Load),
            r(0x1000, AccessKind::Store),
            Event::Fork {
                parent: 3,
                child: 4,
            },
            Event::Switch { pid: 4 },
            Event::munmap(Gva::new(0x1000), 0x1000),
            r(0x1000, AccessKind::Load),
            r(0x1ffc, AccessKind::Load), // straddles the end of the mapping
        ]);
        assert!(!rep.ok);
        assert_eq!(rep.readonly_writes, 1);
        assert_eq!(rep.outside, 2);
        assert_eq!(rep.processes[1].pid, 4);
        assert_eq!(rep.processes[1].outside, 2);
        assert_eq!(rep.processes[1].examples[0].event, 7);
    }

    #[test]
    fn impossible_events_fail_the_check() {
        let rep = run(vec![
            Event::ProcessCreate { pid: 3 },
            Event::munmap(Gva::new(0x1000), 0x1000),
        ]);
        assert_eq!(rep.bad_events, 1);
        assert!(!rep.ok);
    }

    #[test]
    fn madvise_inside_a_mapping_passes_and_one_reaching_outside_fails() {
        let advise = |start: u64, len: u64| {
            Event::madvise(
                Gva::new(start),
                len,
                vmmu_core::event::Advice(vmmu_core::event::Advice::HUGEPAGE),
            )
        };
        let rep = run(vec![
            Event::ProcessCreate { pid: 3 },
            mmap(0x10000, 0x4000, Prot::RW),
            mmap(0x14000, 0x1000, Prot(Prot::READ)),
            advise(0x10000, 0x5000), // two adjacent mappings, covered whole
            advise(0x11000, 0x1000),
        ]);
        assert!(rep.ok, "{}", rep.to_text());
        let rep = run(vec![
            Event::ProcessCreate { pid: 3 },
            mmap(0x10000, 0x4000, Prot::RW),
            advise(0x12000, 0x4000), // runs past the end
            advise(0x40000, 0x1000), // nothing there
        ]);
        assert_eq!(rep.bad_events, 2, "{}", rep.to_text());
        assert_eq!(rep.bad_event_examples[0].event, 2);
        assert_eq!(
            rep.bad_event_examples[0].reason,
            "part of the range is not mapped"
        );
        assert!(!rep.ok);
    }

    #[test]
    fn traces_without_mapping_events_are_unchecked_not_failed() {
        let rep = run(vec![r(0x1000, AccessKind::Load)]);
        assert!(rep.ok);
        assert_eq!(rep.unchecked, 1);
    }
}
