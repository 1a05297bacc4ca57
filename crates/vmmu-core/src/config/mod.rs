//! Typed, strict configuration (STYLE.md rule 4).
//!
//! A simulation is described by one [`SimConfig`]: the machine (a preset from `presets/` or a
//! TOML file, with the guest kernel's costs on that core), the paging mode, the guest's paging
//! format and page-size use, the host's memory and nested page size, the hypervisor (cost
//! profile, technique, shadow pager, mode switches), the warm-up and the seed. This module
//! holds the types; every struct denies unknown fields and defaults live here and only here.
//! [`load`] reads presets, profiles and overrides; [`validate`] checks every cross-field rule
//! once before anything is built, with errors that name the dotted path of the field
//! (`machine.tlb.l1d[0].ways`).
//!
//! `--set dotted.path=value` overrides go through [`SimConfig::from_toml_with_overrides`]: the
//! config is expanded with all its defaults, the path must exist in it, and the value is parsed
//! as a TOML value (falling back to a string), so a typo is an error, never a silent no-op.

mod agile;
mod load;
mod nested_virt;
mod policy;
mod validate;

pub use agile::AgileConfig;
pub use load::{build, load_machine, load_profile, PRESETS, PROFILES};
pub use nested_virt::{L1Costs, L1Kind, NestedVirtConfig, L1_PROFILES};
pub use policy::{
    scaled, CostModelConfig, Dav2mConfig, PolicyConfig, TransReset, WindowConfig, POLICY_KINDS,
};

use crate::addr::{parse_bytes, PageSize};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// A byte quantity written as an integer or a string such as `"64K"`, `"4G"`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default)]
pub struct Bytes(pub u64);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let b = self.0;
        let text = if b != 0 && b.is_multiple_of(1 << 30) {
            format!("{}G", b >> 30)
        } else if b != 0 && b.is_multiple_of(1 << 20) {
            format!("{}M", b >> 20)
        } else if b != 0 && b.is_multiple_of(1 << 10) {
            format!("{}K", b >> 10)
        } else {
            return s.serialize_u64(b);
        };
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Bytes(n)),
            Raw::S(s) => parse_bytes(&s).map(Bytes).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "`{s}` is not a byte size (write e.g. 4096, \"64K\", \"2M\", \"4G\")"
                ))
            }),
        }
    }
}

/// The paging regime of the VM (DESIGN.md "The model").
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No hypervisor: one walk of the guest tables, guest physical = machine physical.
    #[default]
    Native,
    /// Nested paging (AMD NPT / Intel EPT): the 2D walk of seed 002.
    Nested,
    /// Shadow paging: the hypervisor's software MMU keeps gVA → hPA tables the hardware walks
    /// like native ones (with `technique = "hvm"`); `pv` and `previrt` use direct paging.
    Shadow,
    /// Shadow and nested paging in turn, switched by a policy (`[policy]`, docs/policies.md);
    /// never the state of the hypervisor, which is always in one of the two.
    Adaptive,
    /// Nested virtualization: the guest is an L2 guest of an L1 hypervisor that runs on the
    /// L0 host (`[nested_virt]`: the L1 kind and the walk that results).
    #[serde(rename = "nested-virt")]
    NestedVirt,
    /// Agile paging (Gandhi, Hill & Swift, ISCA 2016): one walk starts in the shadow tables
    /// and continues in nested mode below a switching entry (`[agile]`: the policy moving
    /// subtrees between the two).
    Agile,
}

impl Mode {
    /// The name used in configs and results.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Nested => "nested",
            Mode::Shadow => "shadow",
            Mode::Adaptive => "adaptive",
            Mode::NestedVirt => "nested-virt",
            Mode::Agile => "agile",
        }
    }

    /// Whether a hypervisor runs below the guest (every mode but native).
    pub const fn virtualized(self) -> bool {
        match self {
            Mode::Native => false,
            Mode::Nested | Mode::Shadow | Mode::Adaptive | Mode::NestedVirt | Mode::Agile => true,
        }
    }

    /// Whether the run may use shadow (or direct) paging, whose intercepted MMU operations
    /// reach the hypervisor by `hypervisor.technique`: shadow and adaptive runs.
    pub const fn uses_technique(self) -> bool {
        match self {
            Mode::Shadow | Mode::Adaptive => true,
            Mode::Native | Mode::Nested | Mode::NestedVirt | Mode::Agile => false,
        }
    }
}

/// One of the two paging modes a hypervisor can switch a running VM between (seed 001 §5):
/// what a policy starts in and chooses, and what the oracle schedules. Shadow paging here is
/// the trap-and-emulate kind (technique `hvm`), the only one that can switch.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VirtMode {
    /// Shadow paging (seed 001 Figure 8 starts there "purely for convenience").
    #[default]
    Shadow,
    /// Nested paging.
    Nested,
}

impl VirtMode {
    /// Both, shadow first (the order of the oracle's two simulations).
    pub const BOTH: [VirtMode; 2] = [VirtMode::Shadow, VirtMode::Nested];

