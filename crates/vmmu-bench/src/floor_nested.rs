//! A floor for the `random-64m-nested` row: the same model as vmmu's nested paging with the
//! page-walk-cache design `2d+nt` on the `bhargava08` machine, written as leanly as it can be,
//! to measure what an implementation with nothing but the model's essential work costs on this
//! host (docs/performance.md, "A floor for the nested random row, measured"). Like the native
//! floor ([`crate::floor`]), whose set, TLB, PWC and cache types it uses, it is not vmmu: a
//! deliberately narrow implementation of one configuration, checked against vmmu's counts by
//! this module's tests.
//!
//! What it models, each rule the one vmmu applies (crates/vmmu-core/src/sim/mod.rs, mmu.rs,
//! walk/mod.rs, walk/nested.rs, walk/tables.rs, paging/descent.rs, hw/*.rs):
//! - per reference, the TLBs as the native floor has them (L1 DTLB, the L2 TLB's 4 KiB array,
//!   the L2 TLB latency, the D-assist), holding guest-virtual page → host-physical frame;
//! - the 2D walk (seed 002 Figure 1(b)): the guest's 4-level walk, each guest table's
//!   guest-physical address first translated (row `gLk` for the table of guest level `k`)
//!   through the Nested TLB (16 entries, fully associative, keyed by the table's guest-physical
//!   page; 2 cycles per lookup), on a miss by a nested walk that fills it; then the guest entry
//!   referenced at `{G,gLk}`; the data's guest-physical address translated by a nested walk at
//!   row `gPA`, which never uses the NTLB (`cache_gpa_row = false`);
//! - a nested walk: the 4-level nested tables, each entry referenced once at `{nLk,row}`;
//! - the page-walk cache (24 entries, fully associative, one key per page entry's host
//!   address): every cell but `{G,gL1}` (`cache_g_l1 = false`; `{nL1,gPA}` is cached,
//!   `cache_nl1_gpa = true`); a miss, and `{G,gL1}` always, served by the caches from L2 and
//!   then filled; 2 cycles per lookup, a cache level its latency;
//! - A/D bits: the guest's accessed bit set where clear at every level, the dirty bit at the
//!   leaf for a store, each such write one more cache access to the entry's host address; the
//!   nested tables' A/D bits are not kept (vmmu does not model them, walk/tables.rs);
//! - the data reference through the caches from L1 and the cycles, as the native floor.
//!
//! How it is lean, beyond the native floor's structures: both table trees are copied out of
//! vmmu after the set-up into flat 512-entry arrays with the next table's index beside each
//! entry; the PWC's tag of a page entry is its table's number and its index (`table << 9 |
//! index`, guest tables numbered first, then nested ones), one-to-one with the entry's host
//! address because [`NestedFloor::from_sim`] checks that no two copied tables share a host
//! frame; the walk is straight-line code, one step per level of each dimension, and the
//! nested walk of an NTLB miss, the rare path, is out of line.
//!
//! What it does not handle, and refuses rather than gets wrong: anything but nested paging
//! `2d+nt` on this machine with 4-level guest and nested tables, eager backing, one vCPU and
//! no warm-up; set-up that already used the TLBs, PWC, NTLB or caches; large pages in either
//! dimension; read-only mappings; instruction fetches; events other than references after the
//! set-up; and references whose walk would fault.

use crate::floor::{
    copy_tables, Front, FrontCounts, Model, Outside, Pwc, Table, Tlb, EMPTY, ENTRIES,
};
use std::collections::HashSet;
use vmmu_core::config::{self, Backing, Mode, VirtMode};
use vmmu_core::paging::{Geometry, Pte};
use vmmu_core::sim::Simulator;
use vmmu_core::walk::step::{Grid, COL_G, ROW_GPA};
use vmmu_core::{Error, Gpa, Result};

