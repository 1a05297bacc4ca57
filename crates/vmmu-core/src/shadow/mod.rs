//! The hypervisor's software MMU for shadow paging (DESIGN.md "Shadow"; seed 000 §5, seed 001
//! §2, seed 004): shadow page tables in host memory that map gVA → hPA and that the hardware
//! walks like native tables, kept consistent with the guest's tables by write protection,
//! out-of-sync pages and resyncs, with the caching real hypervisors use.
//!
//! Shadow pages are keyed by the guest table they shadow (guest frame and level), so
//! processes share lower-level shadow pages as in KVM. A guest table that has a shadow is
//! *write-protected*: a guest write to it exits and is emulated, unless the table is a leaf
//! table and out-of-sync pages are enabled, in which case it goes out of sync for free and is
//! resynced at the next CR3 write or INVLPG. Guest large pages are shadowed by large entries
//! when the host backs them with pages at least as large, else splintered into "direct"
//! shadow tables that shadow no guest table.
//!
//! The pager returns what each operation did (pages built, resynced, removed), and the
//! hypervisor turns that into exits and cycles from the cost profile. When it removes a
//! shadow table it says so ([`ShadowPager::take_unlinked`]): the hypervisor must then flush the
//! VM's paging-structure caches, which may still point at the freed table (KVM flushes after
//! `kvm_mmu_commit_zap_page`).
//!
//! Simplifications: the pager reads the guest tables and the host mapping functionally (its
//! own memory references are part of the handler constants); a freed guest table loses its
//! shadow at once, without an exit; the capacity limit drops all shadow pages but the current
//! root when exceeded (KVM zaps the oldest pages).

mod agile;
mod pages;
mod sync;

use crate::addr::{Gpa, Gva, Hpa, PageSize};
use crate::config::ShadowConfig;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::mem::PhysAddr;
use crate::paging::descent::{descend, Descent, Perms, Trace};
use crate::paging::{Geometry, PageTable, Pte, TableWrite};
use pages::{ShadowPage, SpKey};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default)]
struct GfnInfo {
    /// Shadow pages (non-direct) of this guest table, any level.
    shadows: u32,
    /// Levels it is shadowed at (bit `level`).
    levels: u8,
    /// Emulated writes since the table was last used by a fill.
    flood: u32,
    /// Out of sync: guest writes go through without exits.
    oos: bool,
}

/// Counters of the shadow pager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowStats {
    /// Shadow pages built.
    pub pages_built: u64,
    /// Shadow pages removed (unshadow, eviction, teardown, a mode switch).
    pub pages_removed: u64,
    /// Shadow pages that exist at the end of the run.
    pub pages_live: u64,
    /// Shadow entries filled by hidden faults.
    pub fills: u64,
    /// Neighbouring entries filled by prefetch.
    pub prefetched: u64,
    /// Out-of-sync pages resynced.
    pub resyncs: u64,
    /// Shadow pages revalidated in full when a kept shadow cache is used again.
    pub revalidated: u64,
    /// Guest writes that went out of sync (no exit).
    pub oos_writes: u64,
    /// Guest tables unshadowed by write-flood detection.
    pub unshadowed: u64,
    /// Times the capacity limit dropped the shadow cache.
    pub evictions: u64,
    /// CR3 writes that found their shadow root cached.
    pub root_hits: u64,
    /// CR3 writes that had to build a root.
    pub root_misses: u64,
    /// Guest frames the host backed inside a hidden fault (lazily backed memory).
    pub backed: u64,
}

impl ShadowStats {
    /// Adds `other`'s counts to these (a pager dropped at a mode switch).
    pub fn absorb(&mut self, other: &ShadowStats) {
        self.pages_built += other.pages_built;
        self.pages_removed += other.pages_removed;
        self.pages_live += other.pages_live;
        self.fills += other.fills;
        self.prefetched += other.prefetched;
        self.resyncs += other.resyncs;
        self.revalidated += other.revalidated;
        self.oos_writes += other.oos_writes;
        self.unshadowed += other.unshadowed;
        self.evictions += other.evictions;
        self.root_hits += other.root_hits;
        self.root_misses += other.root_misses;
        self.backed += other.backed;
    }
}