    /// The name used in configs and results (`shadow`, `nested`).
    pub const fn name(self) -> &'static str {
        self.mode().name()
    }

    /// The other one: where a switch from this one goes.
    pub const fn other(self) -> VirtMode {
        match self {
            VirtMode::Shadow => VirtMode::Nested,
            VirtMode::Nested => VirtMode::Shadow,
        }
    }

    /// The run mode that stays in this one throughout.
    pub const fn mode(self) -> Mode {
        match self {
            VirtMode::Shadow => Mode::Shadow,
            VirtMode::Nested => Mode::Nested,
        }
    }
}

/// x86 paging formats (Intel SDM Vol. 3A §4.3–4.5; AMD APM Vol. 2 §5.2–5.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PagingFormat {
    /// 32-bit paging: 2 levels of 1024 4-byte entries; 4 KiB and 4 MiB (PSE) pages.
    #[serde(rename = "x86_32")]
    X86_32,
    /// PAE: a 4-entry PDPT plus 2 levels of 512 8-byte entries; 4 KiB and 2 MiB pages.
    Pae,
    /// Long mode, 4 levels, 48-bit virtual addresses; 4 KiB, 2 MiB, 1 GiB pages.
    #[default]
    Long4,
    /// Long mode with LA57, 5 levels, 57-bit virtual addresses.
    Long5,
}

/// How the guest uses page sizes for the memory it maps.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub enum GuestPageSize {
    /// The base page, 4 KiB, as Linux maps memory: 2 MiB pages only where transparent huge
    /// pages (`guest.thp`) or hugetlbfs (`MAP_HUGETLB` with `guest.hugetlb_pages`) give them.
    #[default]
    #[serde(rename = "4K")]
    Size4K,
    /// 2 MiB (4 MiB in 32-bit paging) wherever a region is aligned and the guest allocator has a
    /// contiguous block; 4 KiB elsewhere.
    #[serde(rename = "2M")]
    Size2M,
    /// 1 GiB wherever aligned and available, else 2 MiB, else 4 KiB.
    #[serde(rename = "1G")]
    Size1G,
    /// The same pages as `2M` (an area shorter than 2 MiB holds no aligned 2 MiB block, so
    /// "areas flagged huge or at least 2 MiB long get 2 MiB pages" is `2M`'s rule), kept as
    /// its own name for configurations that use it. Linux's THP is `4K` with `guest.thp`.
    #[serde(rename = "mixed")]
    Mixed,
}

/// Linux's transparent huge pages mode (`/sys/kernel/mm/transparent_hugepage/enabled`,
/// Documentation/admin-guide/mm/transhuge.rst), honoured where `guest.page_size` is `4K`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Thp {
    /// No transparent huge pages (`MADV_COLLAPSE` still collapses, as in Linux).
    Never,
    /// Only ranges the program advised with `MADV_HUGEPAGE` (Ubuntu's and Debian's default).
    #[default]
    Madvise,
    /// Every anonymous private area, except ranges advised `MADV_NOHUGEPAGE` (the upstream
    /// Kconfig default, `TRANSPARENT_HUGEPAGE_ALWAYS`).
    Always,
}

/// khugepaged, the kernel thread that collapses 4 KiB-mapped ranges into huge pages
/// (`/sys/kernel/mm/transparent_hugepage/khugepaged/`); the defaults are Linux's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KhugepagedConfig {
    /// Pages scanned per wake-up (`pages_to_scan`; Linux: 8 × 512 = 4096); each 2 MiB range
    /// examined counts 512.
    #[serde(default = "default_pages_to_scan")]
    pub pages_to_scan: u64,
    /// Guest time between wake-ups, in milliseconds (`scan_sleep_millisecs`; Linux: 10000).
    /// The guest's clock is retired instructions at the core's base CPI and frequency
    /// (docs/model.md, "Page sizes"); 0 turns khugepaged off.
    #[serde(default = "default_scan_sleep")]
    pub scan_sleep_millisecs: u64,
    /// The most not-present entries a range may have and still collapse (`max_ptes_none`;
    /// Linux: 511, so one present page suffices).
    #[serde(default = "default_max_ptes_none")]
    pub max_ptes_none: u32,
    /// The most entries mapping copy-on-write shared pages a range may have and still
    /// collapse (`max_ptes_shared`; Linux: 256).
    #[serde(default = "default_max_ptes_shared")]
    pub max_ptes_shared: u32,
}

fn default_pages_to_scan() -> u64 {
    4096
}
fn default_scan_sleep() -> u64 {
    10_000
}
fn default_max_ptes_none() -> u32 {
    511
}
fn default_max_ptes_shared() -> u32 {
    256
}

impl Default for KhugepagedConfig {
    fn default() -> Self {
        KhugepagedConfig {
            pages_to_scan: default_pages_to_scan(),
            scan_sleep_millisecs: default_scan_sleep(),
            max_ptes_none: default_max_ptes_none(),
            max_ptes_shared: default_max_ptes_shared(),
        }
    }
}