/// The counters the nested floor keeps, each the same figure vmmu counts
/// ([`NestedCounts::of_sim`] reads vmmu's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NestedCounts {
    /// The counters of the references around the walk.
    pub front: FrontCounts,
    /// Page walks (D-assists included).
    pub walks: u64,
    /// Walks that ended in a fault (none: the floor refuses what would fault).
    pub walk_faults: u64,
    /// Accessed/dirty-bit writes by the walker.
    pub ad_updates: u64,
    /// Walk references by `{column,row}` cell (column 0 `G`, `k` the nested level `nLk`; row
    /// 0 `gPA`, `k` the guest level `gLk`).
    pub walk_refs: Grid,
    /// Walk references served by the PWC, by cell.
    pub pwc_served: Grid,
    /// PWC lookups: hits and misses.
    pub pwc: [u64; 2],
    /// NTLB lookups: hits and misses.
    pub ntlb: [u64; 2],
    /// Walk references served by the caches L1, L2, L3 and DRAM (index 3).
    pub served_level: [u64; 4],
}

impl NestedCounts {
    /// vmmu's values of the same counters.
    pub fn of_sim(sim: &Simulator) -> NestedCounts {
        let hw = &sim.mmu().hw;
        let (pwc, ntlb) = (hw.pwc.stats(), hw.ntlb.stats());
        let mut c = NestedCounts {
            front: FrontCounts::of_sim(sim),
            walks: hw.stats.walks,
            walk_faults: hw.stats.walk_faults,
            ad_updates: hw.stats.ad_updates,
            walk_refs: hw.stats.refs,
            pwc_served: hw.stats.pwc_hits,
            pwc: [pwc.hits, pwc.misses],
            ntlb: [ntlb.hits, ntlb.misses],
            ..NestedCounts::default()
        };
        c.served_level.copy_from_slice(&hw.stats.served_level[..4]);
        c
    }
}

/// The nested floor model: TLBs, PWC, NTLB, caches and copies of the guest's and the nested
/// tables.
pub struct NestedFloor {
    front: Front,
    pwc: Pwc<24>,
    /// The Nested TLB: guest-physical page number → host frame number.
    ntlb: Tlb<16, 1>,
    /// The guest's tables, the root first (`base`: guest-physical).
    guest: Vec<Table>,
    /// The nested tables, the root first (`base`: host-physical).
    host: Vec<Table>,
    /// The PWC tag of nested table `n`'s entry `i` is `(host_tag + n) << 9 | i`.
    host_tag: usize,
    /// The walk's counters other than the PWC's and NTLB's own hits and misses (gathered by
    /// [`counts`](Self::counts), with the front's), starting from vmmu's values at the end of
    /// the set-up.
    counts: NestedCounts,
    /// The NTLB's latency in cycles, from the machine's config.
    ntlb_lat: u64,
    /// The frame bits of a guest and of a nested page entry.
    gmask: u64,
    hmask: u64,
}