/// What a hidden fault found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The guest maps the address: the shadow entry was filled.
    Filled {
        /// Shadow pages built for the path.
        built: u32,
        /// Guest frames the host backed on the way (lazy backing).
        backed: u32,
    },
    /// The guest does not map the address (or forbids the access): reflect into the guest.
    Guest,
}

/// What a guest page-table write cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// The table is not shadowed: no exit.
    Unshadowed,
    /// The table is out of sync: no exit.
    OutOfSync,
    /// The write exited and was emulated; `unshadowed` when write-flood detection then
    /// dropped the table's shadow.
    Emulated {
        /// The table stopped being shadowed.
        unshadowed: bool,
    },
}

/// The shadow pager of one VM (one vCPU), its shadow tables in the memory `A` of the host
/// side it runs on: host physical for L0's, L1 physical for an L1 hypervisor's under nested
/// virtualization.
pub struct ShadowPager<A: PhysAddr = Hpa> {
    cfg: ShadowConfig,
    geo: Geometry,
    pages: FxHashMap<SpKey, ShadowPage<A>>,
    by_hpa: FxHashMap<u64, SpKey>,
    gfns: FxHashMap<u64, GfnInfo>,
    /// Cached roots, most recently used last: (guest root gPA, shadow root).
    roots: Vec<(Gpa, A)>,
    current: Option<(Gpa, A)>,
    oos: Vec<u64>,
    /// A shadow table was removed or unlinked since the last [`ShadowPager::take_unlinked`].
    unlinked: bool,
    /// Agile paging's guest tables in nested mode, and where the switching entries are.
    agile: agile::Switched<A>,
    /// Counters.
    pub stats: ShadowStats,
}

impl<A: PhysAddr> ShadowPager<A> {
    /// An empty pager for guests with tables of geometry `geo`.
    pub fn new(cfg: &ShadowConfig, geo: Geometry) -> Self {
        ShadowPager {
            cfg: cfg.clone(),
            geo,
            pages: FxHashMap::default(),
            by_hpa: FxHashMap::default(),
            gfns: FxHashMap::default(),
            roots: Vec::new(),
            current: None,
            oos: Vec::new(),
            unlinked: false,
            agile: agile::Switched::default(),
            stats: ShadowStats::default(),
        }
    }

    /// The shadow tables the hardware walks (the real CR3 in shadow mode), if a root is loaded.
    #[inline]
    pub fn tables(&self) -> Option<PageTable<Gva, A>> {
        self.current.map(|(_, h)| PageTable::at(self.geo, h))
    }

    /// The root the running vCPU has loaded: (guest root, shadow root).
    pub fn current(&self) -> Option<(Gpa, A)> {
        self.current
    }

    /// The cached shadow root of the guest root `guest`, if the cache holds one.
    pub fn cached_root(&self, guest: Gpa) -> Option<(Gpa, A)> {
        self.roots.iter().copied().find(|&(g, _)| g == guest)
    }

    /// Loads `root`, a vCPU's root from its last turn, if the shadow cache still holds it;
    /// returns whether it did (otherwise nothing is loaded and the vCPU must switch roots).
    pub fn resume(&mut self, root: Option<(Gpa, A)>) -> bool {
        match root {
            Some(r) if self.roots.contains(&r) => {
                self.current = Some(r);
                true
            }
            _ => {
                self.current = None;
                false
            }
        }
    }

    /// Whether a shadow table was removed or unlinked since the last call (the caller must
    /// then flush the paging-structure caches); clears the flag.
    pub fn take_unlinked(&mut self) -> bool {
        std::mem::take(&mut self.unlinked)
    }

    /// Counters, with the live page count filled in.
    pub fn stats(&self) -> ShadowStats {
        ShadowStats {
            pages_live: self.pages.len() as u64,
            ..self.stats
        }
    }

    /// Zeroes the counters (the end of a warm-up).
    pub fn reset_stats(&mut self) {
        self.stats = ShadowStats::default();
    }

    fn root_key(&self, guest_root: Gpa) -> SpKey {
        SpKey {
            gfn: guest_root.raw() >> 12,
            level: self.geo.levels,
            direct: false,
        }
    }