/// How a frame allocator places frames in physical memory.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllocPolicy {
    /// Lowest free frame first: physically contiguous, every large block available.
    #[default]
    Sequential,
    /// Uniformly random free frame (seeded): no contiguity beyond chance.
    Random,
    /// Buddy-like: contiguous large blocks are available with probability `1 - fragmentation`.
    Buddy,
}

/// A physical frame allocator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocatorConfig {
    /// Placement policy.
    #[serde(default)]
    pub policy: AllocPolicy,
    /// For `buddy`: probability in [0, 1] that a request for a 2 MiB / 1 GiB contiguous block
    /// finds none (and the caller falls back to smaller pages).
    #[serde(default)]
    pub fragmentation: f64,
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        AllocatorConfig {
            policy: AllocPolicy::Sequential,
            fragmentation: 0.0,
        }
    }
}

/// The guest: its paging format, page sizes and memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestConfig {
    /// Paging format of the guest's tables (`--levels 5` selects `long5`).
    #[serde(default)]
    pub format: PagingFormat,
    /// Page sizes the guest maps with.
    #[serde(default)]
    pub page_size: GuestPageSize,
    /// Transparent huge pages, where `page_size` is `4K` (default `madvise`, docs/model.md
    /// "Page sizes" says why).
    #[serde(default)]
    pub thp: Thp,
    /// khugepaged's rate and limits.
    #[serde(default)]
    pub khugepaged: KhugepagedConfig,
    /// Huge pages reserved for hugetlbfs (Linux's `vm.nr_hugepages`, default 0): a
    /// `MAP_HUGETLB` mapping takes its 2 MiB pages (4 MiB in 32-bit paging) from them, and
    /// one the pool cannot hold falls back to an ordinary mapping.
    #[serde(default)]
    pub hugetlb_pages: u64,
    /// Guest physical memory size.
    #[serde(default = "default_guest_memory")]
    pub memory: Bytes,
    /// Guest frame allocator.
    #[serde(default)]
    pub allocator: AllocatorConfig,
    /// Virtual processors (docs/model.md, "vCPUs"): each has its own MMU (TLBs, walk caches,
    /// private cache levels) and clock; the guest scheduler places threads on them.
    #[serde(default = "one")]
    pub vcpus: u32,
    /// Allow more vCPUs than the machine has cores (`machine.core.cores`); off, such a
    /// configuration is rejected, since vCPUs would then time-share cores, which vmmu does
    /// not model.
    #[serde(default)]
    pub overcommit: bool,
    /// The guest scheduler's time slice, in cycles: a thread that has run this long yields
    /// its vCPU to the next runnable thread on the vCPU's run queue.
    #[serde(default = "default_time_slice")]
    pub time_slice: u64,
    /// Threads pinned to vCPUs (`sched_setaffinity` to one CPU): thread id → vCPU index. A
    /// pinned thread is placed there and never migrates.
    #[serde(default)]
    pub affinity: BTreeMap<String, u32>,
}

fn one() -> u32 {
    1
}

/// Linux CFS's `sched_min_granularity` (3 ms on a multi-core machine, scaled by
/// 1 + log2(CPUs) from 0.75 ms) at about 2 GHz: 6 M cycles.
fn default_time_slice() -> u64 {
    6_000_000
}

fn default_guest_memory() -> Bytes {
    Bytes(16 << 30)
}

/// Cycles the guest kernel spends on its own work, paid identically in every mode (so
/// overheads are relative to an honest native run). They depend on the core, so each machine
/// preset gives them with a source per number (docs/model.md, "Guest kernel costs");
/// hypervisor costs come on top of them in virtualized modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelCosts {
    /// A demand-paging fault: exception entry, allocating and zeroing a 4 KiB page, the PTE
    /// write, return. A larger page costs `zero_page` more for each further 4 KiB it zeroes.
    pub page_fault: u64,
    /// Zeroing 4 KiB (`clear_page`): what a 2 MiB fault or population does 511 times more than
    /// a 4 KiB one, and khugepaged does for each absent page of a range it collapses.
    pub zero_page: u64,
    /// Copying 4 KiB (`copy_page`): what a copy-on-write fault of a large page does for each
    /// further 4 KiB, and a collapse for each present page.
    pub copy_page: u64,
    /// A collapse into a huge page beyond its copies (`collapse_huge_page`: taking the mmap
    /// lock, allocating the huge page, isolating the small pages, the flush, installing the
    /// entry); the scan charges `per_page` per entry examined.
    pub collapse: u64,
    /// A copy-on-write fault: a demand fault's work plus copying the page.
    pub cow_fault: u64,
    /// A page populated without a fault (`MAP_POPULATE`): allocating and zeroing it and the
    /// PTE write, without the exception entry and exit.
    pub populate_page: u64,
    /// A system call's entry and exit (mmap, munmap, mprotect, brk, mremap).
    pub syscall: u64,
    /// Per page-table entry a system call or exit writes, or page it invalidates.
    pub per_page: u64,
    /// fork: creating the process and its tables, beyond the per-entry work.
    pub fork: u64,
    /// fork: per page-table entry copied and write-protected.
    pub fork_per_pte: u64,
    /// exec: loading a new image (beyond its page faults).
    pub exec: u64,
    /// exit: tearing down the process, beyond `per_page` per page freed.
    pub exit: u64,
    /// A context switch (scheduler and the CR3 write).
    pub context_switch: u64,
    /// `clone(CLONE_VM)`: creating a thread, which shares its process's address space.
    pub thread_create: u64,
    /// A TLB shootdown's initiator: building the request and sending an IPI to each other
    /// processor that may cache the address space (`flush_tlb_others`), beyond waiting for
    /// their acknowledgements (the wait is the remote handlers' simulated time).
    pub ipi_send: u64,
    /// A TLB shootdown on a receiving processor: the interrupt's entry and exit and the flush
    /// handler's acknowledgement, beyond `per_page` per page it invalidates.
    pub ipi_receive: u64,
}

