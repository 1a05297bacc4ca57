//! Typed, strict configuration (STYLE.md rule 4).
//!
//! A simulation is described by one [`SimConfig`]: the machine (a preset from `presets/` or a
//! TOML file), the paging mode, the guest's paging format and page-size use, the host's memory
//! and nested page size, and the seed. Every struct denies unknown fields, defaults live here
//! and only here, and [`SimConfig::validate`] checks everything once before anything is built,
//! with errors that name the dotted path of the field (`machine.tlb.l1d[0].ways`).
//!
//! `--set dotted.path=value` overrides go through [`SimConfig::from_toml_with_overrides`]: the
//! config is expanded with all its defaults, the path must exist in it, and the value is parsed
//! as a TOML value (falling back to a string), so a typo is an error, never a silent no-op.

use crate::addr::{parse_bytes, PageSize};
use crate::error::{Error, Result};
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
}

impl Mode {
    /// The name used in configs and results.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Nested => "nested",
            Mode::Shadow => "shadow",
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
    /// Every mapping at 4 KiB.
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
    /// THP-like: regions flagged huge (or larger than 2 MiB) get 2 MiB pages, others 4 KiB.
    #[serde(rename = "mixed")]
    Mixed,
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

/// The guest: its paging format, page sizes, memory and kernel costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestConfig {
    /// Paging format of the guest's tables (`--levels 5` selects `long5`).
    #[serde(default)]
    pub format: PagingFormat,
    /// Page sizes the guest maps with.
    #[serde(default)]
    pub page_size: GuestPageSize,
    /// Guest physical memory size.
    #[serde(default = "default_guest_memory")]
    pub memory: Bytes,
    /// Guest frame allocator.
    #[serde(default)]
    pub allocator: AllocatorConfig,
    /// The guest kernel's own costs, paid in every mode (so overheads are relative to an
    /// honest native run).
    #[serde(default)]
    pub costs: GuestCosts,
}

fn default_guest_memory() -> Bytes {
    Bytes(16 << 30)
}

/// Cycles the guest kernel spends on its own work (Linux-like; assumptions of a 2–3 GHz core,
/// documented in docs/model.md). Hypervisor costs come on top of these in virtualized modes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestCosts {
    /// A demand-paging fault: entry, allocation, zeroing a 4 KiB page, PTE write, return
    /// (about 1 µs).
    #[serde(default = "c2500")]
    pub page_fault: u64,
    /// A copy-on-write fault: like a demand fault plus copying the page.
    #[serde(default = "c3500")]
    pub cow_fault: u64,
    /// A system call's entry and exit (mmap, munmap, mprotect, brk, mremap).
    #[serde(default = "c300")]
    pub syscall: u64,
    /// Per page mapped, unmapped or re-protected by a system call, beyond `syscall`.
    #[serde(default = "c50")]
    pub per_page: u64,
    /// fork: creating the process and its tables, beyond the per-page work.
    #[serde(default = "c20000")]
    pub fork: u64,
    /// fork: per page-table entry copied and write-protected.
    #[serde(default = "c50")]
    pub fork_per_pte: u64,
    /// exec: loading a new image (beyond its page faults).
    #[serde(default = "c50000")]
    pub exec: u64,
    /// exit: tearing down the process, beyond `per_page` per page freed.
    #[serde(default = "c10000")]
    pub exit: u64,
    /// A context switch (scheduler and the CR3 write).
    #[serde(default = "c1500")]
    pub context_switch: u64,
}

fn c50() -> u64 {
    50
}
fn c300() -> u64 {
    300
}
fn c1500() -> u64 {
    1500
}
fn c2500() -> u64 {
    2500
}
fn c3500() -> u64 {
    3500
}
fn c10000() -> u64 {
    10_000
}
fn c20000() -> u64 {
    20_000
}
fn c50000() -> u64 {
    50_000
}

impl Default for GuestCosts {
    fn default() -> Self {
        GuestCosts {
            page_fault: c2500(),
            cow_fault: c3500(),
            syscall: c300(),
            per_page: c50(),
            fork: c20000(),
            fork_per_pte: c50(),
            exec: c50000(),
            exit: c10000(),
            context_switch: c1500(),
        }
    }
}

