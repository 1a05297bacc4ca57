//! The memory-management hardware of one core: the TLB hierarchy, the walk hardware (page-walk
//! cache, Nested TLB, paging-structure caches, the cache hierarchy) and the one walk, behind the
//! operations the processor offers — look up, walk, invalidate, flush — (DESIGN.md "Hardware").
//!
//! The MMU walks whatever [`Tables`] the hypervisor hands it; it never asks which paging mode
//! is active, and it uses the same caches in every mode. It knows nothing of hypervisors: a
//! fault is a value it returns ([`WalkFault`]), and flushes are requested from above.
//!
//! **The D-assist** (Intel SDM Vol. 3A §4.8, §4.10.2.3): a store that hits a TLB entry whose
//! dirty bit is clear does not write through it; the processor re-walks the tables to set the
//! leaf's D bit (a real walk, with real page-entry references) and refills the entry. vmmu
//! models it in every mode and counts it as a walk and by itself ([`MmuStats::d_assists`]). A
//! store to a TLB entry without write permission faults without a walk (SDM §4.10.4.3 lets the
//! processor use the TLB entry).

use crate::addr::{Gva, Hpa, PageSize};
use crate::config::MachineConfig;
use crate::hw::tlb::{Tag, TlbHierarchy, TlbLevel, TlbSide, Translation};
use crate::walk::{Access, Tables, WalkFault, WalkHw, Walker};
use serde::Serialize;

/// The most 4 KiB pieces of a page one INVLPG invalidates one by one (a 2 MiB or 4 MiB page);
/// beyond, the address space's entries are dropped.
pub const INVLPG_SPAN: u64 = 1024;

/// Counters of the MMU beyond its structures' own.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct MmuStats {
    /// Cycles of L2-TLB hits, walks (references, PWC / NTLB / PSC lookups) and A/D updates.
    pub translation_cycles: u64,
    /// Cycles of data references beyond an L1 hit.
    pub data_cycles: u64,
    /// Stores that hit a clean TLB entry and re-walked to set D (also counted in `walks`).
    pub d_assists: u64,
    /// Accesses that a TLB entry forbids (a store to a read-only entry: copy-on-write, or a
    /// shadow entry kept read-only to track D): a fault without a walk.
    pub tlb_hit_faults: u64,
    /// Walks that ended in a fault, for instruction fetches.
    pub walk_faults_instr: u64,
    /// Walks that ended in a fault, for loads and stores.
    pub walk_faults_data: u64,
    /// CR3 writes executed (context switches, exec).
    pub cr3_writes: u64,
    /// INVLPGs executed.
    pub invlpgs: u64,
    /// Flushes of one address space (a CR3 write without PCIDs, or a flush of a whole process).
    pub context_flushes: u64,
    /// Flushes of everything the VM has cached (a world switch without VPIDs, a mode switch).
    pub vm_flushes: u64,
    /// Flushes of the paging-structure caches alone (after the hypervisor removed shadow
    /// tables they may point to).
    pub psc_flushes: u64,
}

/// What a TLB lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The access may go ahead at this host address.
    Hit(Hpa),
    /// No entry: walk.
    Miss,
    /// A store found a clean entry: walk to set D (the D-assist).
    Clean,
    /// The entry forbids the access: fault without a walk.
    Denied,
}

/// What the MMU answers now without searching, taken out of it for a run of references: the
/// accesses [`Mmu::lookup`] answers with a [`Lookup::Hit`] from the TLBs' remembered L1 hits
/// (hw/tlb.rs, "Speed"), and the data line the caches answer as an L1 hit from their
/// remembered line (hw/cache.rs, "Speed"). A copy in the caller's registers: a translation is
/// a compare and an add, a data reference to the remembered line a compare and a count. It is
/// exact while nothing but such references and [`Mmu::data_remembered`] reaches the MMU (they
/// change neither the TLBs nor the caches' order), and [`Mmu::count_remembered`] adds its
/// counts back.
#[derive(Clone, Copy, Debug)]
pub struct Remembered {
    /// Per kind of access ([`Remembered::kind`]: load, store, fetch, and a store-fetch that
    /// never occurs): the 4 KiB page number it hits (`u64::MAX`: none). A store hits the data
    /// side's page when its entry is writable and dirty (otherwise the lookup is
    /// [`Lookup::Denied`] or [`Lookup::Clean`]), a fetch the instruction side's page when its
    /// entry is executable.
    vpn: [u64; 4],
    /// Per kind of access: the host address of that 4 KiB page.
    base: [u64; 4],
    /// The data caches are modelled.
    data_on: bool,
    /// `log2` of the line size.
    line_shift: u32,
    /// The remembered L1 line (`u64::MAX`: none).
    line: u64,
    /// Data references answered by `line`.
    line_hits: u64,
}

