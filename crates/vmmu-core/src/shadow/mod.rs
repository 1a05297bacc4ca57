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
//! simulator turns that into exits and cycles from the cost profile.
//!
//! Simplifications: the pager reads the guest tables and the host mapping functionally (its
//! own memory references are part of the handler constants); a freed guest table loses its
//! shadow at once, without an exit; the capacity limit drops all shadow pages but the current
//! root when exceeded (KVM zaps the oldest pages).

use crate::addr::{Gpa, Gva, Hpa, PageSize};
use crate::config::ShadowConfig;
use crate::error::Result;
use crate::mem::PhysMem;
use crate::paging::{Geometry, PageTable, Pte, TableWrite};
use crate::vmm::Vmm;
use rustc_hash::FxHashMap;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct SpKey {
    /// The guest table's frame number, or for a direct page the guest-physical frame number
    /// of the region it maps.
    gfn: u64,
    /// The level of the shadow table.
    level: u8,
    /// A splinter table shadowing no guest table.
    direct: bool,
}

#[derive(Clone, Debug)]
struct ShadowPage {
    hpa: Hpa,
    /// Shadow entries (host addresses) that point to this page.
    parents: Vec<Hpa>,
}

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
#[derive(Clone, Debug, Default)]
pub struct ShadowStats {
    /// Shadow pages built.
    pub pages_built: u64,
    /// Shadow pages removed (unshadow, eviction, teardown).
    pub pages_removed: u64,
    /// Shadow entries filled by hidden faults.
    pub fills: u64,
    /// Neighbouring entries filled by prefetch.
    pub prefetched: u64,
    /// Out-of-sync pages resynced.
    pub resyncs: u64,
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
}