impl Default for GuestConfig {
    fn default() -> Self {
        GuestConfig {
            format: PagingFormat::default(),
            page_size: GuestPageSize::default(),
            thp: Thp::default(),
            khugepaged: KhugepagedConfig::default(),
            hugetlb_pages: 0,
            memory: default_guest_memory(),
            allocator: AllocatorConfig::default(),
            vcpus: 1,
            overcommit: false,
            time_slice: default_time_slice(),
            affinity: BTreeMap::new(),
        }
    }
}

/// The host (hypervisor side): machine memory and the nested tables.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Host physical memory size.
    #[serde(default = "default_host_memory")]
    pub memory: Bytes,
    /// Host frame allocator.
    #[serde(default)]
    pub allocator: AllocatorConfig,
    /// Page size the nested tables map guest memory with; where the host allocator has no
    /// contiguous block of that size, the next smaller size is used.
    #[serde(default = "default_nested_page_size")]
    pub nested_page_size: PageSize,
    /// Levels of the nested tables: 4, or 5 (LA57-style nested paging).
    #[serde(default = "default_nested_levels")]
    pub nested_levels: u8,
}

fn default_host_memory() -> Bytes {
    Bytes(64 << 30)
}
fn default_nested_page_size() -> PageSize {
    PageSize::Size4K
}
fn default_nested_levels() -> u8 {
    4
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            memory: default_host_memory(),
            allocator: AllocatorConfig::default(),
            nested_page_size: default_nested_page_size(),
            nested_levels: default_nested_levels(),
        }
    }
}

/// How sensitive MMU operations reach the hypervisor (seed 003).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Technique {
    /// Trap-and-emulate (HVM): each intercepted operation is a VM exit plus a handler; guest
    /// page tables are shadowed.
    #[default]
    Hvm,
    /// Para-virtual (Xen PV): direct paging; page-table updates are validated hypercalls,
    /// batched per operation (`mmu_update`); CR3 writes and INVLPG are hypercalls.
    Pv,
    /// Pre-virtualized (in-place VMM): the sensitive instruction becomes a call into a VMM
    /// inside the guest; a world switch only when the hypervisor must act (seed 003).
    Previrt,
}

impl Technique {
    /// The name used in configs and results.
    pub const fn name(self) -> &'static str {
        match self {
            Technique::Hvm => "hvm",
            Technique::Pv => "pv",
            Technique::Previrt => "previrt",
        }
    }
}

/// When guest memory is backed by the host (nested and shadow paging).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backing {
    /// Every guest frame is backed when the guest allocates it: no nested page faults.
    #[default]
    Eager,
    /// Backed on first use: under nested paging a nested page fault (EPT violation) exits;
    /// under shadow paging the hidden fault that first maps the frame backs it.
    Lazy,
}

/// The shadow pager's knobs (DESIGN.md "The hypervisor model"); each can be switched to
/// measure its effect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowConfig {
    /// Shadow roots kept per vCPU (KVM: the current one plus 3 previous = 4; Palacios' VTLB:
    /// 1, rebuilt on every CR3 write). A CR3 write to a cached root builds nothing.
    #[serde(default = "default_cached_roots")]
    pub cached_roots: u32,
    /// Let leaf (level-1) guest tables go out of sync: guest writes to them do not exit, and
    /// the shadow is resynced at the next CR3 write or INVLPG (KVM "unsync").
    #[serde(default = "yes")]
    pub unsync: bool,
    /// Most out-of-sync pages at once (Xen: 3 per vCPU; 0 = no limit, KVM).
    #[serde(default)]
    pub oos_limit: u32,
    /// Neighbouring shadow entries filled on a hidden fault (KVM: 8; Xen: up to 32; 0 = off).
    #[serde(default = "default_prefetch")]
    pub prefetch: u32,
    /// Stop shadowing a guest table after this many emulated writes with no use of it in
    /// between (KVM: 3; 0 = never).
    #[serde(default = "default_write_flood")]
    pub write_flood: u32,
    /// Most shadow pages kept; the least recently created root's tree is dropped beyond it
    /// (0 = no limit; KVM sizes it at about 2% of guest pages).
    #[serde(default)]
    pub capacity: u32,
}

fn default_cached_roots() -> u32 {
    4
}
fn default_prefetch() -> u32 {
    8
}
fn default_write_flood() -> u32 {
    3
}