impl Remembered {
    /// The index of `access` in the per-kind arrays.
    #[inline(always)]
    fn kind(access: Access) -> usize {
        ((access.fetch as usize) << 1) | access.write as usize
    }

    /// The host address of `va` for `access` when a remembered hit answers it with
    /// [`Lookup::Hit`], else `None` ([`Mmu::lookup`] decides). Counted by the caller, by side,
    /// in [`Mmu::count_remembered`].
    #[inline(always)]
    pub fn translate(&self, va: Gva, access: Access) -> Option<Hpa> {
        let k = Self::kind(access);
        (va.raw() >> 12 == self.vpn[k])
            .then(|| Hpa::new(self.base[k].wrapping_add(va.raw() & 0xfff)))
    }
}

/// The MMU of one core.
pub struct Mmu {
    /// The TLBs.
    pub tlb: TlbHierarchy,
    /// The walk hardware and the caches.
    pub hw: WalkHw,
    /// Counters.
    pub stats: MmuStats,
    vpid: u16,
    pcid: bool,
    l1_latency: u32,
    l2_tlb_latency: u64,
    data_on: bool,
    pwc_flush_on_tlb_flush: bool,
}

impl Mmu {
    /// The MMU of machine `m`, tagging its entries with `vpid` (0: the host, or no VPIDs).
    pub fn new(m: &MachineConfig, vpid: u16) -> Self {
        Mmu {
            tlb: TlbHierarchy::new(&m.tlb),
            hw: WalkHw::new(m),
            stats: MmuStats::default(),
            vpid,
            pcid: m.tlb.pcid,
            l1_latency: m.caches.levels.first().map_or(0, |l| l.latency),
            l2_tlb_latency: m.tlb.l2_latency as u64,
            data_on: m.caches.data && !m.caches.levels.is_empty(),
            pwc_flush_on_tlb_flush: m.pwc.flush_on_tlb_flush,
        }
    }

    /// The tag of the address space with process-context id `pcid` (ignored without PCIDs).
    #[inline]
    pub fn tag(&self, pcid: u16) -> Tag {
        Tag {
            pcid: if self.pcid { pcid } else { 0 },
            vpid: self.vpid,
        }
    }

    /// Whether TLB entries carry PCIDs (a CR3 write then keeps other address spaces' entries).
    #[inline]
    pub fn pcid(&self) -> bool {
        self.pcid
    }

    /// Looks `va` up in the TLBs for `access`: what it found, and its cycles this time (the
    /// L2 TLB's latency when the L2 TLB answered, else 0).
    #[inline]
    pub fn lookup(&mut self, va: Gva, access: Access, tag: Tag) -> (Lookup, u64) {
        let side = side(access);
        let Some((level, t)) = self.tlb.lookup_for(va, side, tag, access.write) else {
            return (Lookup::Miss, 0);
        };
        let cycles = if level == TlbLevel::L2 {
            self.stats.translation_cycles += self.l2_tlb_latency;
            self.l2_tlb_latency
        } else {
            0
        };
        let found = match answer(&t, access) {
            Answer::Denied => {
                self.stats.tlb_hit_faults += 1;
                Lookup::Denied
            }
            Answer::Clean => {
                self.stats.d_assists += 1;
                Lookup::Clean
            }
            Answer::Hit => Lookup::Hit(t.page.add(va.page_offset(t.size))),
        };
        (found, cycles)
    }

    /// Whether [`remembered`](Self::remembered) could answer a reference to `va` with
    /// `access`: its page is the remembered L1 hit of its side with `tag`. False means a run
    /// of remembered hits starting there would be empty, so a caller can skip building one.
    #[inline(always)]
    pub fn may_remember(&self, va: Gva, access: Access, tag: Tag) -> bool {
        self.tlb
            .remembered(side(access), tag)
            .is_some_and(|(vpn, _)| vpn == va.raw() >> 12)
    }

