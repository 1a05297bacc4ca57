//! The L1 hypervisor both L1 kinds share: its memory, EPT12, its handler of an EPT violation
//! of its guest, and L0's side of that handler.

use super::super::exits::ExitReason;
use super::super::shared::Shared;
use crate::addr::{Gpa, Hpa, L1pa, PageSize};
use crate::config::{Bytes, HostConfig, L1Costs, NestedVirtConfig, SimConfig};
use crate::error::{Error, Result};
use crate::host::{Host, MemNames};
use crate::mem::{FrameAllocator, PhysMem};
use crate::mmu::Mmu;
use crate::paging::{Geometry, PageTable, Pte, TableWrite};

/// What an L1 hypervisor is built from (the run's configuration).
pub(in crate::vmm) struct L1Setup {
    /// The `[nested_virt]` section.
    cfg: NestedVirtConfig,
    /// L1's physical memory in bytes.
    bytes: u64,
    /// The L2 guest's physical memory in bytes.
    guest_bytes: u64,
    /// The allocator L1's kernel places frames with (the guest's: both are Linux).
    alloc: crate::config::AllocatorConfig,
    /// EPT12's format: the host's nested format.
    geo: Geometry,
    /// The run's seed.
    seed: u64,
}

impl L1Setup {
    /// The L1 hypervisor `cfg` (validated) describes, if it is a nested-virt run.
    pub(in crate::vmm) fn of(cfg: &SimConfig) -> Option<L1Setup> {
        let nv = cfg.nested_virt.as_ref()?;
        Some(L1Setup {
            cfg: nv.clone(),
            bytes: nv.l1_bytes(cfg.guest.memory.0),
            guest_bytes: cfg.guest.memory.0,
            alloc: cfg.guest.allocator.clone(),
            geo: Geometry::nested(cfg.host.nested_levels),
            seed: cfg.seed,
        })
    }

    /// L1's physical memory in bytes: what L0's nested tables map.
    pub(in crate::vmm) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The costs beyond the cost profile.
    pub(in crate::vmm) fn costs(&self) -> &L1Costs {
        &self.cfg.costs
    }

    /// The side of a shadow-paging L1 hypervisor that backs its guest: L1 memory, in which
    /// L1 maps each L2 page on first use to a 4 KiB frame of its own (L1's map of its guest's
    /// memory, a table of EPT12's format that no hardware walks; assumption: KVM's memslots
    /// and L1's host page tables, read functionally), recording every frame it allocates so
    /// L0 can back it. The map's root is backed by L0 at once (L1 booted before its guest).
    pub(in crate::vmm) fn guest_side(&self, hv: &mut Shared) -> Result<Host<L1pa>> {
        let cfg = HostConfig {
            memory: Bytes(self.bytes),
            allocator: self.alloc.clone(),
            nested_page_size: PageSize::Size4K,
            nested_levels: self.geo.levels,
        };
        let mut side: Host<L1pa> =
            Host::build(&cfg, self.guest_bytes, self.seed ^ 0x11ab_c0de, L1_NAMES)?;
        side.record_fresh();
        hv.host.back(side.npt.root.as_l0_gpa(), PageSize::Size4K)?;
        Ok(side)
    }
}

/// What L1 memory's out-of-memory errors name.
const L1_NAMES: MemNames = MemNames {
    space: "L1 physical",
    word: "L1",
    knob: "nested_virt.l1_memory",
};

/// The L1 hypervisor: its physical memory, the frames it hands out, and EPT12, which maps
/// its guest's (L2's) physical memory to its own.
pub(in crate::vmm) struct L1 {
    /// L1 physical memory (EPT12's bytes).
    pub(in crate::vmm) mem: PhysMem<L1pa>,
    alloc: FrameAllocator,
    /// EPT12 (the EPTP L1 gives its guest).
    pub(in crate::vmm) ept12: PageTable<Gpa, L1pa>,
    /// The costs beyond the cost profile.
    pub(in crate::vmm) costs: L1Costs,
    writes: Vec<TableWrite<L1pa>>,
    /// Frames allocated by the last fill.
    fresh: Vec<L1pa>,
}

/// What L1's handler of one EPT violation did.
pub(in crate::vmm) struct L1Fill<'a> {
    /// The EPT12 entries it wrote.
    pub(in crate::vmm) writes: &'a [TableWrite<L1pa>],
    /// The frames it allocated and zeroed: the L2 page and new EPT12 tables.
    pub(in crate::vmm) fresh: &'a [L1pa],
}

impl L1 {
    /// An L1 hypervisor with empty EPT12; its root frame is backed by L0 at once (L1 booted
    /// before its guest).
    pub(in crate::vmm) fn new(s: &L1Setup, hv: &mut Shared) -> Result<L1> {
        let mut mem = PhysMem::new(s.bytes);
        let mut alloc = FrameAllocator::new(s.bytes, &s.alloc, s.seed ^ 0x11ab_c0de);
        let ept12 = PageTable::new(s.geo, &mut mem, &mut || {
            alloc.alloc(PageSize::Size4K).map(L1pa::new)
        })
        .ok_or_else(|| oom("no frame for EPT12's root table"))?;
        hv.host.back(ept12.root.as_l0_gpa(), PageSize::Size4K)?;
        Ok(L1 {
            mem,
            alloc,
            ept12,
            costs: s.cfg.costs.clone(),
            writes: Vec::new(),
            fresh: Vec::new(),
        })
    }