/// What a hidden fault found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The guest maps the address: the shadow entry was filled; `built` shadow pages made.
    Filled {
        /// Shadow pages built for the path.
        built: u32,
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

/// The shadow pager of one VM (one vCPU).
pub struct ShadowPager {
    cfg: ShadowConfig,
    geo: Geometry,
    pages: FxHashMap<SpKey, ShadowPage>,
    by_hpa: FxHashMap<u64, SpKey>,
    gfns: FxHashMap<u64, GfnInfo>,
    /// Cached roots, most recently used last: (guest root gPA, shadow root).
    roots: Vec<(u64, Hpa)>,
    current: Option<(u64, Hpa)>,
    oos: Vec<u64>,
    /// Counters.
    pub stats: ShadowStats,
}

impl ShadowPager {
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
            stats: ShadowStats::default(),
        }
    }

    /// The shadow root the hardware walks (the real CR3 in shadow mode).
    #[inline]
    pub fn root(&self) -> Option<Hpa> {
        self.current.map(|(_, h)| h)
    }

    /// The geometry of the shadow tables (the guest's).
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Shadow pages that exist now.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Pages currently out of sync.
    pub fn oos_count(&self) -> usize {
        self.oos.len()
    }

    /// Whether the guest table at `gfn` is shadowed (write-protected or out of sync).
    pub fn is_shadowed(&self, gfn: u64) -> bool {
        self.gfns.contains_key(&gfn)
    }

    fn read(&self, hmem: &PhysMem<Hpa>, a: Hpa) -> Pte {
        self.geo.read_entry(hmem, a)
    }

    fn write(&self, hmem: &mut PhysMem<Hpa>, a: Hpa, v: Pte) {
        self.geo.write_entry(hmem, a, v);
    }

    fn get_or_make(&mut self, vmm: &mut Vmm, key: SpKey, built: &mut u32) -> Result<Hpa> {
        if let Some(p) = self.pages.get(&key) {
            return Ok(p.hpa);
        }
        let hpa = vmm.alloc_table_frame()?;
        self.pages.insert(
            key,
            ShadowPage {
                hpa,
                parents: Vec::new(),
            },
        );
        self.by_hpa.insert(hpa.raw(), key);
        if !key.direct {
            let g = self.gfns.entry(key.gfn).or_default();
            g.shadows += 1;
            g.levels |= 1 << key.level;
        }
        self.stats.pages_built += 1;
        *built += 1;
        Ok(hpa)
    }

    /// Removes a shadow page: unlinks it from its parents and its children, frees its frame.
    fn zap(&mut self, vmm: &mut Vmm, key: SpKey) {
        let Some(page) = self.pages.remove(&key) else {
            return;
        };
        self.by_hpa.remove(&page.hpa.raw());
        for &parent in &page.parents {
            self.write(&mut vmm.hmem, parent, Pte(0));
        }
        if key.level > 1 {
            let n = if key.level == self.geo.levels {
                1u64 << self.geo.root_bits
            } else {
                1u64 << self.geo.index_bits
            };
            for i in 0..n {
                let ea = page.hpa.add(i * self.geo.entry_bytes as u64);
                let e = self.read(&vmm.hmem, ea);
                if e.present() && !e.large() {
                    let child = e.frame(self.geo.frame_mask());
                    if let Some(ck) = self.by_hpa.get(&child).copied() {
                        if let Some(cp) = self.pages.get_mut(&ck) {
                            cp.parents.retain(|&p| p != ea);
                        }
                    }
                }
            }
        }
        if !key.direct {
            if let Some(g) = self.gfns.get_mut(&key.gfn) {
                g.shadows -= 1;
                g.levels &= !(1 << key.level);
                if g.shadows == 0 {
                    self.gfns.remove(&key.gfn);
                    self.oos.retain(|&x| x != key.gfn);
                }
            }
        }
        self.roots.retain(|&(_, h)| h != page.hpa);
        if self.current.map(|(_, h)| h) == Some(page.hpa) {
            self.current = None;
        }
        vmm.free_table_frame(page.hpa);
        self.stats.pages_removed += 1;
    }

    /// Drops every shadow page.
    pub fn zap_all(&mut self, vmm: &mut Vmm) {
        let keys: Vec<SpKey> = self.pages.keys().copied().collect();
        for k in keys {
            self.zap(vmm, k);
        }
        self.roots.clear();
        self.current = None;
        self.oos.clear();
    }

    /// A guest CR3 write to the table at `guest_root`: resyncs out-of-sync pages, then
    /// switches to its cached shadow root or builds one. Returns (pages built, pages resynced).
    pub fn switch_root(
        &mut self,
        gmem: &PhysMem<Gpa>,
        vmm: &mut Vmm,
        guest_root: Gpa,
    ) -> Result<(u32, u32)> {
        let resynced = self.resync_all(gmem, vmm);
        let mut built = 0;
        if self.cfg.cached_roots == 0 {
            // Palacios-style virtual TLB: every CR3 write starts from nothing.
            self.zap_all(vmm);
        }
        if let Some(i) = self.roots.iter().position(|&(g, _)| g == guest_root.raw()) {
            let r = self.roots.remove(i);
            self.roots.push(r);
            self.current = Some(r);
            self.stats.root_hits += 1;
            return Ok((0, resynced));
        }
        self.stats.root_misses += 1;
        let key = SpKey {
            gfn: guest_root.raw() >> 12,
            level: self.geo.levels,
            direct: false,
        };
        let hpa = self.get_or_make(vmm, key, &mut built)?;
        self.roots.push((guest_root.raw(), hpa));
        self.current = Some((guest_root.raw(), hpa));
        let keep = self.cfg.cached_roots.max(1) as usize;
        while self.roots.len() > keep {
            let (g, _) = self.roots[0];
            self.roots.remove(0);
            let k = SpKey {
                gfn: g >> 12,
                level: self.geo.levels,
                direct: false,
            };
            self.zap(vmm, k);
        }
        Ok((built, resynced))
    }

    /// The guest's root table was freed or replaced (exit, exec): forget its shadow root.
    pub fn forget_root(&mut self, vmm: &mut Vmm, guest_root: Gpa) {
        self.roots.retain(|&(g, _)| g != guest_root.raw());
        let k = SpKey {
            gfn: guest_root.raw() >> 12,
            level: self.geo.levels,
            direct: false,
        };
        self.zap(vmm, k);
    }

    /// A guest page-table frame was freed: its shadows go (no exit).
    pub fn table_freed(&mut self, vmm: &mut Vmm, gfn: u64) {
        if let Some(g) = self.gfns.get(&gfn).copied() {
            for level in 1..=self.geo.levels {
                if g.levels & (1 << level) != 0 {
                    self.zap(
                        vmm,
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
    /// prefetches neighbours); otherwise the fault is the guest's.
    pub fn hidden_fault(
        &mut self,
        gmem: &mut PhysMem<Gpa>,
        gpt: &PageTable<Gpa>,
        vmm: &mut Vmm,
        va: Gva,
        write: bool,
        fetch: bool,
    ) -> Result<FaultKind> {
        let geo = self.geo;
        let mask = geo.frame_mask();
        let Some((_, sroot)) = self.current else {
            return Ok(FaultKind::Guest);
        };
        // 1. Software walk of the guest tables.
        let mut path: [(u64, Pte); 6] = [(0, Pte(0)); 6];
        let mut table = gpt.root.raw();
        let mut level = geo.levels;
        let (mut w, mut u, mut x) = (true, true, true);
        let leaf_level = loop {
            let ea = table + geo.entry_offset(va.raw(), level);
            let e = geo.read_entry(gmem, Gpa(ea));
            if !e.present() {
                return Ok(FaultKind::Guest);
            }
            path[level as usize] = (table, e);
            let pae_root = geo.format == crate::config::PagingFormat::Pae && level == 3;
            if !pae_root {
                w &= e.writable();
                u &= e.user();
                x &= e.executable();
            }
            if level == 1 || (e.large() && geo.leaf_size(level).is_some()) {
                break level;
            }
            table = e.frame(mask);
            level -= 1;
        };
        if (write && !w) || (fetch && !x) {
            return Ok(FaultKind::Guest);
        }
        // 2. The hypervisor sets the guest's accessed (and dirty) bits.
        let (leaf_table, leaf_e) = path[leaf_level as usize];
        let leaf_ea = leaf_table + geo.entry_offset(va.raw(), leaf_level);
        let mut scratch: Vec<TableWrite> = Vec::new();
        let mut bits = Pte::A;
        if write {
            bits |= Pte::D;
        }
        gpt.set_bits(gmem, leaf_ea, leaf_level, bits, &mut scratch);
        let dirty = leaf_e.dirty() || write;
        // 3. The shadow path: one shadow page per guest table.
        let mut built = 0;
        let mut spage = sroot;
        for l in ((leaf_level + 1)..=geo.levels).rev() {
            let (t, e) = path[l as usize];
            if let Some(g) = self.gfns.get_mut(&(t >> 12)) {
                g.flood = 0;
            }
            let child_key = SpKey {
                gfn: e.frame(mask) >> 12,
                level: l - 1,
                direct: false,
            };
            let child = self.get_or_make(vmm, child_key, &mut built)?;
            spage = self.link(vmm, spage, va, l, child, child_key);
        }
        if let Some(g) = self.gfns.get_mut(&(leaf_table >> 12)) {
            g.flood = 0;
        }
        // 4. The leaf: at the guest size if the host backs it with pages as large, else
        //    splintered through direct shadow tables.
        let gsize = geo.leaf_size(leaf_level).expect("leaf level");
        let data_gpa = Gpa((leaf_e.frame(mask) & !gsize.offset_mask()) | va.page_offset(gsize));
        let Some((hpa, hsize)) = vmm.translate(data_gpa) else {
            return Ok(FaultKind::Guest);
        };
        let mut size = gsize.min(hsize);
        if !geo.supports(size) {
            size = PageSize::Size4K;
        }
        let target = geo.level_of(size).expect("supported size");
        let mut l = leaf_level;
        while l > target {
            let span = geo.leaf_size(l).expect("large level").bytes();
            let key = SpKey {
                gfn: (data_gpa.raw() & !(span - 1)) >> 12,
                level: l - 1,
                direct: true,
            };
            let child = self.get_or_make(vmm, key, &mut built)?;
            spage = self.link(vmm, spage, va, l, child, key);
            l -= 1;
        }
        let flags = self.leaf_flags(w && dirty, u, x, target);
        let ea = spage.add(geo.entry_offset(va.raw(), target));
        let v = Pte((hpa.raw() & !size.offset_mask() & mask) | flags);
        self.write(&mut vmm.hmem, ea, v);
        self.stats.fills += 1;
        // 5. Prefetch neighbours of a 4 KiB guest leaf.
        if self.cfg.prefetch > 1 && leaf_level == 1 && target == 1 {
            self.prefetch(gmem, vmm, leaf_table, spage, va, (w, u, x));
        }
        if built > 0 && self.cfg.capacity > 0 && self.pages.len() > self.cfg.capacity as usize {
            self.evict(vmm);
        }
        Ok(FaultKind::Filled { built })
    }

    fn leaf_flags(&self, writable: bool, user: bool, exec: bool, level: u8) -> u64 {
        let mut f = Pte::P | Pte::A;
        if writable {
            f |= Pte::RW | Pte::D;
        }
        if user {
            f |= Pte::US;
        }
        if !exec && self.geo.entry_bytes == 8 {
            f |= Pte::NX;
        }
        if level > 1 {
            f |= Pte::PS;
        }
        f
    }

    /// Points the entry for `va` at `level` of shadow page `spage` to `child`; returns `child`.
    fn link(
        &mut self,
        vmm: &mut Vmm,
        spage: Hpa,
        va: Gva,
        level: u8,
        child: Hpa,
        key: SpKey,
    ) -> Hpa {
        let ea = spage.add(self.geo.entry_offset(va.raw(), level));
        let cur = self.read(&vmm.hmem, ea);
        let pae_root = self.geo.format == crate::config::PagingFormat::Pae && level == 3;
        let flags = if pae_root {
            Pte::P
        } else {
            Pte::P | Pte::RW | Pte::US | Pte::A
        };
        let want = Pte(child.raw() | flags);
        if cur != want {
            self.write(&mut vmm.hmem, ea, want);
            if let Some(p) = self.pages.get_mut(&key) {
                if !p.parents.contains(&ea) {
                    p.parents.push(ea);
                }
            }
        }
        child
    }

    fn prefetch(
        &mut self,
        gmem: &PhysMem<Gpa>,
        vmm: &mut Vmm,
        guest_table: u64,
        spage: Hpa,
        va: Gva,
        (w, u, x): (bool, bool, bool),
    ) {
        let geo = self.geo;
        let n = self.cfg.prefetch as u64;
        let idx = geo.index(va.raw(), 1);
        let first = idx & !(n.next_power_of_two() - 1);
        let per_table = 1u64 << geo.index_bits;
        for j in first..(first + n).min(per_table) {
            if j == idx {
                continue;
            }
            let gea = Gpa(guest_table + j * geo.entry_bytes as u64);
            let g = geo.read_entry(gmem, gea);
            if !g.present() || !g.accessed() {
                continue;
            }
            let sea = spage.add(j * geo.entry_bytes as u64);
            if self.read(&vmm.hmem, sea).present() {
                continue;
            }
            let Some((hpa, _)) = vmm.translate(Gpa(g.frame(geo.frame_mask()))) else {
                continue;
            };
            let flags = self.leaf_flags(
                w && g.writable() && g.dirty(),
                u && g.user(),
                x && g.executable(),
                1,
            );
            self.write(
                &mut vmm.hmem,
                sea,
                Pte((hpa.raw() & geo.frame_mask()) | flags),
            );
            self.stats.prefetched += 1;
        }
    }

    fn evict(&mut self, vmm: &mut Vmm) {
        self.stats.evictions += 1;
        let cur = self.current;
        let keys: Vec<SpKey> = self.pages.keys().copied().collect();
        let root_key = cur.map(|(g, _)| SpKey {
            gfn: g >> 12,
            level: self.geo.levels,
            direct: false,
        });
        for k in keys {
            if Some(k) != root_key {
                self.zap(vmm, k);
            }
        }
        if let (Some(c), Some(rk)) = (cur, root_key) {
            // Clear the root's entries: every child is gone.
            if let Some(p) = self.pages.get(&rk) {
                let hpa = p.hpa;
                vmm.hmem.zero_frame(hpa);
            }
            self.roots = vec![c];
            self.current = Some(c);
        }
    }

    /// A guest write to a page-table entry.
    pub fn guest_write(&mut self, vmm: &mut Vmm, w: &TableWrite) -> WriteKind {
        let gfn = w.addr >> 12;
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
        let off = w.addr & 0xfff;
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
                self.drop_entry(vmm, ea, level);
            }
        }
        let g = self.gfns.get_mut(&gfn).expect("present");
        g.flood += 1;
        if self.cfg.write_flood > 0 && g.flood >= self.cfg.write_flood {
            self.table_freed(vmm, gfn);
            self.stats.unshadowed += 1;
            return WriteKind::Emulated { unshadowed: true };
        }
        WriteKind::Emulated { unshadowed: false }
    }

    /// Clears one shadow entry, unlinking a child shadow page it pointed to.
    fn drop_entry(&mut self, vmm: &mut Vmm, ea: Hpa, level: u8) {
        let e = self.read(&vmm.hmem, ea);
        if !e.present() {
            return;
        }
        if level > 1 && !e.large() {
            let child = e.frame(self.geo.frame_mask());
            if let Some(ck) = self.by_hpa.get(&child).copied() {
                if let Some(cp) = self.pages.get_mut(&ck) {
                    cp.parents.retain(|&p| p != ea);
                }
            }
        }
        self.write(&mut vmm.hmem, ea, Pte(0));
    }

    /// Resyncs every out-of-sync page; returns how many.
    pub fn resync_all(&mut self, gmem: &PhysMem<Gpa>, vmm: &mut Vmm) -> u32 {
        let pages = std::mem::take(&mut self.oos);
        for &gfn in &pages {
            self.resync(gmem, vmm, gfn);
        }
        pages.len() as u32
    }

    /// Resyncs one out-of-sync leaf table: shadow entries that no longer match the guest's are
    /// dropped (they refill on use), and the table is write-protected again.
    fn resync(&mut self, gmem: &PhysMem<Gpa>, vmm: &mut Vmm, gfn: u64) {
        self.stats.resyncs += 1;
        if let Some(g) = self.gfns.get_mut(&gfn) {
            g.oos = false;
        }
        let key = SpKey {
            gfn,
            level: 1,
            direct: false,
        };
        let Some(p) = self.pages.get(&key) else {
            return;
        };
        let geo = self.geo;
        let mask = geo.frame_mask();
        let hpa = p.hpa;
        for i in 0..(1u64 << geo.index_bits) {
            let sea = hpa.add(i * geo.entry_bytes as u64);
            let s = self.read(&vmm.hmem, sea);
            if !s.present() {
                continue;
            }
            let gea = Gpa((gfn << 12) + i * geo.entry_bytes as u64);
            let g = geo.read_entry(gmem, gea);
            let same = g.present()
                && vmm
                    .translate(Gpa(g.frame(mask)))
                    .is_some_and(|(h, _)| h.raw() & mask == s.frame(mask))
                && (g.writable() || !s.writable())
                && (g.executable() || !s.executable());
            if !same {
                self.write(&mut vmm.hmem, sea, Pte(0));
            }
        }
    }

    /// A guest INVLPG of `va`: resyncs the out-of-sync leaf table that maps it and drops the
    /// shadow entry. Returns pages resynced.
    pub fn invlpg(
        &mut self,
        gmem: &PhysMem<Gpa>,
        gpt: &PageTable<Gpa>,
        vmm: &mut Vmm,
        va: Gva,
    ) -> u32 {
        let mut resynced = 0;
        if let Some((ea, _, _)) = gpt.leaf(gmem, va.raw()) {
            let gfn = ea >> 12;
            if self.gfns.get(&gfn).is_some_and(|g| g.oos) {
                self.oos.retain(|&x| x != gfn);
                self.resync(gmem, vmm, gfn);
                resynced += 1;
            }
        }
        if let Some(root) = self.root() {
            let geo = self.geo;
            let mut table = root.raw();
            let mut level = geo.levels;
            loop {
                let ea = Hpa(table + geo.entry_offset(va.raw(), level));
                let e = self.read(&vmm.hmem, ea);
                if !e.present() {
                    break;
                }
                if level == 1 || e.large() {
                    self.write(&mut vmm.hmem, ea, Pte(0));
                    break;
                }
                table = e.frame(geo.frame_mask());
                level -= 1;
            }
        }
        resynced
    }
}
