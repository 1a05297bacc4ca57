//! The cross-field rules of a configuration, checked once before anything is built; each error
//! names the dotted path of the field.

use super::*;
use crate::error::{Error, Result};

impl SimConfig {
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
        self.validate_hypervisor()?;
        let w = &self.warmup;
        if w.refs > 0 && w.instructions > 0 {
            return Err(Error::config(
                "warmup",
                "give the warm-up in references or in instructions, not both",
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

impl SimConfig {
    /// The hypervisor's rules: mode switches and backing against the mode and technique.
    fn validate_hypervisor(&self) -> Result<()> {
        let h = &self.hypervisor;
        let at = &h.switch.at;
        if let Some(w) = at.windows(2).find(|w| w[1] <= w[0]) {
            return Err(Error::config(
                "hypervisor.switch.at",
                format!(
                    "switch points must be strictly increasing instruction counts ({} then {})",
                    w[0], w[1]
                ),
            ));
        }
        let direct = self.mode == Mode::Shadow && h.technique != Technique::Hvm;
        if !at.is_empty() {
            if self.mode == Mode::Native {
                return Err(Error::config(
                    "hypervisor.switch.at",
                    "a native run has no hypervisor to switch paging modes; start in nested \
                     or shadow mode",
                ));
            }
            if direct {
                return Err(Error::config(
                    "hypervisor.switch.at",
                    format!(
                        "technique `{}` uses direct paging, whose guest tables hold machine \
                         frames: it cannot switch to nested paging (switching needs \
                         technique = \"hvm\")",
                        h.technique.name()
                    ),
                ));
            }
        }
        if direct && h.backing == Backing::Lazy {
            return Err(Error::config(
                "hypervisor.backing",
                format!(
                    "technique `{}` uses direct paging, which hands the guest machine frames \
                     when it allocates them: lazy backing needs nested or shadow (hvm) paging",
                    h.technique.name()
                ),
            ));
        }
        Ok(())
    }
}