    /// What the MMU answers now without searching (see [`Remembered`]), for address space
    /// `tag`: loads of the data side's remembered page, stores when its entry is writable and
    /// dirty, fetches of the instruction side's page when its entry is executable — with the
    /// result [`lookup`](Self::lookup) would return — and data references to the remembered
    /// line. Give it back to [`count_remembered`](Self::count_remembered) before any other
    /// operation.
    #[inline(always)]
    pub fn remembered(&self, tag: Tag) -> Remembered {
        let mut r = Remembered {
            vpn: [u64::MAX; 4],
            base: [0; 4],
            data_on: self.data_on,
            line_shift: self.hw.caches.line_shift(),
            line: self.hw.caches.remembered_line(),
            line_hits: 0,
        };
        let kinds = [(false, false), (true, false), (false, true)];
        for (write, fetch) in kinds {
            let Some((vpn, t)) = self.tlb.remembered(side(Access { write, fetch }), tag) else {
                continue;
            };
            if answer(t, Access { write, fetch }) != Answer::Hit {
                continue;
            }
            let k = Remembered::kind(Access { write, fetch });
            r.vpn[k] = vpn;
            r.base[k] = t.page.add(Gva::new(vpn << 12).page_offset(t.size)).raw();
        }
        r
    }

    /// [`data`](Self::data) of `hpa` during a run of [`Remembered`] hits: counted in `r` when
    /// it is to the remembered line (an L1 hit, no cycles beyond it), else made here. Returns
    /// its cycles beyond an L1 hit.
    #[inline(always)]
    pub fn data_remembered(&mut self, r: &mut Remembered, hpa: Hpa) -> u64 {
        if !r.data_on {
            return 0;
        }
        if hpa.raw() >> r.line_shift == r.line {
            r.line_hits += 1;
            0
        } else {
            let cycles = self.data(hpa);
            r.line = self.hw.caches.remembered_line();
            cycles
        }
    }

    /// Counts what `r` answered: `loads_stores` data-side and `fetches` instruction-side L1
    /// TLB hits, and its remembered line's L1 hits.
    #[inline(always)]
    pub fn count_remembered(&mut self, r: &Remembered, loads_stores: u64, fetches: u64) {
        self.tlb.count_remembered(TlbSide::Data, loads_stores);
        self.tlb.count_remembered(TlbSide::Instr, fetches);
        self.hw.caches.count_remembered(r.line_hits);
    }

    /// Walks `tables` for `va` and fills the TLBs with the result; returns the host address of
    /// the access, or the fault, and the walk's cycles this time.
    pub fn walk(
        &mut self,
        va: Gva,
        access: Access,
        tag: Tag,
        tables: Tables<'_>,
    ) -> (Result<Hpa, WalkFault>, u64) {
        let mut cycles = 0u64;
        let out =
            Walker::new(&mut self.hw, va, access, tag.raw(), self.vpid).walk(tables, &mut cycles);
        self.stats.translation_cycles += cycles;
        let out = match out {
            Ok(t) => {
                self.tlb.fill(va, side(access), tag, t);
                Ok(t.page.add(va.page_offset(t.size)))
            }
            Err(f) => {
                if access.fetch {
                    self.stats.walk_faults_instr += 1;
                } else {
                    self.stats.walk_faults_data += 1;
                }
                Err(f)
            }
        };
        (out, cycles)
    }

    /// A data reference (load or store) to `hpa` through the cache hierarchy, when the data
    /// caches are modelled; returns its latency beyond an L1 hit (0 when they are not).
    /// Always inlined: it is on every reference's path, and a call costs more than its test.
    #[inline(always)]
    pub fn data(&mut self, hpa: Hpa) -> u64 {
        if self.data_on {
            let (_, lat) = self.hw.caches.access(hpa, 0);
            let cycles = lat.saturating_sub(self.l1_latency) as u64;
            self.stats.data_cycles += cycles;
            cycles
        } else {
            0
        }
    }

    /// The L1 data cache's load-to-use latency when data references are modelled, else 0:
    /// what a load whose address depends on another waits beyond that load's data.
    pub fn l1_latency(&self) -> u32 {
        if self.data_on {
            self.l1_latency
        } else {
            0
        }
    }

    /// INVLPG of `va`, which the guest maps with a page of `size`, in the address space `tag`:
    /// drops every TLB entry of that page — all of them when a large page is held as several
    /// smaller (splintered) entries — and the tag's paging-structure-cache entries (Intel SDM
    /// Vol. 3A §4.10.4.1). A page of more than [`INVLPG_SPAN`] 4 KiB pieces drops the tag's
    /// non-global entries instead, an over-invalidation the SDM allows.
    pub fn invlpg(&mut self, va: Gva, size: PageSize, tag: Tag) {
        self.stats.invlpgs += 1;
        let pieces = size.bytes() / PageSize::Size4K.bytes();
        if pieces > INVLPG_SPAN {
            self.drop_context(tag);
        } else {
            let base = va.page_base(size);
            for i in 0..pieces {
                self.tlb.invalidate_page(base.add(i << 12), tag);
            }
        }
        self.hw.psc_guest.flush_tag(tag.raw());
    }

