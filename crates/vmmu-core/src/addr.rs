//! Address spaces and page sizes.
//!
//! Virtualized translation moves an address through three spaces: guest virtual (`Gva`), guest
//! physical (`Gpa`) and host physical (`Hpa`, the "system physical address" of seed 002). Each
//! is its own newtype so that a conversion between spaces is always written out (the habit of
//! rust-vmm's `GuestAddress`); arithmetic is limited to offsets within one space.
//!
//! In native mode there is no hypervisor: the guest's physical addresses *are* machine addresses,
//! and the simulator converts them with [`Gpa::identity_hpa`], which is the only place where a
//! `Gpa` becomes an `Hpa` without a nested translation.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One of the three address spaces, as generic code (page tables, memory) handles them: a
/// page table maps one space to another (guest tables `Gva` → `Gpa`, nested tables `Gpa` →
/// `Hpa`, shadow tables `Gva` → `Hpa`), and its code stays generic over both.
pub trait Space: Copy + Eq + fmt::Debug {
    /// The short name printed with addresses (`gVA`, `gPA`, `hPA`).
    const LABEL: &'static str;
    /// The raw 64-bit value.
    fn raw(self) -> u64;
    /// Wraps a raw value.
    fn from_raw(v: u64) -> Self;

    /// This address plus a byte offset, in the same space.
    #[inline]
    fn add(self, off: u64) -> Self {
        Self::from_raw(self.raw().wrapping_add(off))
    }
}