impl Default for ShadowConfig {
    fn default() -> Self {
        ShadowConfig {
            cached_roots: default_cached_roots(),
            unsync: true,
            oos_limit: 0,
            prefetch: default_prefetch(),
            write_flood: default_write_flood(),
            capacity: 0,
        }
    }
}

/// The direct cost, in cycles, of each hypervisor operation (a named profile; the lost TLB
/// and cache state after an exit is simulated, not part of these constants).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostProfile {
    /// Profile name.
    pub name: String,
    /// One line describing it.
    #[serde(default)]
    pub description: String,
    /// A VM exit plus the VM entry that resumes the guest (hardware round trip).
    pub exit_round_trip: u64,
    /// Handler of a hidden (shadow) page fault that fills a shadow entry.
    pub hidden_fault: u64,
    /// Handler of a page fault that is the guest's own: reflected into the guest (injection).
    pub reflect_fault: u64,
    /// Emulating one guest write to a write-protected page-table page.
    pub emulate_write: u64,
    /// Handling a guest CR3 write (switch to a cached shadow root).
    pub cr3_write: u64,
    /// Building one shadow page-table page.
    pub make_shadow: u64,
    /// Handling a guest INVLPG.
    pub invlpg: u64,
    /// Resynchronising one out-of-sync shadow page.
    pub resync_page: u64,
    /// Removing the shadow of one guest page-table page (unshadow, teardown).
    pub unshadow: u64,
    /// Handling a nested page fault (EPT violation) that backs guest memory.
    pub nested_fault: u64,
    /// A para-virtual hypercall round trip.
    pub hypercall: u64,
    /// Validating one page-table update inside an `mmu_update`-style hypercall.
    pub pv_update: u64,
    /// A guest page fault trapping to the hypervisor and bounced to the guest kernel (PV).
    pub pv_fault_bounce: u64,
    /// A call into the in-place VMM (pre-virtualization), no world switch.
    pub previrt_call: u64,
    /// The in-place VMM's work per page-table update.
    pub previrt_update: u64,
    /// Changing the paging mode at an exit (seed 001 §5): reprogramming the VMCB/VMCS paging
    /// controls (nested paging on or off, nCR3 / EPTP, the CR3 seen by hardware, the CR3,
    /// INVLPG and page-fault intercepts) and requesting the VM's TLB flush. Dropping or
    /// revalidating shadow pages is charged per page (`unshadow`, `resync_page`), building
    /// a shadow root as `make_shadow`; the refill afterwards is simulated.
    pub mode_switch: u64,
    /// Handling a guest IPI (a write of the local APIC's interrupt command register):
    /// decoding it and queueing the interrupt for each destination vCPU.
    pub ipi_send: u64,
    /// Delivering an interrupt to a vCPU that is running: the host IPI that forces it out of
    /// the guest and the injection at the next entry. Not an exit with posted interrupts.
    pub ipi_deliver: u64,
    /// Emulating the guest's end-of-interrupt write to its local APIC. Not an exit with
    /// virtual-interrupt delivery (APICv / AVIC).
    pub eoi: u64,
    /// Posted interrupts and virtual-interrupt delivery (Intel APICv, AMD AVIC): interrupts
    /// reach a running vCPU without an exit and its EOI does not exit (Intel SDM Vol. 3C,
    /// "Posted-Interrupt Processing", "Virtual-Interrupt Delivery").
    pub posted_interrupts: bool,
    /// Handling a PMU-overflow interrupt that exits to the hypervisor (a sampling policy's
    /// window, seed 001 §4–§5): reading the counters, rearming the overflow, the policy's
    /// arithmetic, the interrupt's acknowledgement.
    pub pmu_exit: u64,
    /// Where each number comes from.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

impl CostProfile {
    /// The cycles a shadow pager's work adds to its handler: `built` shadow tables made
    /// (`make_shadow` each) and `resynced` out-of-sync pages resynced (`resync_page` each).
    /// Every handler that runs a shadow pager (shadow paging, agile paging, an L1 that
    /// shadow-pages its guest, L0 building EPT02) prices its pager's work here.
    #[inline]
    pub fn shadow_work(&self, built: u64, resynced: u64) -> u64 {
        built * self.make_shadow + resynced * self.resync_page
    }
}

/// Changing the paging mode of a running VM between shadow and nested paging (seed 001 §5).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchConfig {
    /// Retired-instruction counts at which the mode flips (shadow ↔ nested), strictly
    /// increasing; each switch is an exit at the first event boundary at or after its count.
    #[serde(default)]
    pub at: Vec<u64>,
    /// Keep the shadow page cache while the VM runs under nested paging, and revalidate every
    /// kept page when shadow paging resumes (`resync_page` each); off, the cache is dropped at
    /// the switch to nested paging (`unshadow` each), as Palacios does (seed 001 §5).
    #[serde(default)]
    pub keep_shadow: bool,
}