    /// EPT12's translation of `gpa` (L2 physical).
    pub(in crate::vmm) fn translate(&self, gpa: Gpa) -> Option<L1pa> {
        self.ept12.lookup(&self.mem, gpa).map(|(a, _, _)| a)
    }

    /// The EPT12 table frames on `gpa`'s path, root first, as far as they are present.
    pub(in crate::vmm) fn path(&self, gpa: Gpa, out: &mut Vec<L1pa>) {
        out.clear();
        let geo = self.ept12.geo;
        let mut table = self.ept12.root;
        for level in (1..=geo.levels).rev() {
            out.push(table);
            let e = geo.read_entry(&self.mem, table.add(geo.entry_offset(gpa.raw(), level)));
            if !e.present() || geo.leaf_at(level, e).is_some() {
                return;
            }
            table = L1pa::new(e.frame(geo.frame_mask()));
        }
    }

    /// L1's handler of an EPT violation of its guest at `gpa`: an L1 frame for the 4 KiB
    /// page, mapped in EPT12 (new EPT12 tables allocated on the way).
    pub(in crate::vmm) fn fill(&mut self, gpa: Gpa) -> Result<L1Fill<'_>> {
        self.writes.clear();
        self.fresh.clear();
        let (alloc, fresh) = (&mut self.alloc, &mut self.fresh);
        let page = alloc
            .alloc(PageSize::Size4K)
            .map(L1pa::new)
            .ok_or_else(|| oom("L1's memory cannot back its guest"))?;
        fresh.push(page);
        self.ept12
            .map(
                &mut self.mem,
                &mut || {
                    let f = alloc.alloc(PageSize::Size4K).map(L1pa::new)?;
                    fresh.push(f);
                    Some(f)
                },
                gpa.page_base(PageSize::Size4K),
                page,
                PageSize::Size4K,
                Pte::RW | Pte::US | Pte::A | Pte::D,
                &mut self.writes,
            )
            .map_err(|e| oom(&format!("L1 cannot map its guest's page {gpa}: {e:?}")))?;
        Ok(L1Fill {
            writes: &self.writes,
            fresh: &self.fresh,
        })
    }
}

/// An EPT violation of L2 at `gpa` that EPT12 does not map, reflected through L0 into L1
/// (`l1_exit`: the nested round trip and L1's handler): L1 maps the page, and L0 backs the
/// frames it allocated ([`l0_touches`]). Returns what L1's handler did.
pub(in crate::vmm) fn reflect<'a>(
    l1: &'a mut L1,
    hv: &mut Shared,
    mmu: &mut Mmu,
    gpa: Gpa,
) -> Result<L1Fill<'a>> {
    let c = &l1.costs;
    hv.acct
        .charge(mmu, ExitReason::L1Exit, c.nested_round_trip + c.l1_fault);
    let fill = l1.fill(gpa)?;
    l0_touches(hv, mmu, fill.fresh)?;
    Ok(fill)
}

/// L0's side of L1's first touches of the frames `fresh`: backed when L1 allocates them
/// (eager backing, no exit), or on the touch by a nested fault of L1 (lazy backing): one
/// exit per frame EPT01 did not map yet.
pub(in crate::vmm) fn l0_touches(hv: &mut Shared, mmu: &mut Mmu, fresh: &[L1pa]) -> Result<()> {
    for &f in fresh {
        let gpa = f.as_l0_gpa();
        if hv.host.translate(gpa).is_some() {
            continue;
        }
        hv.host.back(gpa, PageSize::Size4K)?;
        if hv.lazy {
            hv.acct
                .charge(mmu, ExitReason::NestedFault, hv.costs.nested_fault);
        }
    }
    Ok(())
}

/// The composition L2 physical → L1 physical → host physical: what every translation of a
/// nested-virt run must agree with.
pub(in crate::vmm) fn p2m(l1: &L1, hv: &Shared, gpa: Gpa) -> Option<Hpa> {
    let a = l1.translate(gpa)?;
    hv.host.translate(a.as_l0_gpa()).map(|(h, _)| h)
}

/// A nested fault that the mode's tables cannot explain: the invariant every fill keeps was
/// broken.
pub(in crate::vmm) fn unexplained(gpa: Gpa, detail: &str) -> Error {
    Error::Check {
        event: 0,
        detail: format!("nested fault at {gpa} under nested virtualization: {detail}"),
    }
}

fn oom(reason: &str) -> Error {
    Error::OutOfMemory {
        space: "L1 physical",
        reason: format!("{reason} (raise nested_virt.l1_memory)"),
    }
}

/// The operations every nested-virt mode answers from its L1 hypervisor (`self.l1`): L1 backs
/// its guest's memory on first use, whatever L0's backing, so nothing happens when the L2
/// guest allocates frames; every translation must agree with EPT01 ∘ EPT12 ([`p2m`]).
macro_rules! l1_ops {
    () => {
        fn back(&mut self, _: &mut Shared, _: &OsEffects) -> Result<()> {
            Ok(())
        }

        fn p2m(&self, hv: &Shared, gpa: Gpa) -> Option<Hpa> {
            p2m(&self.l1, hv, gpa)
        }
    };
}
pub(in crate::vmm) use l1_ops;
