//! Page-entry bits (Intel SDM Vol. 3A §4.5 Tables 4-15..4-20; the same positions in 32-bit
//! and PAE entries, which lack NX in 32-bit paging).

/// One page entry as a raw 64-bit value (a 32-bit entry is zero-extended).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Pte(pub u64);

impl Pte {
    /// Present.
    pub const P: u64 = 1 << 0;
    /// Read/write: writes allowed.
    pub const RW: u64 = 1 << 1;
    /// User/supervisor: user-mode access allowed.
    pub const US: u64 = 1 << 2;
    /// Accessed: set by the walker on first use.
    pub const A: u64 = 1 << 5;
    /// Dirty (leaves): set on the first write.
    pub const D: u64 = 1 << 6;
    /// Page size: this entry is a large-page leaf (levels 2 and 3).
    pub const PS: u64 = 1 << 7;
    /// Global (leaves): survives CR3 writes when CR4.PGE is on.
    pub const G: u64 = 1 << 8;
    /// Agile paging's switching bit (bit 11, ignored by the hardware in every x86 format, so
    /// free for the hypervisor): in a shadow entry, the next level is the guest's table at the
    /// host address the entry holds, and the walk continues there in nested mode (Gandhi, Hill
    /// & Swift, ISCA 2016, §3).
    pub const SWITCH: u64 = 1 << 11;
    /// Execute-disable (PAE and long mode).
    pub const NX: u64 = 1 << 63;

    /// Whether the entry is present.
    #[inline]
    pub const fn present(self) -> bool {
        self.0 & Self::P != 0
    }
    /// Whether the entry is a large-page leaf.
    #[inline]
    pub const fn large(self) -> bool {
        self.0 & Self::PS != 0
    }
    /// Whether writes are allowed.
    #[inline]
    pub const fn writable(self) -> bool {
        self.0 & Self::RW != 0
    }
    /// Whether user access is allowed.
    #[inline]
    pub const fn user(self) -> bool {
        self.0 & Self::US != 0
    }
    /// Whether instruction fetches are allowed.
    #[inline]
    pub const fn executable(self) -> bool {
        self.0 & Self::NX == 0
    }
    /// Whether the accessed bit is set.
    #[inline]
    pub const fn accessed(self) -> bool {
        self.0 & Self::A != 0
    }
    /// Whether the dirty bit is set.
    #[inline]
    pub const fn dirty(self) -> bool {
        self.0 & Self::D != 0
    }
    /// Whether the global bit is set.
    #[inline]
    pub const fn global(self) -> bool {
        self.0 & Self::G != 0
    }
    /// The frame address under `mask` (from [`crate::paging::Geometry::frame_mask`]).
    #[inline]
    pub const fn frame(self, mask: u64) -> u64 {
        self.0 & mask
    }
}