impl Default for GuestConfig {
    fn default() -> Self {
        GuestConfig {
            format: PagingFormat::default(),
            page_size: GuestPageSize::default(),
            memory: default_guest_memory(),
            allocator: AllocatorConfig::default(),
            costs: GuestCosts::default(),
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

/// When nested-paging memory is backed by the host.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backing {
    /// Every guest frame is backed when the guest allocates it: no nested page faults.
    #[default]
    Eager,
    /// Backed on the first hardware access: a nested page fault (EPT violation) exits.
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
    /// Where each number comes from.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
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
            costs: default_costs(),
        }
    }
}

/// The exit cost profiles shipped with vmmu, as `(name, TOML text)`.
pub const PROFILES: &[(&str, &str)] = &[
    (
        "kvm-modern",
        include_str!("../presets/profiles/kvm-modern.toml"),
    ),
    (
        "xen-3.0.4-core2",
        include_str!("../presets/profiles/xen-3.0.4-core2.toml"),
    ),
    (
        "palacios-opteron2350",
        include_str!("../presets/profiles/palacios-opteron2350.toml"),
    ),
    (
        "esx-nehalem",
        include_str!("../presets/profiles/esx-nehalem.toml"),
    ),
];

/// Loads a cost profile by name, or from a TOML file when the name ends in `.toml`.
pub fn load_profile(name_or_path: &str) -> Result<CostProfile> {
    load_named(
        name_or_path,
        PROFILES,
        "hypervisor.profile",
        "hypervisor.costs",
        "profile",
    )
}

/// The core's base timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreConfig {
    /// Cycles per instruction with a perfect TLB and an L1-hitting memory (the `base_CPI` of
    /// DESIGN.md's timing equation).
    pub base_cpi: f64,
    /// Clock frequency in GHz (for converting cycles to seconds in reports only).
    pub freq_ghz: f64,
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
}

/// The machine presets shipped with vmmu, as `(name, TOML text)`.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "bhargava08",
        include_str!("../presets/machines/bhargava08.toml"),
    ),
    (
        "opteron2350",
        include_str!("../presets/machines/opteron2350.toml"),
    ),
    (
        "core2-e6300",
        include_str!("../presets/machines/core2-e6300.toml"),
    ),
    (
        "nehalem-x5560",
        include_str!("../presets/machines/nehalem-x5560.toml"),
    ),
    (
        "golden-cove",
        include_str!("../presets/machines/golden-cove.toml"),
    ),
    ("zen4", include_str!("../presets/machines/zen4.toml")),
];

/// Loads a machine by preset name, or from a TOML file when `name_or_path` ends in `.toml`.
pub fn load_machine(name_or_path: &str) -> Result<MachineConfig> {
    load_named(name_or_path, PRESETS, "machine", "machine", "preset")
}

/// Loads `name_or_path` from the shipped `table` (by name) or from a `.toml` file, and
/// deserializes it with errors naming `prefix.field`; an unknown name lists the known ones.
fn load_named<T: for<'de> Deserialize<'de>>(
    name_or_path: &str,
    table: &[(&str, &str)],
    field: &str,
    prefix: &str,
    what: &str,
) -> Result<T> {
    let text = if name_or_path.ends_with(".toml") {
        std::fs::read_to_string(name_or_path).map_err(|e| Error::io(name_or_path, e))?
    } else {
        table
            .iter()
            .find(|(n, _)| *n == name_or_path)
            .map(|(_, t)| t.to_string())
            .ok_or_else(|| {
                let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
                Error::config(
                    field,
                    format!(
                        "unknown {what} `{name_or_path}` ({what}s: {}; or a path ending in .toml)",
                        names.join(", ")
                    ),
                )
            })?
    };
    let value: toml::Value =
        toml::from_str(&text).map_err(|e| Error::config(prefix, format!("{name_or_path}: {e}")))?;
    deserialize_at(value, prefix)
}

fn deserialize_at<T: for<'de> Deserialize<'de>>(value: toml::Value, prefix: &str) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." || path.is_empty() {
            prefix.to_string()
        } else if prefix.is_empty() {
            path
        } else {
            format!("{prefix}.{path}")
        };
        Error::config(field, e.into_inner().to_string())
    })
}