/// The hypervisor: cost profile, technique, backing and the shadow pager's knobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HypervisorConfig {
    /// Name of the cost profile in `costs` (set `hypervisor.profile` to load another).
    #[serde(default = "default_profile")]
    pub profile: String,
    /// How sensitive operations reach the hypervisor.
    #[serde(default)]
    pub technique: Technique,
    /// When nested-paging memory is backed.
    #[serde(default)]
    pub backing: Backing,
    /// Shadow pager knobs.
    #[serde(default)]
    pub shadow: ShadowConfig,
    /// Changes of paging mode while the VM runs.
    #[serde(default)]
    pub switch: SwitchConfig,
    /// The cost profile's numbers.
    #[serde(default = "default_costs")]
    pub costs: CostProfile,
}

fn default_profile() -> String {
    "kvm-modern".into()
}

fn default_costs() -> CostProfile {
    load_profile(&default_profile()).expect("the default profile parses")
}

impl Default for HypervisorConfig {
    fn default() -> Self {
        HypervisorConfig {
            profile: default_profile(),
            technique: Technique::default(),
            backing: Backing::default(),
            shadow: ShadowConfig::default(),
            switch: SwitchConfig::default(),
            costs: default_costs(),
        }
    }
}

/// How the core turns the counts into time (DESIGN.md "Timing: two core models, the same
/// counts"; docs/model.md "Timing").
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub enum CoreModel {
    /// Every latency adds up: `instructions × base_CPI` plus each walk's and each data
    /// reference's latency, nothing overlapped.
    #[default]
    #[serde(rename = "additive")]
    Additive,
    /// An out-of-order window after the mechanistic interval model (Karkhanis & Smith, ISCA
    /// 2004; Eyerman et al., TOCS 2009) in its reorder-buffer form (Carlson et al., TACO
    /// 2014): independent misses and walks overlap, dependent ones serialise.
    #[serde(rename = "interval")]
    Interval,
}

impl CoreModel {
    /// Every core model, as named in configs.
    pub const ALL: [CoreModel; 2] = [CoreModel::Additive, CoreModel::Interval];

    /// The name used in configs and results.
    pub const fn name(self) -> &'static str {
        match self {
            CoreModel::Additive => "additive",
            CoreModel::Interval => "interval",
        }
    }
}

/// The core's base timing, and the out-of-order window the interval model needs.
///
/// The window's sizes are optional so that a machine written without them still runs the
/// additive model; the interval model requires each of them (validation names the missing
/// one) rather than inventing a default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreConfig {
    /// Cycles per instruction with a perfect TLB and an L1-hitting memory (the `base_CPI` of
    /// DESIGN.md's timing equation); under the interval model, the dispatch rate's inverse.
    pub base_cpi: f64,
    /// Clock frequency in GHz (for converting cycles to seconds in reports only).
    pub freq_ghz: f64,
    /// Cores of the machine: the most vCPUs a VM may have without overcommit.
    #[serde(default = "one")]
    pub cores: u32,
    /// Which core model times the run.
    #[serde(default)]
    pub model: CoreModel,
    /// Reorder-buffer entries (instructions): instruction `i` dispatches only once instruction
    /// `i − rob` has retired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rob: Option<u32>,
    /// Load-queue entries: loads between dispatch and retirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_queue: Option<u32>,
    /// Store-queue entries: stores between dispatch and the write of their data after
    /// retirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_queue: Option<u32>,
    /// Miss-status holding registers of the L1 data cache: data misses in flight at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mshrs: Option<u32>,
    /// Page walkers: walks in flight at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walkers: Option<u32>,
}

impl CoreConfig {
    /// The out-of-order window's fields, by name, as configured.
    pub fn window_fields(&self) -> [(&'static str, Option<u32>); 5] {
        [
            ("rob", self.rob),
            ("load_queue", self.load_queue),
            ("store_queue", self.store_queue),
            ("mshrs", self.mshrs),
            ("walkers", self.walkers),
        ]
    }
}

/// One TLB array: `entries` entries in sets of `ways`, LRU, holding the listed page sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbArrayConfig {
    /// Number of entries.
    pub entries: u32,
    /// Associativity (`entries` = fully associative, 1 = direct mapped).
    pub ways: u32,
    /// Page sizes this array holds.
    pub sizes: Vec<PageSize>,
}

/// The TLB hierarchy: each level is a list of arrays looked up in parallel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbConfig {
    /// L1 data TLB arrays.
    pub l1d: Vec<TlbArrayConfig>,
    /// L1 instruction TLB arrays.
    pub l1i: Vec<TlbArrayConfig>,
    /// L2 TLB arrays (data; unified when `l2i` is empty, like Intel's STLB).
    pub l2: Vec<TlbArrayConfig>,
    /// Separate L2 instruction TLB arrays (AMD); empty = fetches use `l2`.
    #[serde(default)]
    pub l2i: Vec<TlbArrayConfig>,
    /// Extra cycles of an L1 TLB miss that hits in the L2 TLB.
    pub l2_latency: u32,
    /// Tag entries with the PCID so CR3 writes need not flush (Intel PCID / AMD ASID-like).
    #[serde(default)]
    pub pcid: bool,
    /// Tag entries with the VPID/ASID so VM exits and entries need not flush.
    #[serde(default = "yes")]
    pub vpid: bool,
}