impl NestedFloor {
    /// The floor for `sim` at the end of its set-up phase: checks that `sim` is nested paging
    /// `2d+nt` on the unmodified `bhargava08` machine with one vCPU, eager backing, 4-level
    /// nested tables and no warm-up, check or sizing, that the set-up used no TLB, PWC, NTLB
    /// or cache, and that both table trees are 4-level with 4 KiB writable pages only; copies
    /// the current process's tables and the nested tables.
    pub fn from_sim(sim: &Simulator) -> Result<NestedFloor> {
        let refuse = |why: &str| Err(Error::config("floor", why.to_string()));
        let cfg = sim.config();
        let want = config::build(
            "bhargava08",
            &[
                ("mode".into(), "nested".into()),
                ("machine.pwc.design".into(), "2d+nt".into()),
            ],
        )?;
        if cfg.machine != want.machine
            || cfg.mode != Mode::Nested
            || sim.vmm().virt_mode() != Some(VirtMode::Nested)
            || cfg.guest.vcpus != 1
            || cfg.check
            || cfg.warmup.refs + cfg.warmup.instructions != 0
            || cfg.sizing.is_some()
            || !cfg.hypervisor.switch.at.is_empty()
            || cfg.hypervisor.backing != Backing::Eager
            || cfg.host.nested_levels != 4
        {
            return refuse("the nested floor models nested paging 2d+nt on bhargava08 alone");
        }
        // Host line numbers are the caches' u32 tags, guest page numbers the NTLB's.
        if cfg.host.memory.0 >> 6 >= EMPTY as u64 || cfg.guest.memory.0 >> 12 >= EMPTY as u64 {
            return refuse("memory beyond the floor's u32 line and page numbers");
        }
        let c = NestedCounts::of_sim(sim);
        if c.front.used() || c.walks != 0 || c.pwc != [0, 0] || c.ntlb != [0, 0] {
            return refuse("the set-up used the TLBs or caches; the floor starts cold");
        }
        let geo = Geometry::of(cfg.guest.format);
        let host = sim.vmm().host();
        let hgeo = host.npt.geo;
        if geo.levels != 4 || geo.entry_bytes != 8 || hgeo.levels != 4 || hgeo.entry_bytes != 8 {
            return refuse("the nested floor walks 4-level tables");
        }
        let Some(pt) = sim.os().current_pid().and_then(|p| sim.os().tables(p)) else {
            return refuse("no process after the set-up");
        };
        let mut guest = Vec::new();
        copy_tables(&sim.os().mem, &geo, pt.root.raw(), 4, &mut guest)?;
        let mut nested = Vec::new();
        copy_tables(&host.hmem, &hgeo, host.npt.root.raw(), 4, &mut nested)?;
        if (guest.len() + nested.len()) << 9 >= EMPTY as usize {
            return refuse("more tables than the floor numbers");
        }
        // The PWC tags stand for host addresses: one-to-one only if no two tables share a
        // host frame.
        let mut frames = HashSet::new();
        for t in &guest {
            match host.translate(Gpa::new(t.base)) {
                Some((h, _)) if frames.insert(h.raw()) => {}
                _ => return refuse("a guest table without a host frame of its own"),
            }
        }
        if !nested.iter().all(|t| frames.insert(t.base)) {
            return refuse("a nested table sharing a host frame");
        }
        Ok(NestedFloor {
            front: Front::new(sim),
            pwc: Pwc::new(cfg.machine.pwc.latency as u64),
            ntlb: Tlb::new(),
            host_tag: guest.len(),
            guest,
            host: nested,
            counts: c,
            ntlb_lat: cfg.machine.ntlb.latency as u64,
            gmask: geo.frame_mask(),
            hmask: hgeo.frame_mask(),
        })
    }

    /// A page-entry reference at cell `{C,R}` to the entry at host address `entry`, whose PWC
    /// tag is `tag`: through the PWC, on a miss through the caches and then filled into it.
    #[inline(always)]
    fn pwc_ref<const C: usize, const R: usize>(&mut self, tag: u32, entry: u64, cyc: &mut u64) {
        self.counts.walk_refs[C][R] += 1;
        match self.pwc.reference(tag, entry, &mut self.front, cyc) {
            None => self.counts.pwc_served[C][R] += 1,
            Some(l) => self.counts.served_level[l] += 1,
        }
    }

    /// The nested walk's step at nested level `L` of row `R` in nested table `n` for `gpa`:
    /// returns the next nested table's index, or at level 1 the host page's address.
    #[inline(always)]
    fn nested_step<const L: usize, const R: usize>(
        &mut self,
        n: usize,
        gpa: u64,
        cyc: &mut u64,
    ) -> std::result::Result<u64, Outside> {
        let i = (gpa >> (3 + 9 * L)) as usize & (ENTRIES - 1);
        let entry = self.host[n].base + 8 * i as u64;
        let tag = (((self.host_tag + n) << 9) | i) as u32;
        self.pwc_ref::<L, R>(tag, entry, cyc);
        let e = self.host[n].ent[i];
        if e & Pte::P == 0 {
            return Err(Outside("a nested fault", gpa));
        }
        Ok(if L > 1 {
            self.host[n].next[i] as u64
        } else {
            Pte(e).frame(self.hmask)
        })
    }

    /// The nested walk of `gpa` at row `R`: the host page's address.
    #[inline(always)]
    fn nested_walk<const R: usize>(
        &mut self,
        gpa: u64,
        cyc: &mut u64,
    ) -> std::result::Result<u64, Outside> {
        let n = self.nested_step::<4, R>(0, gpa, cyc)? as usize;
        let n = self.nested_step::<3, R>(n, gpa, cyc)? as usize;
        let n = self.nested_step::<2, R>(n, gpa, cyc)? as usize;
        self.nested_step::<1, R>(n, gpa, cyc)
    }

