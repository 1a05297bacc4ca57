//! Agile paging (Gandhi, Hill & Swift, "Agile Paging: Exceeding the Best of Nested and Shadow
//! Paging", ISCA 2016): the hypervisor shadow-pages the guest, but a subtree of the guest's
//! tables that the guest keeps writing runs in nested mode — the shadow entry above it is a
//! switching entry, the hardware walks the subtree in 2D, and the guest's writes to it do not
//! exit. The walk is [`crate::walk`]'s agile walk; the shadow part is the shadow pager of
//! [`super::shadow`], whose exits agile paging keeps for the subtrees still in shadow mode.
//!
//! The policy (`[agile]`, [`crate::config::AgileConfig`]): a shadowed guest table written (and
//! emulated) `write_threshold` times within one scan interval moves, with the tables below it,
//! to nested mode; every `scan_interval` instructions the hypervisor reads the nested dirty
//! bit of the root table of each subtree in nested mode, and a subtree whose root table was not
//! written since the last scan moves back to shadow mode (its shadow path refills through
//! hidden faults; tables below it that keep being written move to nested mode again on their
//! own writes, so the switch settles at the level that is written).
//! The guest's writes since the last scan to the tables of a subtree (walked as they are at the
//! scan) are the exits agile paging avoided.

use super::exits::ExitReason;
use super::nested::nested_fault;
use super::ops::{AgileStats, Fault, Ipis, Paging, PagingOps, Resolution, Resume, Role, VcpuRoot};
use super::shadow::Shadow;
use super::shared::Shared;
use crate::addr::{Gpa, Gva};
use crate::error::Result;
use crate::guest::{GuestOs, OsEffects};
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::shadow::{ShadowStats, WriteKind};
use crate::walk::{AgileTables, Tables, WalkFault};
use rustc_hash::FxHashMap;

/// Agile paging: a shadow pager whose subtrees can be in nested mode, and the policy's state.
pub(super) struct Agile {
    shadow: Shadow,
    /// Emulated writes per shadowed guest table (frame) since the last scan.
    writes: FxHashMap<u64, u32>,
    /// Writes since the last scan per guest table (frame) with no shadow: the nested dirty
    /// bits of those pages, which the scan reads for the tables in nested mode.
    written: FxHashMap<u64, u64>,
    /// The instruction count of the next scan.
    next_scan: u64,
    stats: AgileStats,
}

impl Agile {
    /// An empty shadow cache, every guest table in shadow mode.
    pub(super) fn new(hv: &Shared) -> Self {
        Agile {
            shadow: Shadow::new(hv),
            writes: FxHashMap::default(),
            written: FxHashMap::default(),
            next_scan: hv.agile.scan_interval,
            stats: AgileStats::default(),
        }
    }

    /// Moves the subtree of the guest table at frame `gfn`, of `level`, to nested mode;
    /// returns the handler's cycles (each shadow page removed is an unshadow).
    fn nest(&mut self, hv: &mut Shared, gfn: u64, level: u8) -> u64 {
        let removed = self.shadow.pager_mut().nest(&mut hv.host, gfn, level);
        self.writes.remove(&gfn);
        self.stats.to_nested += 1;
        removed * hv.costs.unshadow
    }
}

impl PagingOps for Agile {
    fn role(&self) -> Role {
        Role {
            paging: Paging::Agile,
            nested_tables: true,
            virt: None,
            ipis: Ipis::Exits,
        }
    }