fn yes() -> bool {
    true
}

/// Page-walk caching designs (seed 002 §4 and Intel's paging-structure caches).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub enum PwcDesign {
    /// No page-walk caching: every page-entry reference goes to the memory hierarchy.
    #[serde(rename = "none")]
    None,
    /// AMD PWC for the guest dimension only (1D_PWC).
    #[serde(rename = "1d")]
    OneD,
    /// AMD PWC for both dimensions (2D_PWC).
    #[serde(rename = "2d")]
    TwoD,
    /// 2D_PWC plus the Nested TLB (2D_PWC+NT).
    #[default]
    #[serde(rename = "2d+nt")]
    TwoDNt,
    /// Intel-style paging-structure caches (virtually tagged; skip upper levels).
    #[serde(rename = "psc")]
    Psc,
}

impl PwcDesign {
    /// The name used in configs and results.
    pub const fn name(self) -> &'static str {
        match self {
            PwcDesign::None => "none",
            PwcDesign::OneD => "1d",
            PwcDesign::TwoD => "2d",
            PwcDesign::TwoDNt => "2d+nt",
            PwcDesign::Psc => "psc",
        }
    }
}

/// The AMD page-walk cache: physically tagged page entries (seed 002 §4.1, Table 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PwcConfig {
    /// Which design is active.
    pub design: PwcDesign,
    /// Entries.
    pub entries: u32,
    /// Associativity (`entries` = fully associative).
    pub ways: u32,
    /// Cycles of a PWC access (paid on hit and miss).
    pub latency: u32,
    /// Cache `{G,gL1}` (and native `L1`) entries; off in seed 002 except Figure 9's variant.
    #[serde(default)]
    pub cache_g_l1: bool,
    /// Cache `{nL1,gPA}` entries (seed 002 §6.4 studies turning this off).
    #[serde(default = "yes")]
    pub cache_nl1_gpa: bool,
    /// Flush the PWC whenever the TLB is flushed (seed 002 Table 2: yes).
    #[serde(default = "yes")]
    pub flush_on_tlb_flush: bool,
}

/// The Nested TLB: gPA page → hPA page of the page entries' pages (seed 002 §4.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NtlbConfig {
    /// Entries.
    pub entries: u32,
    /// Associativity.
    pub ways: u32,
    /// Cycles of an NTLB access (paid on hit and miss).
    pub latency: u32,
    /// Also use the NTLB for the final `gPA` row (seed 002 does not: its reuse is like a TLB
    /// miss's).
    #[serde(default)]
    pub cache_gpa_row: bool,
}

/// Intel-style paging-structure caches (Intel SDM Vol. 3A §4.10.3): per upper level, entries
/// tagged by the virtual-address prefix that selects them, holding the next table's address.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PscConfig {
    /// PML5E cache entries (5-level paging only).
    #[serde(default)]
    pub pml5: u32,
    /// PML4E cache entries.
    pub pml4: u32,
    /// PDPTE cache entries.
    pub pdpt: u32,
    /// PDE cache entries.
    pub pde: u32,
    /// Cycles of a lookup (all levels searched in parallel).
    pub latency: u32,
}

/// One level of the data/page-entry cache hierarchy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheLevelConfig {
    /// Name: `l1`, `l2`, `l3`.
    pub name: String,
    /// Capacity.
    pub size: Bytes,
    /// Associativity.
    pub ways: u32,
    /// Load-to-use latency of a hit at this level, in cycles.
    pub latency: u32,
    /// Shared by every core (a last-level cache); otherwise each core has its own.
    #[serde(default)]
    pub shared: bool,
}

/// The memory hierarchy seen by page-entry references and (optionally) data references.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Line size in bytes.
    #[serde(default = "default_line")]
    pub line: u32,
    /// Levels, closest first.
    pub levels: Vec<CacheLevelConfig>,
    /// Latency of a reference served by DRAM, in cycles.
    pub dram_latency: u32,
    /// The level page entries are looked up from and filled into (seed 002: `l2`).
    #[serde(default = "default_pe_fill")]
    pub page_entry_fill: String,
    /// Send data references through the hierarchy too (off: data costs only base CPI).
    #[serde(default = "yes")]
    pub data: bool,
}

impl CacheConfig {
    /// The most cache levels a machine may have: each level's walk references, and DRAM's,
    /// are counted in a fixed array (`WalkStats::served_level`), and a copy of a running
    /// simulation's counters holds the levels' as plain values.
    pub const MAX_LEVELS: usize = 7;
}

fn default_line() -> u32 {
    64
}
fn default_pe_fill() -> String {
    "l2".into()
}