    /// Drops every shadow page; returns how many.
    pub fn zap_all(&mut self, host: &mut Host<A>) -> u64 {
        let keys: Vec<SpKey> = self.pages.keys().copied().collect();
        for &k in &keys {
            self.zap(host, k);
        }
        self.roots.clear();
        self.current = None;
        self.oos.clear();
        keys.len() as u64
    }

    /// A guest CR3 write to the table at `guest_root`: resyncs out-of-sync pages, then
    /// switches to its cached shadow root or builds one. Returns (pages built, pages resynced).
    pub fn switch_root(
        &mut self,
        gmem: &crate::mem::PhysMem<Gpa>,
        host: &mut Host<A>,
        guest_root: Gpa,
    ) -> Result<(u32, u32)> {
        let resynced = self.resync_all(gmem, host);
        let mut built = 0;
        if self.cfg.cached_roots == 0 {
            // Palacios-style virtual TLB: every CR3 write starts from nothing.
            self.zap_all(host);
        }
        if let Some(i) = self.roots.iter().position(|&(g, _)| g == guest_root) {
            let r = self.roots.remove(i);
            self.roots.push(r);
            self.current = Some(r);
            self.stats.root_hits += 1;
            return Ok((0, resynced));
        }
        self.stats.root_misses += 1;
        let key = self.root_key(guest_root);
        let hpa = self.get_or_make(host, key, &mut built)?;
        self.roots.push((guest_root, hpa));
        self.current = Some((guest_root, hpa));
        let keep = self.cfg.cached_roots.max(1) as usize;
        while self.roots.len() > keep {
            let (g, _) = self.roots.remove(0);
            let k = self.root_key(g);
            self.zap(host, k);
        }
        Ok((built, resynced))
    }

    /// A guest page-table frame was freed: its shadows go (no exit).
    pub fn table_freed(&mut self, host: &mut Host<A>, table: Gpa) {
        let gfn = table.raw() >> 12;
        if let Some(g) = self.gfns.get(&gfn).copied() {
            for level in 1..=self.geo.levels {
                if g.levels & (1 << level) != 0 {
                    self.zap(
                        host,
                        SpKey {
                            gfn,
                            level,
                            direct: false,
                        },
                    );
                }
            }
        }
    }