    /// Drops the TLB entries of a page after a fault on it (SDM §4.10.4.1: a page fault
    /// invalidates the entries for the faulting address).
    pub fn fault_invalidate(&mut self, va: Gva, tag: Tag) {
        self.tlb.invalidate_page(va, tag);
    }

    /// Flushes one address space's non-global translations: its PCID's TLB entries (without
    /// PCIDs, the VM's non-global entries: a CR3 write), its paging-structure-cache entries,
    /// and the PWC where the machine flushes it with the TLB (seed 002 Table 2).
    pub fn flush_context(&mut self, tag: Tag) {
        self.stats.context_flushes += 1;
        self.drop_context(tag);
        self.hw.psc_guest.flush_tag(tag.raw());
        if self.pwc_flush_on_tlb_flush {
            self.hw.pwc.flush();
        }
    }

    fn drop_context(&mut self, tag: Tag) {
        if self.pcid {
            self.tlb.flush_tag(tag);
        } else {
            self.tlb.flush_nonglobal(self.vpid);
        }
    }

    /// Flushes everything the VM has cached: TLBs, page-walk cache, paging-structure caches
    /// and the Nested TLB (a world switch without VPIDs; a change of paging mode, after which
    /// no cached translation or table pointer of the other mode may be used — SDM §28.3.3.1,
    /// AMD APM Vol. 2 §15.16.1).
    pub fn flush_vm(&mut self) {
        self.stats.vm_flushes += 1;
        self.tlb.flush_all();
        self.hw.pwc.flush();
        self.hw.psc_guest.flush();
        self.hw.psc_nested.flush();
        self.hw.ntlb.flush();
    }

    /// Flushes the paging-structure caches: the hypervisor removed shadow tables that cached
    /// entries may point to (what INVVPID or an INVLPG by the hypervisor also drops).
    pub fn flush_paging_structures(&mut self) {
        self.stats.psc_flushes += 1;
        self.hw.psc_guest.flush();
    }

    /// Adds `o`'s counters to these (the totals of several cores).
    pub fn absorb_stats(&mut self, o: &Mmu) {
        let (s, t) = (&mut self.stats, &o.stats);
        s.translation_cycles += t.translation_cycles;
        s.data_cycles += t.data_cycles;
        s.d_assists += t.d_assists;
        s.tlb_hit_faults += t.tlb_hit_faults;
        s.walk_faults_instr += t.walk_faults_instr;
        s.walk_faults_data += t.walk_faults_data;
        s.cr3_writes += t.cr3_writes;
        s.invlpgs += t.invlpgs;
        s.context_flushes += t.context_flushes;
        s.vm_flushes += t.vm_flushes;
        s.psc_flushes += t.psc_flushes;
        self.tlb.absorb_stats(&o.tlb);
        self.hw.absorb_stats(&o.hw);
    }

    /// Exchanges the cache levels shared by all cores with `o`'s (the MMU of the core that
    /// runs next takes them).
    pub fn swap_shared(&mut self, o: &mut Mmu) {
        self.hw.caches.swap_shared(&mut o.hw.caches);
    }

    /// Zeroes every counter (the end of a warm-up); cached contents stay.
    pub fn reset_stats(&mut self) {
        self.stats = MmuStats::default();
        self.tlb.reset_stats();
        self.hw.reset_stats();
    }
}

/// What a TLB entry that matches an access does with it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Translates it.
    Hit,
    /// A store to an entry whose dirty bit is clear: the D-assist walks.
    Clean,
    /// The entry forbids the access: a fault without a walk (SDM Vol. 3A §4.10.4.3).
    Denied,
}

/// What the matching entry `t` does with `access` (the module's "D-assist").
#[inline(always)]
fn answer(t: &Translation, access: Access) -> Answer {
    if t.denies(access.write, access.fetch) {
        Answer::Denied
    } else if access.write && !t.dirty {
        Answer::Clean
    } else {
        Answer::Hit
    }
}

#[inline]
fn side(access: Access) -> TlbSide {
    if access.fetch {
        TlbSide::Instr
    } else {
        TlbSide::Data
    }
}