/// A machine: core, TLBs, page-walk caches, caches. Presets live in `presets/machines/`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// Preset name.
    pub name: String,
    /// One line describing it.
    #[serde(default)]
    pub description: String,
    /// Core timing.
    pub core: CoreConfig,
    /// TLBs.
    pub tlb: TlbConfig,
    /// AMD page-walk cache (used by designs `1d`, `2d`, `2d+nt`).
    pub pwc: PwcConfig,
    /// Nested TLB (design `2d+nt`).
    pub ntlb: NtlbConfig,
    /// Paging-structure caches (design `psc`).
    pub psc: PscConfig,
    /// Cache hierarchy.
    pub caches: CacheConfig,
    /// The guest kernel's own costs on this core.
    pub kernel: KernelCosts,
    /// Where each number comes from: dotted field path → source (paper, table, manual, or
    /// "assumption: …").
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// Everything one simulation needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Paging mode.
    #[serde(default)]
    pub mode: Mode,
    /// The machine.
    pub machine: MachineConfig,
    /// The guest.
    #[serde(default)]
    pub guest: GuestConfig,
    /// The host.
    #[serde(default)]
    pub host: HostConfig,
    /// The hypervisor.
    #[serde(default)]
    pub hypervisor: HypervisorConfig,
    /// Seed for every random choice of the run (allocators; generators have their own `seed`).
    #[serde(default)]
    pub seed: u64,
    /// Verify every translation against the composition of the mappings (DESIGN.md law 3).
    #[serde(default)]
    pub check: bool,
    /// A warm-up simulated in full but left out of every reported count.
    #[serde(default)]
    pub warmup: WarmupConfig,
    /// Where the run stops before the end of its workload.
    #[serde(default, skip_serializing_if = "StopConfig::is_unset")]
    pub stop: StopConfig,
    /// The paging-mode policy of an adaptive run (only with `mode = "adaptive"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyConfig>,
    /// L2 TLBs of other sizes run beside the machine's, for a sizing study in one pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizing: Option<SizingConfig>,
    /// The L1 hypervisor of a nested-virtualization run (only with `mode = "nested-virt"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virt: Option<NestedVirtConfig>,
    /// The agile-paging policy (only with `mode = "agile"`; its defaults when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agile: Option<AgileConfig>,
}

/// A sizing study of the L2 TLB in one pass (docs/performance.md, "One pass for many sizes"):
/// beside the machine's L2 TLB level, one probe level per size receives every operation the
/// real level receives — each lookup of an L1 miss, each fill after a walk, each
/// invalidation and flush — and counts its own hits and misses, but never answers a
/// translation. A probe that misses where the real level hit is filled with the translation
/// the real level returned, which is what a walk would have returned. The probe's misses are
/// those of a run with that L2 TLB exactly when the sequence of L2 operations does not
/// depend on the L2's size: one vCPU and no adaptive policy (both react to cycle counts,
/// which the size changes); the configuration rules enforce both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizingConfig {
    /// The index of the array of `machine.tlb.l2` that each probe resizes (the others stay).
    #[serde(default)]
    pub array: usize,
    /// The sizes of that array, one probe each.
    pub sizes: Vec<SizingSize>,
}

/// One size of a sizing study's array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizingSize {
    /// Number of entries.
    pub entries: u32,
    /// Associativity.
    pub ways: u32,
}

/// The most probes one run carries (each costs an L2 lookup per L1 miss).
pub const SIZING_MAX_SIZES: usize = 64;

/// A warm-up: the model runs fully (TLBs, caches, shadow tables and the guest's tables fill),
/// then every counter restarts, as ChampSim's `--warmup-instructions`. At most one of the
/// three is given; a count ends the warm-up at the first event boundary at or after it, a
/// phase right after the marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmupConfig {
    /// Memory references (loads, stores and instruction fetches) of the warm-up.
    #[serde(default)]
    pub refs: u64,
    /// Retired instructions of the warm-up.
    #[serde(default)]
    pub instructions: u64,
    /// The warm-up ends at the first phase marker (`Event::Phase`) with this id: the marker
    /// and everything before it are the warm-up (a program's `VMMU_PHASE(id)` before its timed
    /// region, docs/recording.md "Phase markers").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<u32>,
}

impl WarmupConfig {
    /// Whether a warm-up is asked for at all.
    pub fn is_set(&self) -> bool {
        self.refs > 0 || self.instructions > 0 || self.phase.is_some()
    }
}

/// Where a run stops before its workload ends: the events after the stop are neither
/// simulated nor counted (a program's `VMMU_PHASE(id)` after its timed region).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopConfig {
    /// The run stops at the first phase marker (`Event::Phase`) with this id that comes after
    /// the warm-up; the marker is its last event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<u32>,
}

impl StopConfig {
    /// Whether no stop is asked for (the section is then left out of the written config).
    pub fn is_unset(&self) -> bool {
        self.phase.is_none()
    }
}

impl SimConfig {
    /// A config for `machine` with every other field at its default.
    pub fn new(machine: MachineConfig) -> Self {
        SimConfig {
            mode: Mode::default(),
            machine,
            guest: GuestConfig::default(),
            host: HostConfig::default(),
            hypervisor: HypervisorConfig::default(),
            seed: 0,
            check: false,
            warmup: WarmupConfig::default(),
            stop: StopConfig::default(),
            policy: None,
            sizing: None,
            nested_virt: None,
            agile: None,
        }
    }
}