    /// Handles a hidden page fault at `va` of the process whose tables are `gpt`: walks the
    /// guest tables in software and, when they map the access, fills the shadow path (and
    /// prefetches neighbours); otherwise the fault is the guest's. A guest frame the host has
    /// not backed yet (`lazy` backing) is backed here, as KVM's fault path faults the host page
    /// in.
    #[allow(clippy::too_many_arguments)]
    pub fn hidden_fault(
        &mut self,
        gmem: &mut crate::mem::PhysMem<Gpa>,
        gpt: &PageTable<Gva, Gpa>,
        host: &mut Host<A>,
        va: Gva,
        write: bool,
        fetch: bool,
        lazy: bool,
    ) -> Result<FaultKind> {
        let geo = self.geo;
        let mask = geo.frame_mask();
        let mut built = 0;
        // A root removed while in use (write-flood detection on a root table) is rebuilt, as
        // KVM reloads an invalidated root before the next entry.
        let sroot = match self.current {
            Some((_, h)) => h,
            None => {
                let h = self.get_or_make(host, self.root_key(gpt.root), &mut built)?;
                self.roots.push((gpt.root, h));
                self.current = Some((gpt.root, h));
                h
            }
        };
        // 1. The software walk of the guest tables (the one descent, recording the path).
        let mut trace = Trace::new(gmem, geo);
        let leaf = match descend(&geo, &mut trace, gpt.root, geo.levels, va) {
            Descent::Leaf(l) if l.perms.allow(write, fetch) => l,
            Descent::Leaf(_) | Descent::NotPresent { .. } => return Ok(FaultKind::Guest),
            Descent::Stopped(never) => match never {},
        };
        let path = trace.path;
        // 2. The hypervisor sets the guest's accessed (and dirty) bits.
        let mut scratch: Vec<TableWrite<Gpa>> = Vec::new();
        let mut bits = Pte::A;
        if write {
            bits |= Pte::D;
        }
        gpt.set_bits(gmem, leaf.entry, leaf.level, bits, &mut scratch);
        let dirty = leaf.pte.dirty() || write;
        // 3. The shadow path: one shadow page per guest table.
        let mut spage = sroot;
        for l in ((leaf.level + 1)..=geo.levels).rev() {
            let (t, e) = path[l as usize];
            if let Some(g) = self.gfns.get_mut(&(t.raw() >> 12)) {
                g.flood = 0;
            }
            let child_key = SpKey {
                gfn: e.frame(mask) >> 12,
                level: l - 1,
                direct: false,
            };
            if self.agile.is_nested(child_key.gfn) {
                let backed = self.link_switch(host, spage, va, l, &path, lazy)?;
                return Ok(FaultKind::Filled { built, backed });
            }
            let child = self.get_or_make(host, child_key, &mut built)?;
            spage = self.link(host, spage, va, l, child, child_key);
        }
        let leaf_table = path[leaf.level as usize].0;
        if let Some(g) = self.gfns.get_mut(&(leaf_table.raw() >> 12)) {
            g.flood = 0;
        }
        // 4. The leaf: at the guest size if the host backs it with pages as large, else
        //    splintered through direct shadow tables.
        let data_gpa = leaf.page(&geo).add(va.page_offset(leaf.size));
        let mut backed = 0;
        let (hpa, hsize) = match host.translate(data_gpa) {
            Some(t) => t,
            None if lazy => {
                host.back(data_gpa.page_base(PageSize::Size4K), PageSize::Size4K)?;
                self.stats.backed += 1;
                backed = 1;
                host.translate(data_gpa).expect("just backed")
            }
            None => {
                return Err(Error::Check {
                    event: 0,
                    detail: format!(
                        "{va} maps {data_gpa}, which the host has not backed although guest \
                         memory is backed eagerly"
                    ),
                })
            }
        };
        let mut size = leaf.size.min(hsize);
        if !geo.supports(size) {
            size = PageSize::Size4K;
        }
        let target = geo.level_of(size).expect("supported size");
        let mut l = leaf.level;
        while l > target {
            let span = geo.leaf_size(l).expect("large level").bytes();
            let key = SpKey {
                gfn: (data_gpa.raw() & !(span - 1)) >> 12,
                level: l - 1,
                direct: true,
            };
            let child = self.get_or_make(host, key, &mut built)?;
            spage = self.link(host, spage, va, l, child, key);
            l -= 1;
        }
        let perms = Perms {
            writable: leaf.perms.writable && dirty,
            ..leaf.perms
        };
        let ea = spage.add(geo.entry_offset(va.raw(), target));
        let v = Pte((hpa.raw() & !size.offset_mask() & mask) | self.leaf_flags(perms, target));
        geo.write_entry(&mut host.hmem, ea, v);
        self.stats.fills += 1;
        // 5. Prefetch neighbours of a 4 KiB guest leaf.
        if self.cfg.prefetch > 1 && leaf.level == 1 && target == 1 {
            self.prefetch(gmem, host, leaf_table, spage, va, leaf.perms);
        }
        if built > 0 && self.cfg.capacity > 0 && self.pages.len() > self.cfg.capacity as usize {
            self.evict(host);
        }
        Ok(FaultKind::Filled { built, backed })
    }

    /// The flags of a shadow leaf at `level` granting `perms`: accessed always, dirty with
    /// write permission (a clean guest page is shadowed read-only, so its first store exits
    /// and the hypervisor sets the guest's D bit).
    fn leaf_flags(&self, perms: Perms, level: u8) -> u64 {
        let mut f = Pte::P | Pte::A;
        if perms.writable {
            f |= Pte::RW | Pte::D;
        }
        if perms.user {
            f |= Pte::US;
        }
        if !perms.exec && self.geo.entry_bytes == 8 {
            f |= Pte::NX;
        }
        if level > 1 {
            f |= Pte::PS;
        }
        f
    }

