//! The hardware walk of tables that live in host memory and map gVA → hPA directly: shadow
//! page tables (DESIGN.md "Shadow"). The processor walks them exactly like native tables (a 1D
//! walk, references counted at `L4`..`L1`); the hypervisor, not the walker, keeps their
//! accessed and dirty state, so no A/D updates are made here.

use super::guest::{Access, WalkFault, WalkOutcome};
use super::step::COL_G;
use super::WalkHw;
use crate::addr::{Gva, Hpa, PageSize};
use crate::hw::tlb::Translation;
use crate::mem::PhysMem;
use crate::paging::Geometry;

/// Walks the host-resident tables rooted at `root` for `va`.
pub fn walk(
    hw: &mut WalkHw,
    hmem: &PhysMem<Hpa>,
    geo: Geometry,
    root: Hpa,
    va: Gva,
    access: Access,
    cycles: &mut u64,
) -> WalkOutcome {
    hw.stats.walks += 1;
    let va_raw = va.raw();
    let mask = geo.frame_mask();
    let mut table = root.raw();
    let mut level = geo.levels;
    let (mut writable, mut user, mut exec) = (true, true, true);
    loop {
        let entry = Hpa(table + geo.entry_offset(va_raw, level));
        *cycles += hw.pe_ref(entry, COL_G, level as usize);
        let e = geo.read_entry(hmem, entry);
        if !e.present() {
            hw.stats.walk_faults += 1;
            return WalkOutcome::Fault(WalkFault::NotPresent { level });
        }
        writable &= e.writable();
        user &= e.user();
        exec &= e.executable();
        let leaf = if level == 1 {
            Some(PageSize::Size4K)
        } else if e.large() {
            geo.leaf_size(level)
        } else {
            None
        };
        if let Some(size) = leaf {
            if (access.write && !writable) || (access.fetch && !exec) {
                hw.stats.walk_faults += 1;
                return WalkOutcome::Fault(WalkFault::Protection);
            }
            let t = Translation {
                page: Hpa(e.frame(mask) & !size.offset_mask()),
                size,
                writable,
                user,
                executable: exec,
                dirty: writable,
                global: e.global(),
            };
            return WalkOutcome::Done(t, size);
        }
        table = e.frame(mask);
        level -= 1;
    }
}