    /// The host address of guest table `t`, whose entries are row `R`: the NTLB, on a miss
    /// the nested walk, which fills it.
    #[inline(always)]
    fn locate<const R: usize>(
        &mut self,
        t: usize,
        cyc: &mut u64,
    ) -> std::result::Result<u64, Outside> {
        *cyc += self.ntlb_lat;
        let gpa = self.guest[t].base;
        let gpn = (gpa >> 12) as u32;
        match self.ntlb.lookup(gpn) {
            Some(h) => Ok((h as u64) << 12),
            None => self.locate_miss::<R>(gpa, cyc),
        }
    }

    /// [`locate`](Self::locate) after the NTLB missed: the nested walk of the table at `gpa`,
    /// filled into the NTLB. Out of line: it is the rare path (an NTLB hit is the common one),
    /// and inlined it would crowd the hot path's registers.
    #[inline(never)]
    fn locate_miss<const R: usize>(
        &mut self,
        gpa: u64,
        cyc: &mut u64,
    ) -> std::result::Result<u64, Outside> {
        let h = self.nested_walk::<R>(gpa, cyc)?;
        self.ntlb.insert((gpa >> 12) as u32, (h >> 12) as u32);
        Ok(h)
    }

    /// The guest walk's step at level `L` (4, 3 or 2) in guest table `t`: the table located,
    /// its entry referenced in column `G` of row `L`, its A bit set where clear (one more
    /// cache access). Returns the next guest table's index.
    #[inline(always)]
    fn upper<const L: usize>(
        &mut self,
        t: usize,
        va: u64,
        cyc: &mut u64,
    ) -> std::result::Result<usize, Outside> {
        let h = self.locate::<L>(t, cyc)?;
        let i = (va >> (3 + 9 * L)) as usize & (ENTRIES - 1);
        let entry = h + 8 * i as u64;
        self.pwc_ref::<COL_G, L>(((t << 9) | i) as u32, entry, cyc);
        let (table, ad) = (&mut self.guest[t], &mut self.counts.ad_updates);
        self.front.visit(table, i, entry, va, false, ad, cyc)?;
        Ok(table.next[i] as usize)
    }

    /// The counters, with the structures' own gathered in (for the tests, which compare them
    /// with vmmu's).
    #[cfg(test)]
    pub fn counts(&self) -> NestedCounts {
        let mut c = self.counts;
        c.front = self.front.counts();
        c.pwc = [self.pwc.hits, self.pwc.misses];
        c.ntlb = [self.ntlb.hits, self.ntlb.misses];
        c
    }
}

impl Model for NestedFloor {
    #[inline(always)]
    fn front(&mut self) -> &mut Front {
        &mut self.front
    }