    fn prefetch(
        &mut self,
        gmem: &crate::mem::PhysMem<Gpa>,
        host: &mut Host<A>,
        guest_table: Gpa,
        spage: A,
        va: Gva,
        path: Perms,
    ) {
        let geo = self.geo;
        let n = self.cfg.prefetch as u64;
        let idx = geo.index(va.raw(), 1);
        let first = idx & !(n.next_power_of_two() - 1);
        for j in first..(first + n).min(geo.entries(1)) {
            if j == idx {
                continue;
            }
            let g = geo.read_entry(gmem, guest_table.add(j * geo.entry_bytes as u64));
            if !g.present() || !g.accessed() {
                continue;
            }
            let sea = spage.add(j * geo.entry_bytes as u64);
            if geo.read_entry(&host.hmem, sea).present() {
                continue;
            }
            let Some((hpa, _)) = host.translate(Gpa::new(g.frame(geo.frame_mask()))) else {
                continue;
            };
            let perms = Perms {
                writable: path.writable && g.writable() && g.dirty(),
                user: path.user && g.user(),
                exec: path.exec && g.executable(),
            };
            let v = Pte((hpa.raw() & geo.frame_mask()) | self.leaf_flags(perms, 1));
            geo.write_entry(&mut host.hmem, sea, v);
            self.stats.prefetched += 1;
        }
    }

    fn evict(&mut self, host: &mut Host<A>) {
        self.stats.evictions += 1;
        let cur = self.current;
        let keys: Vec<SpKey> = self.pages.keys().copied().collect();
        let root_key = cur.map(|(g, _)| self.root_key(g));
        for k in keys {
            if Some(k) != root_key {
                self.zap(host, k);
            }
        }
        if let (Some(c), Some(rk)) = (cur, root_key) {
            // Clear the root's entries: every child is gone.
            if let Some(p) = self.pages.get(&rk) {
                host.hmem.zero_frame(p.hpa);
            }
            self.roots = vec![c];
            self.current = Some(c);
        }
    }

    /// A guest write to a page-table entry.
    pub fn guest_write(&mut self, host: &mut Host<A>, w: &TableWrite<Gpa>) -> WriteKind {
        let gfn = w.addr.raw() >> 12;
        let Some(info) = self.gfns.get(&gfn).copied() else {
            return WriteKind::Unshadowed;
        };
        let leaf_only = info.levels == 1 << 1;
        if self.cfg.unsync && leaf_only {
            if info.oos {
                self.stats.oos_writes += 1;
                return WriteKind::OutOfSync;
            }
            if self.cfg.oos_limit == 0 || self.oos.len() < self.cfg.oos_limit as usize {
                self.gfns.get_mut(&gfn).expect("present").oos = true;
                self.oos.push(gfn);
                self.stats.oos_writes += 1;
                return WriteKind::OutOfSync;
            }
        }
        // Emulate: the shadow entries of the written guest entry are dropped.
        let off = w.addr.raw() & 0xfff;
        for level in 1..=self.geo.levels {
            if info.levels & (1 << level) == 0 {
                continue;
            }
            let key = SpKey {
                gfn,
                level,
                direct: false,
            };
            if let Some(p) = self.pages.get(&key) {
                let ea = p.hpa.add(off);
                self.drop_entry(host, ea, level);
            }
        }
        let g = self.gfns.get_mut(&gfn).expect("present");
        g.flood += 1;
        if self.cfg.write_flood > 0 && g.flood >= self.cfg.write_flood {
            self.table_freed(host, w.addr);
            self.stats.unshadowed += 1;
            return WriteKind::Emulated { unshadowed: true };
        }
        WriteKind::Emulated { unshadowed: false }
    }

    /// A guest INVLPG of `va`: resyncs the out-of-sync leaf table that maps it and drops the
    /// shadow entry. Returns pages resynced.
    pub fn invlpg(
        &mut self,
        gmem: &crate::mem::PhysMem<Gpa>,
        gpt: &PageTable<Gva, Gpa>,
        host: &mut Host<A>,
        va: Gva,
    ) -> u32 {
        let mut resynced = 0;
        if let Some((ea, _, _)) = gpt.leaf(gmem, va) {
            let gfn = ea.raw() >> 12;
            if self.gfns.get(&gfn).is_some_and(|g| g.oos) {
                self.oos.retain(|&x| x != gfn);
                self.resync(gmem, host, gfn);
                resynced += 1;
            }
        }
        if let Some(spt) = self.tables() {
            if let Some((ea, _, _)) = spt.leaf(&host.hmem, va) {
                self.geo.write_entry(&mut host.hmem, ea, Pte(0));
            }
        }
        resynced
    }
}