/// Parses a `--set` value: a TOML literal (`4`, `true`, `"2M"`, `[1,2]`), else a bare string.
fn parse_override_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Splits `a.b[0].c` or `a.b.0.c` into segments.
fn split_path(path: &str) -> Vec<String> {
    path.replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn set_path(root: &mut toml::Value, path: &str, value: toml::Value) -> Result<()> {
    let segs = split_path(path);
    if segs.is_empty() {
        return Err(Error::config(path, "empty --set path"));
    }
    let mut cur = root;
    let mut walked = String::new();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let here = if walked.is_empty() {
            seg.clone()
        } else {
            format!("{walked}.{seg}")
        };
        let next = match cur {
            toml::Value::Table(t) => {
                // Optional sections may be absent in a preset; an unknown key is still an error.
                if !t.contains_key(seg.as_str()) {
                    let known: Vec<&String> = t.keys().collect();
                    return Err(Error::config(
                        here,
                        format!(
                            "unknown configuration field (known here: {})",
                            known
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                t.get_mut(seg.as_str()).expect("checked above")
            }
            toml::Value::Array(a) => {
                let idx: usize = seg
                    .parse()
                    .map_err(|_| Error::config(here.clone(), "expected an array index here"))?;
                let n = a.len();
                a.get_mut(idx).ok_or_else(|| {
                    Error::config(here.clone(), format!("index out of range (length {n})"))
                })?
            }
            _ => {
                return Err(Error::config(
                    walked.clone(),
                    format!("is a value, not a table; cannot set `{seg}` inside it"),
                ))
            }
        };
        if last {
            *next = value;
            return Ok(());
        }
        cur = next;
        walked = here;
    }
    unreachable!("loop returns on the last segment")
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
        }
    }

    /// Parses a whole config from TOML text, then applies `--set` overrides (`path`, `value`),
    /// then validates.
    pub fn from_toml_with_overrides(text: &str, overrides: &[(String, String)]) -> Result<Self> {
        let value: toml::Value =
            toml::from_str(text).map_err(|e| Error::config("config", e.to_string()))?;
        let cfg: SimConfig = deserialize_at(value, "")?;
        cfg.with_overrides(overrides)
    }

    /// Applies `--set` overrides to this config (all defaults expanded first), then validates.
    pub fn with_overrides(&self, overrides: &[(String, String)]) -> Result<Self> {
        let mut full = toml::Value::try_from(self)
            .map_err(|e| Error::config("config", format!("cannot expand defaults: {e}")))?;
        for (path, raw) in overrides {
            set_path(&mut full, path, parse_override_value(raw))?;
        }
        let cfg: SimConfig = deserialize_at(full, "")?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The config as TOML text (every default written out).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Checks every cross-field rule; the error names the field.
    pub fn validate(&self) -> Result<()> {
        let m = &self.machine;
        if !(m.core.base_cpi.is_finite() && m.core.base_cpi > 0.0) {
            return Err(Error::config(
                "machine.core.base_cpi",
                "must be a positive number",
            ));
        }
        if !(m.core.freq_ghz.is_finite() && m.core.freq_ghz > 0.0) {
            return Err(Error::config(
                "machine.core.freq_ghz",
                "must be a positive number",
            ));
        }
        for (name, arrays) in [
            ("l1d", &m.tlb.l1d),
            ("l1i", &m.tlb.l1i),
            ("l2", &m.tlb.l2),
            ("l2i", &m.tlb.l2i),
        ] {
            for (i, a) in arrays.iter().enumerate() {
                let f = format!("machine.tlb.{name}[{i}]");
                check_sets(&f, a.entries, a.ways)?;
                if a.sizes.is_empty() {
                    return Err(Error::config(format!("{f}.sizes"), "lists no page size"));
                }
            }
        }
        if m.tlb.l1d.is_empty() {
            return Err(Error::config("machine.tlb.l1d", "needs at least one array"));
        }
        check_sets("machine.pwc", m.pwc.entries, m.pwc.ways)?;
        check_sets("machine.ntlb", m.ntlb.entries, m.ntlb.ways)?;
        if m.caches.line == 0 || !m.caches.line.is_power_of_two() {
            return Err(Error::config(
                "machine.caches.line",
                "must be a power of two",
            ));
        }
        for (i, c) in m.caches.levels.iter().enumerate() {
            let f = format!("machine.caches.levels[{i}]");
            if c.ways == 0 {
                return Err(Error::config(format!("{f}.ways"), "must be at least 1"));
            }
            let lines = c.size.0 / m.caches.line as u64;
            if c.size.0 == 0 || !lines.is_multiple_of(c.ways as u64) {
                return Err(Error::config(
                    format!("{f}.size"),
                    format!(
                        "{} bytes is not a whole number of {}-way sets of {}-byte lines",
                        c.size.0, c.ways, m.caches.line
                    ),
                ));
            }
            let sets = lines / c.ways as u64;
            if !sets.is_power_of_two() {
                return Err(Error::config(
                    format!("{f}.size"),
                    format!("gives {sets} sets; the set count must be a power of two"),
                ));
            }
        }
        if !m
            .caches
            .levels
            .iter()
            .any(|l| l.name == m.caches.page_entry_fill)
        {
            return Err(Error::config(
                "machine.caches.page_entry_fill",
                format!(
                    "`{}` names no cache level (levels: {})",
                    m.caches.page_entry_fill,
                    m.caches
                        .levels
                        .iter()
                        .map(|l| l.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let gmem = self.guest.memory.0;
        if gmem < (16 << 20) || !gmem.is_multiple_of(2 << 20) {
            return Err(Error::config(
                "guest.memory",
                "must be at least 16M and a multiple of 2M",
            ));
        }
        if self.host.memory.0 < gmem {
            return Err(Error::config(
                "host.memory",
                format!(
                    "{} bytes cannot back {} bytes of guest memory",
                    self.host.memory.0, gmem
                ),
            ));
        }
        if !self.host.memory.0.is_multiple_of(2 << 20) {
            return Err(Error::config("host.memory", "must be a multiple of 2M"));
        }
        for (f, a) in [
            ("guest.allocator.fragmentation", &self.guest.allocator),
            ("host.allocator.fragmentation", &self.host.allocator),
        ] {
            if !(0.0..=1.0).contains(&a.fragmentation) {
                return Err(Error::config(f, "must be in [0, 1]"));
            }
        }
        if !matches!(self.host.nested_levels, 4 | 5) {
            return Err(Error::config("host.nested_levels", "must be 4 or 5"));
        }
        if self.host.nested_page_size == PageSize::Size4M {
            return Err(Error::config(
                "host.nested_page_size",
                "nested tables use long-mode formats: 4K, 2M or 1G",
            ));
        }
        let max_guest = match self.guest.format {
            PagingFormat::X86_32 | PagingFormat::Pae => 4u64 << 30,
            PagingFormat::Long4 | PagingFormat::Long5 => u64::MAX,
        };
        if self.guest.format == PagingFormat::X86_32 && gmem > max_guest {
            return Err(Error::config(
                "guest.memory",
                "32-bit paging addresses at most 4G of guest physical memory",
            ));
        }
        if matches!(self.guest.format, PagingFormat::X86_32 | PagingFormat::Pae)
            && self.guest.page_size == GuestPageSize::Size1G
        {
            return Err(Error::config(
                "guest.page_size",
                "1G pages need long mode (guest.format = long4 or long5)",
            ));
        }
        Ok(())
    }
}

fn check_sets(field: &str, entries: u32, ways: u32) -> Result<()> {
    if entries == 0 {
        return Err(Error::config(
            format!("{field}.entries"),
            "must be at least 1",
        ));
    }
    if ways == 0 {
        return Err(Error::config(format!("{field}.ways"), "must be at least 1"));
    }
    if !entries.is_multiple_of(ways) {
        return Err(Error::config(
            format!("{field}.ways"),
            format!("{ways} ways do not divide {entries} entries"),
        ));
    }
    Ok(())
}

/// Builds a validated config from a machine preset name (or `.toml` path) and `--set`
/// overrides (`dotted.path`, `value`), in order.
///
/// A `hypervisor.profile` override loads that profile's numbers into `hypervisor.costs` before
/// the other overrides apply, so `--profile X --set hypervisor.costs.hypercall=900` works.
pub fn build(machine: &str, overrides: &[(String, String)]) -> Result<SimConfig> {
    let mut cfg = SimConfig::new(load_machine(machine)?);
    if let Some((_, name)) = overrides
        .iter()
        .rev()
        .find(|(p, _)| p == "hypervisor.profile")
    {
        let name = name.trim_matches('"');
        cfg.hypervisor.costs = load_profile(name)?;
        cfg.hypervisor.profile = name.to_string();
    }
    cfg.with_overrides(overrides)
}