    /// The 2D walk.
    #[inline(always)]
    fn walk(&mut self, va: u64, write: bool) -> std::result::Result<u32, Outside> {
        self.counts.walks += 1;
        let mut cyc = 0u64;
        let t = self.upper::<4>(0, va, &mut cyc)?;
        let t = self.upper::<3>(t, va, &mut cyc)?;
        let t = self.upper::<2>(t, va, &mut cyc)?;
        // The guest leaf (level 1): `{G,gL1}` is not cached in the PWC (`cache_g_l1 = false`).
        let h = self.locate::<1>(t, &mut cyc)?;
        let i = (va >> 12) as usize & (ENTRIES - 1);
        let entry = h + 8 * i as u64;
        self.counts.walk_refs[COL_G][1] += 1;
        let l = self.front.pe_mem(entry);
        self.counts.served_level[l] += 1;
        cyc += self.front.lat[l];
        let (table, ad) = (&mut self.guest[t], &mut self.counts.ad_updates);
        let e = self.front.visit(table, i, entry, va, write, ad, &mut cyc)?;
        // The data's guest-physical page through the nested tables (row gPA, no NTLB).
        let page = self.nested_walk::<ROW_GPA>(Pte(e).frame(self.gmask), &mut cyc)?;
        self.front.counts.translation_cycles += cyc;
        let dirty = (e & Pte::D != 0) || write;
        Ok((((page >> 12) as u32) << 1) | dirty as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::testing;
    use vmmu_core::workload;

    /// vmmu's counts and the floor's over the reference phase of `spec`, nested 2d+nt on
    /// bhargava08 (the bench rows' configuration), with `memory` of guest memory where given;
    /// with `clean`, every A and D bit of the guest's tables cleared after the set-up (for
    /// both).
    fn both_in(spec: &str, memory: Option<&str>, clean: bool) -> (NestedCounts, NestedCounts) {
        let mut ov = vec![
            ("mode".to_string(), "nested".to_string()),
            ("machine.pwc.design".to_string(), "2d+nt".to_string()),
        ];
        if let Some(m) = memory {
            ov.push(("guest.memory".to_string(), format!("\"{m}\"")));
        }
        let cfg = config::build("bhargava08", &ov).unwrap();
        let (sim, floor) = testing::both(&cfg, spec, clean, NestedFloor::from_sim);
        (NestedCounts::of_sim(&sim), floor.counts())
    }

    /// [`both_in`] with the preset's guest memory.
    fn both(spec: &str, clean: bool) -> (NestedCounts, NestedCounts) {
        both_in(spec, None, clean)
    }

    /// The bench row's stream, 200 K references.
    const SPEC: &str = "random:footprint=64M,refs=200K,prefault=1";

    #[test]
    fn the_nested_floor_counts_exactly_what_vmmu_counts() {
        let (vmmu, floor) = both(SPEC, false);
        assert_eq!(vmmu, floor);
        // Every path the row takes was taken: L1 and L2 TLB hits, NTLB hits and misses, PWC
        // hits in every cached cell of both dimensions, the guest's upper A bits, every cache
        // level and DRAM. (The prefaulted leaves are accessed and dirty: no D-assist here.)
        assert_eq!(floor.front.memory_refs, 200_000);
        assert!(floor.front.l1d[0] > 0 && floor.front.l2tlb[0] > 0 && floor.ad_updates > 0);
        assert!(floor.ntlb[0] > 0 && floor.ntlb[1] > 0 && floor.pwc[1] > 0);
        assert!((2..=4).all(|l| floor.pwc_served[COL_G][l] > 0));
        // Nested walks at every guest row (the upper rows' once, then the NTLB answers) and
        // at the gPA row, PWC hits in both (the gPA row's nL1 entries, one per random data
        // page, are evicted before they are used again).
        assert!((1..=4).all(|n| (0..=4).all(|r| floor.walk_refs[n][r] > 0)));
        assert!((2..=4).all(|n| floor.pwc_served[n][ROW_GPA] > 0 && floor.pwc_served[n][1] > 0));
        assert!(floor.served_level[1..].iter().all(|&n| n > 0));
        assert!(floor.front.caches.iter().all(|l| l[0] > 0 && l[1] > 0));
    }

    #[test]
    fn the_nested_floor_counts_exactly_what_vmmu_counts_over_4_gib() {
        // The 4 GiB row's configuration: tables far beyond the PWC's reach, most nested walks
        // of guest tables missing the NTLB.
        let (vmmu, floor) = both_in("random:footprint=4G,refs=20K,prefault=1", Some("8G"), false);
        assert_eq!(vmmu, floor);
        assert_eq!(floor.front.memory_refs, 20_000);
        assert!(floor.ntlb[1] > 10_000 && floor.served_level[3] > 0);
    }

    #[test]
    fn the_nested_floor_keeps_a_and_d_bits_as_vmmu_does() {
        // The same stream over guest tables whose A and D bits are clear: every first walk of
        // a page sets A (and D for a store), and a store through an entry a load filled
        // re-walks.
        let (vmmu, floor) = both(SPEC, true);
        assert_eq!(vmmu, floor);
        assert!(floor.front.d_assists > 100 && floor.ad_updates > 16_384);
    }

    #[test]
    fn the_nested_floor_refuses_what_it_does_not_model() {
        let refused = |overrides: &[(&str, &str)]| {
            let ov: Vec<(String, String)> = overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let mut sim = Simulator::new(&config::build("bhargava08", &ov).unwrap()).unwrap();
            let mut src = workload::open("random:footprint=1M,refs=1K,prefault=1").unwrap();
            crate::rows::setup(&mut sim, src.as_mut()).unwrap();
            NestedFloor::from_sim(&sim).is_err()
        };
        assert!(refused(&[("mode", "native")]));
        assert!(refused(&[("mode", "nested"), ("machine.pwc.design", "2d")]));
        assert!(refused(&[
            ("mode", "nested"),
            ("host.nested_page_size", "\"2M\"")
        ]));
        assert!(!refused(&[("mode", "nested")]));
    }
}