macro_rules! address_space {
    ($(#[$doc:meta])* $name:ident, $label:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(u64);

        impl $name {
            /// The address whose raw 64-bit value is `v`.
            #[inline]
            pub const fn new(v: u64) -> Self {
                Self(v)
            }
            /// The raw 64-bit value.
            #[inline]
            pub const fn raw(self) -> u64 {
                self.0
            }
            /// This address plus a byte offset, in the same space.
            #[inline]
            pub const fn add(self, off: u64) -> Self {
                Self(self.0.wrapping_add(off))
            }
            /// The base of the page of `size` holding this address.
            #[inline]
            pub const fn page_base(self, size: PageSize) -> Self {
                Self(self.0 & !size.offset_mask())
            }
            /// The offset of this address within its page of `size`.
            #[inline]
            pub const fn page_offset(self, size: PageSize) -> u64 {
                self.0 & size.offset_mask()
            }
            /// The page number of this address at page size `size`.
            #[inline]
            pub const fn page_number(self, size: PageSize) -> u64 {
                self.0 >> size.shift()
            }
        }

        impl Space for $name {
            const LABEL: &'static str = $label;
            #[inline]
            fn raw(self) -> u64 {
                self.0
            }
            #[inline]
            fn from_raw(v: u64) -> Self {
                $name(v)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($label, ":{:#x}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($label, " {:#x}"), self.0)
            }
        }
    };
}

address_space!(
    /// A guest virtual address: what the guest program issues.
    Gva,
    "gVA"
);
address_space!(
    /// A guest physical address: what the guest's page tables produce.
    Gpa,
    "gPA"
);
address_space!(
    /// A host physical address (seed 002's "system physical address", SPA): what reaches the
    /// caches and DRAM.
    Hpa,
    "hPA"
);

address_space!(
    /// An L1 physical address: the memory of an L1 hypervisor under nested virtualization,
    /// which holds its guest's (L2's) memory and the EPT12 tables mapping it, and which L0's
    /// nested tables (EPT01) map to host memory.
    L1pa,
    "l1PA"
);

impl L1pa {
    /// L1's physical memory is the guest-physical memory of L0's VM: the address EPT01
    /// translates.
    #[inline]
    pub const fn as_l0_gpa(self) -> Gpa {
        Gpa(self.0)
    }
}

impl Gpa {
    /// Native mode only: the guest's physical address space is the machine's.
    #[inline]
    pub const fn identity_hpa(self) -> Hpa {
        Hpa(self.0)
    }
}

/// A translation granule. x86 long mode and PAE map 4 KiB, 2 MiB and 1 GiB pages; 32-bit
/// non-PAE paging maps 4 KiB and 4 MiB pages (PSE).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum PageSize {
    /// 4 KiB.
    #[serde(rename = "4K")]
    Size4K,
    /// 2 MiB (a leaf at L2 in PAE / long mode).
    #[serde(rename = "2M")]
    Size2M,
    /// 4 MiB (a leaf at L2 in 32-bit paging with PSE).
    #[serde(rename = "4M")]
    Size4M,
    /// 1 GiB (a leaf at L3 in long mode).
    #[serde(rename = "1G")]
    Size1G,
}

impl PageSize {
    /// All page sizes, smallest first.
    pub const ALL: [PageSize; 4] = [
        PageSize::Size4K,
        PageSize::Size2M,
        PageSize::Size4M,
        PageSize::Size1G,
    ];

    /// The position of this size in [`PageSize::ALL`]: the one index every per-size counter
    /// and array uses.
    #[inline]
    pub const fn index(self) -> usize {
        match self {
            PageSize::Size4K => 0,
            PageSize::Size2M => 1,
            PageSize::Size4M => 2,
            PageSize::Size1G => 3,
        }
    }

    /// log2 of the size in bytes.
    #[inline]
    pub const fn shift(self) -> u32 {
        match self {
            PageSize::Size4K => 12,
            PageSize::Size2M => 21,
            PageSize::Size4M => 22,
            PageSize::Size1G => 30,
        }
    }

    /// Size in bytes.
    #[inline]
    pub const fn bytes(self) -> u64 {
        1 << self.shift()
    }

    /// Mask of the offset bits within a page.
    #[inline]
    pub const fn offset_mask(self) -> u64 {
        self.bytes() - 1
    }

    /// The short name used in configs and results: `4K`, `2M`, `4M`, `1G`.
    pub const fn name(self) -> &'static str {
        match self {
            PageSize::Size4K => "4K",
            PageSize::Size2M => "2M",
            PageSize::Size4M => "4M",
            PageSize::Size1G => "1G",
        }
    }

    /// Parses `4K`, `2M`, `4M`, `1G` (case-insensitive, `KiB`/`MiB`/`GiB` accepted).
    pub fn parse(s: &str) -> Option<PageSize> {
        match s
            .trim()
            .to_ascii_uppercase()
            .trim_end_matches("IB")
            .trim_end_matches('B')
        {
            "4K" => Some(PageSize::Size4K),
            "2M" => Some(PageSize::Size2M),
            "4M" => Some(PageSize::Size4M),
            "1G" => Some(PageSize::Size1G),
            _ => None,
        }
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a byte size such as `4096`, `64K`, `512KiB`, `4G`, `1.5M` (binary multiples).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .trim_end_matches("IB")
        .trim_end_matches('B')
        .trim_end();
    let (num, mult) = match body.chars().last()? {
        'K' => (&body[..body.len() - 1], 1u64 << 10),
        'M' => (&body[..body.len() - 1], 1u64 << 20),
        'G' => (&body[..body.len() - 1], 1u64 << 30),
        'T' => (&body[..body.len() - 1], 1u64 << 40),
        _ => (body, 1u64),
    };
    let num = num.trim().replace('_', "");
    if let Ok(v) = num.parse::<u64>() {
        return v.checked_mul(mult);
    }
    let f: f64 = num.parse().ok()?;
    if !(f.is_finite() && f >= 0.0) {
        return None;
    }
    let v = f * mult as f64;
    if v > u64::MAX as f64 {
        return None;
    }
    Some(v.round() as u64)
}

/// Parses a count such as `1000`, `1M` (10^6), `2.5K`, `1e6`, `1_000_000` (decimal multiples).
pub fn parse_count(s: &str) -> Option<u64> {
    let t = s.trim().replace('_', "");
    let upper = t.to_ascii_uppercase();
    let (num, mult) = match upper.chars().last()? {
        'K' => (&upper[..upper.len() - 1], 1e3),
        'M' => (&upper[..upper.len() - 1], 1e6),
        'G' | 'B' => (&upper[..upper.len() - 1], 1e9),
        _ => (upper.as_str(), 1.0),
    };
    if mult == 1.0 {
        if let Ok(v) = num.parse::<u64>() {
            return Some(v);
        }
    }
    let f: f64 = num.parse().ok()?;
    let v = f * mult;
    if !(v.is_finite() && v >= 0.0) || v > u64::MAX as f64 || v.fract() != 0.0 {
        return None;
    }
    Some(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_arithmetic_stays_in_its_space() {
        let a = Gva(0x1234_5678);
        assert_eq!(a.page_base(PageSize::Size4K), Gva(0x1234_5000));
        assert_eq!(a.page_offset(PageSize::Size2M), 0x14_5678);
        assert_eq!(a.page_number(PageSize::Size1G), 0);
        assert_eq!(format!("{a}"), "gVA 0x12345678");
    }

    #[test]
    fn sizes_parse_in_binary_multiples() {
        assert_eq!(parse_bytes("4K"), Some(4096));
        assert_eq!(parse_bytes("512KiB"), Some(512 << 10));
        assert_eq!(parse_bytes("1.5M"), Some(3 << 19));
        assert_eq!(parse_bytes("4G"), Some(4 << 30));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes("-1K"), None);
    }

    #[test]
    fn counts_parse_in_decimal_multiples() {
        assert_eq!(parse_count("1M"), Some(1_000_000));
        assert_eq!(parse_count("2.5K"), Some(2500));
        assert_eq!(parse_count("1e6"), Some(1_000_000));
        assert_eq!(parse_count("1_000"), Some(1000));
        assert_eq!(parse_count("0.5"), None);
        assert_eq!(parse_count("many"), None);
    }

    #[test]
    fn page_sizes_parse_by_name() {
        for s in PageSize::ALL {
            assert_eq!(PageSize::parse(s.name()), Some(s));
        }
        assert_eq!(PageSize::parse("2MiB"), Some(PageSize::Size2M));
        assert_eq!(PageSize::parse("8K"), None);
    }
}