    /// The three root registers: the shadow root, the guest's, and the nested tables'.
    #[inline(always)]
    fn tables<'a>(
        &'a self,
        hv: &'a Shared,
        mem: &'a mut PhysMem<Gpa>,
        pt: PageTable<Gva, Gpa>,
    ) -> Tables<'a> {
        let sp = self.shadow.pager();
        // The shadow root loaded is this process's only if its guest root is the one walked
        // (another process's root stays loaded while one whose root is nested runs).
        let spt = sp
            .tables()
            .filter(|_| sp.current().is_some_and(|(g, _)| g == pt.root));
        Tables::Agile(AgileTables {
            mem,
            pt,
            hmem: &hv.host.hmem,
            npt: hv.host.npt,
            spt,
            nested_root: sp.is_nested(pt.root.raw() >> 12),
            guest_of: sp.guest_of(),
        })
    }

    /// A fault in the nested part of a walk (below a switching entry, or under a guest root
    /// in nested mode) is the guest's, delivered without an exit as under nested paging; a
    /// nested fault backs the page where memory is backed lazily; any other fault is the
    /// shadow pager's hidden fault.
    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        os: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        match f.cause {
            WalkFault::Nested { gpa } => nested_fault(hv, mmu, gpa, f.va),
            WalkFault::NotPresent { .. } | WalkFault::Protection => {
                let sp = self.shadow.pager();
                let root_nested = os
                    .tables(f.pid)
                    .is_some_and(|pt| sp.is_nested(pt.root.raw() >> 12));
                let loaded = sp.current().map(|(g, _)| g);
                let root = os.tables(f.pid).map(|pt| pt.root);
                if root_nested || (loaded == root && sp.switches_at(&hv.host, f.va)) {
                    return Ok(Resolution::Guest);
                }
                if loaded.is_some() && loaded != root {
                    // The process's root left nested mode while another's shadow root was
                    // loaded: the root is loaded again, as a CR3 write (with none loaded, the
                    // hidden fault builds it, as under shadow paging).
                    self.shadow.cr3_write(hv, mmu, os, f.pid)?;
                    return Ok(Resolution::Retry);
                }
                self.shadow.fault(hv, mmu, os, f)
            }
        }
    }

    /// A write to a guest table with no shadow goes through (in nested mode its nested dirty
    /// bit is set); a write to a shadowed one is the shadow pager's, and the writes that exit
    /// count toward moving the table's subtree to nested mode.
    fn writes(&mut self, hv: &mut Shared, mmu: &mut Mmu, fx: &OsEffects) {
        let threshold = hv.agile.write_threshold;
        for w in &fx.writes {
            let gfn = w.addr.raw() >> 12;
            let level = self.shadow.pager().shadow_level(gfn);
            match (self.shadow.write(hv, w), level) {
                ((WriteKind::Unshadowed, _), _) => *self.written.entry(gfn).or_default() += 1,
                ((_, Some(mut h)), Some(level)) => {
                    let n = self.writes.entry(gfn).or_default();
                    *n += 1;
                    if *n >= threshold {
                        h += self.nest(hv, gfn, level);
                    }
                    hv.acct.charge(mmu, ExitReason::PtWrite, h);
                }
                ((_, Some(h)), None) => hv.acct.charge(mmu, ExitReason::PtWrite, h),
                ((_, None), _) => {}
            }
        }
        for &t in &fx.freed_tables {
            let gfn = t.raw() >> 12;
            if self.shadow.pager().is_nested(gfn) {
                self.shadow.pager_mut().unnest(&mut hv.host, gfn);
            }
            self.written.remove(&gfn);
            self.shadow.pager_mut().table_freed(&mut hv.host, t);
        }
    }

    fn invlpg(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32, va: Gva) {
        self.shadow.invlpg(hv, mmu, os, pid, va);
    }

    fn flush(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) {
        self.shadow.flush(hv, mmu, os, pid);
    }

    /// A CR3 write exits; to a guest root in shadow mode the pager switches shadow roots, to
    /// one in nested mode the walk starts from the guest root and no shadow root is built.
    fn cr3_write(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) -> Result<()> {
        let nested = os
            .tables(pid)
            .is_some_and(|pt| self.shadow.pager().is_nested(pt.root.raw() >> 12));
        if nested {
            hv.acct
                .charge(mmu, ExitReason::Cr3Write, hv.costs.cr3_write);
            return Ok(());
        }
        self.shadow.cr3_write(hv, mmu, os, pid)
    }

    fn unlinked(&mut self) -> bool {
        self.shadow.unlinked()
    }

    fn resume(&mut self, root: Option<VcpuRoot>) -> Resume {
        self.shadow.resume(root)
    }

    fn current_root(&self) -> Option<VcpuRoot> {
        self.shadow.current_root()
    }

    fn pager_stats(&self) -> Option<ShadowStats> {
        self.shadow.pager_stats()
    }

    fn reset_stats(&mut self) {
        self.shadow.reset_stats();
        self.stats = AgileStats::default();
    }

    fn next_tick(&self) -> u64 {
        self.next_scan
    }

    /// The dirty-bit scan: each subtree in nested mode whose root table was not written
    /// since the last scan moves back to shadow mode (the tables below that keep being
    /// written move to nested mode again on their own writes, lower in the walk); the write
    /// counts of the interval restart.
    fn tick(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, instructions: u64) {
        let interval = hv.agile.scan_interval;
        self.next_scan = (instructions / interval + 1) * interval;
        self.writes.clear();
        let roots = self.shadow.pager().nested_tables();
        if roots.is_empty() {
            self.written.clear();
            return;
        }
        let scanned = roots.len() as u64;
        for root in roots {
            let tables = self.shadow.pager().subtree(&os.mem, root);
            let n: u64 = tables.iter().filter_map(|t| self.written.get(t)).sum();
            self.stats.exits_avoided += n;
            if !self.written.contains_key(&root) {
                self.shadow.pager_mut().unnest(&mut hv.host, root);
                self.stats.to_shadow += 1;
            }
        }
        self.written.clear();
        self.stats.scans += 1;
        hv.acct
            .charge(mmu, ExitReason::AgileScan, scanned * hv.agile.scan_table);
    }

    fn agile_stats(&self) -> Option<AgileStats> {
        Some(AgileStats {
            nested_tables: self.shadow.pager().nested_tables().len() as u64,
            ..self.stats
        })
    }
}
