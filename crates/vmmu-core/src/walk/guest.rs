//! The guest-dimension walker: reads the guest's tables from `CR3` down to the leaf
//! (Intel SDM Vol. 3A §4.5; seed 002 Figure 1(a) for native, the `G` column of Figure 1(b)).
//!
//! Each guest table's guest-physical address is first translated by the [`NestedDim`] (the row
//! of that level); the entry is then referenced at `{G,gLk}`. A large-page leaf ends the walk
//! early (seed 002 §2: "a bypass from {G,gL2} to step 21"). The data's guest-physical address
//! is translated in the `gPA` row, and the TLB entry gets the smaller of the guest and nested
//! page sizes (splintering, seed 002 §6.5).
//!
//! Accessed bits are set on every entry the walk uses and the dirty bit on a writable leaf for
//! a write; each is an [`WalkHw::ad_update`], not a walk reference. Nested-table A/D bits (an
//! optional EPT feature) are not modelled.

use super::step::{COL_G, ROW_GPA};
use super::{NestedDim, WalkHw};
use crate::addr::{Gpa, Gva, Hpa, PageSize};
use crate::hw::tlb::Translation;
use crate::mem::PhysMem;
use crate::paging::{PageTable, Pte, TableWrite};

/// Why a walk did not produce a translation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WalkFault {
    /// A guest entry was not present (a guest page fault the guest kernel handles).
    NotPresent {
        /// Level of the missing entry.
        level: u8,
    },
    /// The guest leaf forbids the access (write to read-only, fetch from NX, user to supervisor).
    Protection,
    /// A nested entry was missing for this guest-physical address (EPT violation / NPF).
    Nested {
        /// The guest-physical address that could not be translated.
        gpa: Gpa,
    },
}

/// The result of a walk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WalkOutcome {
    /// The translation to fill into the TLB, and the guest page size of the leaf.
    Done(Translation, PageSize),
    /// The walk ended in a fault.
    Fault(WalkFault),
}

/// What the walk is for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Access {
    /// A store or read-modify-write.
    pub write: bool,
    /// An instruction fetch.
    pub fetch: bool,
}

/// Walks the guest tables `gpt` (stored in `gmem`) for `va`, with `nested` translating every
/// guest-physical address. `psc_tag` tags paging-structure-cache entries (VPID and PCID).
/// Adds the walk's latency to `cycles`. A/D updates are written to `gmem` and logged in `log`.
#[allow(clippy::too_many_arguments)]
pub fn walk<N: NestedDim>(
    hw: &mut WalkHw,
    nested: &mut N,
    gmem: &mut PhysMem<Gpa>,
    gpt: &PageTable<Gpa>,
    va: Gva,
    access: Access,
    psc_tag: u32,
    cycles: &mut u64,
    log: &mut Vec<TableWrite>,
) -> WalkOutcome {
    let geo = gpt.geo;
    let va_raw = va.raw();
    let mut table = gpt.root.raw();
    let mut level = geo.levels;
    hw.stats.walks += 1;
    let use_psc = hw.uses_psc() && geo.levels >= 4;
    if use_psc {
        *cycles += hw.psc_latency as u64;
        if let Some((l, base)) = hw.psc_guest.lookup(va_raw, psc_tag, geo.levels) {
            hw.stats.psc_hits += 1;
            table = base;
            level = l - 1;
        }
    }
    let mask = geo.frame_mask();
    let (mut writable, mut user, mut exec) = (true, true, true);
    loop {
        let row = level as usize;
        let Some((table_hpa, _)) = nested.translate(hw, Gpa(table), row, cycles) else {
            hw.stats.walk_faults += 1;
            return WalkOutcome::Fault(WalkFault::Nested { gpa: Gpa(table) });
        };
        let off = geo.entry_offset(va_raw, level);
        let entry_hpa = table_hpa.add(off);
        *cycles += hw.pe_ref(entry_hpa, COL_G, row);
        let entry_gpa = Gpa(table + off);
        let e = geo.read_entry(gmem, entry_gpa);
        if !e.present() {
            hw.stats.walk_faults += 1;
            return WalkOutcome::Fault(WalkFault::NotPresent { level });
        }
        let leaf_size = if level == 1 {
            Some(PageSize::Size4K)
        } else if e.large() {
            geo.leaf_size(level)
        } else {
            None
        };
        // The PAE PDPT entry has no RW/US bits (Intel SDM §4.4.1): it restricts nothing.
        let restricts = !(geo.levels == 3
            && level == 3
            && geo.entry_bytes == 8
            && geo.format == crate::config::PagingFormat::Pae);
        if restricts {
            writable &= e.writable();
            user &= e.user();
            exec &= e.executable();
        }
        if let Some(gsize) = leaf_size {
            if (access.write && !writable) || (access.fetch && !exec) {
                hw.stats.walk_faults += 1;
                return WalkOutcome::Fault(WalkFault::Protection);
            }
            let mut bits = 0;
            if !e.accessed() {
                bits |= Pte::A;
            }
            if access.write && !e.dirty() {
                bits |= Pte::D;
            }
            if bits != 0 {
                gpt.set_bits(gmem, entry_gpa.raw(), level, bits, log);
                *cycles += hw.ad_update(entry_hpa);
            }
            let data_gpa = Gpa((e.frame(mask) & !gsize.offset_mask()) | va.page_offset(gsize));
            let Some((data_hpa, nsize)) = nested.translate(hw, data_gpa, ROW_GPA, cycles) else {
                hw.stats.walk_faults += 1;
                return WalkOutcome::Fault(WalkFault::Nested { gpa: data_gpa });
            };
            let size = gsize.min(nsize);
            let t = Translation {
                page: Hpa(data_hpa.raw() & !size.offset_mask()),
                size,
                writable,
                user,
                executable: exec,
                dirty: e.dirty() || access.write,
                global: e.global(),
            };
            return WalkOutcome::Done(t, gsize);
        }
        if !e.accessed() && restricts {
            gpt.set_bits(gmem, entry_gpa.raw(), level, Pte::A, log);
            *cycles += hw.ad_update(entry_hpa);
        }
        let next = e.frame(mask);
        if use_psc && level >= 2 {
            hw.psc_guest.fill(va_raw, psc_tag, level, next);
        }
        table = next;
        level -= 1;
    }
}
