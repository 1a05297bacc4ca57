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
        if m.caches.levels.len() > CacheConfig::MAX_LEVELS {
            return Err(Error::config(
                "machine.caches.levels",
                format!(
                    "{} levels; at most {}",
                    m.caches.levels.len(),
                    CacheConfig::MAX_LEVELS
                ),
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
            if !c.shared && i > 0 && m.caches.levels[i - 1].shared {
                return Err(Error::config(
                    format!("{f}.shared"),
                    format!(
                        "a private level below the shared level {:?}: the levels shared by \
                         all cores must be the last ones",
                        m.caches.levels[i - 1].name
                    ),
                ));
            }
        }
        if m.core.cores == 0 {
            return Err(Error::config("machine.core.cores", "must be at least 1"));
        }
        self.validate_window()?;
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
        let g = &self.guest;
        if g.vcpus == 0 {
            return Err(Error::config("guest.vcpus", "must be at least 1"));
        }
        if g.vcpus > self.machine.core.cores && !g.overcommit {
            return Err(Error::config(
                "guest.vcpus",
                format!(
                    "{} vCPUs on the {}-core machine {:?}: vCPUs would time-share cores, which \
                     vmmu does not model; use at most {} or set guest.overcommit = true",
                    g.vcpus, self.machine.core.cores, self.machine.name, self.machine.core.cores
                ),
            ));
        }
        if g.time_slice == 0 {
            return Err(Error::config(
                "guest.time_slice",
                "must be at least 1 cycle",
            ));
        }
        for (tid, &v) in &g.affinity {
            let field = format!("guest.affinity.{tid}");
            if tid.parse::<u32>().is_err() {
                return Err(Error::config(
                    field,
                    "the key must be a thread id (a number)",
                ));
            }
            if v >= g.vcpus {
                return Err(Error::config(
                    field,
                    format!(
                        "pins thread {tid} to vCPU {v}, which does not exist: the guest has {} \
                         vCPU(s), numbered from 0",
                        g.vcpus
                    ),
                ));
            }
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
        self.validate_policy()?;
        self.validate_sizing()?;
        self.validate_nested_virt()?;
        self.validate_agile()?;
        let w = &self.warmup;
        if w.refs > 0 && w.instructions > 0 {
            return Err(Error::config(
                "warmup",
                "give the warm-up in references or in instructions, not both",
            ));
        }
        if w.phase.is_some() && (w.refs > 0 || w.instructions > 0) {
            return Err(Error::config(
                "warmup.phase",
                "a warm-up that ends at a phase marker has no count of references or \
                 instructions too: give one of them, not both",
            ));
        }
        if self.stop.phase.is_some() && self.guest.vcpus > 1 {
            return Err(Error::config(
                "stop.phase",
                format!(
                    "a stop at a phase marker ends a one-vCPU run (guest.vcpus = {}): with \
                     several the marker's place among the vCPUs' events is the scheduler's",
                    self.guest.vcpus
                ),
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
        if self.guest.hugetlb_pages.saturating_mul(2 << 20) > gmem {
            return Err(Error::config(
                "guest.hugetlb_pages",
                format!(
                    "{} pages of 2 MiB do not fit in guest.memory ({gmem} bytes)",
                    self.guest.hugetlb_pages
                ),
            ));
        }
        let k = &self.guest.khugepaged;
        if k.pages_to_scan == 0 {
            return Err(Error::config(
                "guest.khugepaged.pages_to_scan",
                "must be at least 1 (Linux refuses 0; set scan_sleep_millisecs = 0 to stop \
                 khugepaged)",
            ));
        }
        for (field, v) in [
            ("guest.khugepaged.max_ptes_none", k.max_ptes_none),
            ("guest.khugepaged.max_ptes_shared", k.max_ptes_shared),
        ] {
            if v > 511 {
                return Err(Error::config(
                    field,
                    format!("a 2 MiB range has 512 entries: at most 511 (found {v})"),
                ));
            }
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
    /// A sizing study: an L2 array to resize, valid sizes, and a run whose L2 operations do
    /// not depend on the L2's size (one vCPU, no adaptive policy).
    fn validate_sizing(&self) -> Result<()> {
        let Some(s) = &self.sizing else {
            return Ok(());
        };
        let l2 = &self.machine.tlb.l2;
        if l2.is_empty() {
            return Err(Error::config(
                "sizing",
                format!("machine {:?} has no L2 TLB to size", self.machine.name),
            ));
        }
        if s.array >= l2.len() {
            return Err(Error::config(
                "sizing.array",
                format!(
                    "{} names no array: machine.tlb.l2 has {} (numbered from 0)",
                    s.array,
                    l2.len()
                ),
            ));
        }
        if s.sizes.is_empty() {
            return Err(Error::config("sizing.sizes", "lists no size"));
        }
        if s.sizes.len() > SIZING_MAX_SIZES {
            return Err(Error::config(
                "sizing.sizes",
                format!(
                    "{} sizes; at most {SIZING_MAX_SIZES} in one run",
                    s.sizes.len()
                ),
            ));
        }
        for (i, z) in s.sizes.iter().enumerate() {
            check_sets(&format!("sizing.sizes[{i}]"), z.entries, z.ways)?;
        }
        if self.guest.vcpus > 1 {
            return Err(Error::config(
                "sizing",
                "a one-pass sizing study needs one vCPU: with several, the scheduler follows \
                 the vCPUs' clocks, which the L2 TLB's size changes (run one simulation per \
                 size instead)",
            ));
        }
        if self.mode == Mode::Adaptive {
            return Err(Error::config(
                "sizing",
                "a one-pass sizing study cannot run in adaptive mode: the policy reads TLB \
                 misses and cycles, which the L2 TLB's size changes (run one simulation per \
                 size instead)",
            ));
        }
        Ok(())
    }

    /// The hypervisor's rules: mode switches and backing against the mode and technique.
    /// The out-of-order window: each size at least 1 where given (0 walkers could never
    /// finish a walk, 0 MSHRs a miss, a reorder buffer of 0 never dispatch), and all of them
    /// given when the interval model reads them.
    fn validate_window(&self) -> Result<()> {
        let core = &self.machine.core;
        for (name, value) in core.window_fields() {
            let field = format!("machine.core.{name}");
            match value {
                Some(0) => return Err(Error::config(field, "must be at least 1")),
                None if core.model == CoreModel::Interval => {
                    return Err(Error::config(
                        field,
                        format!(
                            "the interval core model needs it: give the machine's {} (see \
                             docs/machines.md, \"The core\")",
                            window_meaning(name)
                        ),
                    ))
                }
                Some(v) if v > MAX_WINDOW => {
                    return Err(Error::config(
                        field,
                        format!("{v} is more than the {MAX_WINDOW} the interval model holds"),
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

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

impl SimConfig {
    /// An adaptive run and its policy: the policy belongs to adaptive mode, which needs shadow
    /// paging by trap-and-emulate to switch, and whose switches are the policy's alone.
    fn validate_policy(&self) -> Result<()> {
        let h = &self.hypervisor;
        match (self.mode, &self.policy) {
            (Mode::Adaptive, None) => {
                return Err(Error::config(
                    "policy",
                    format!(
                        "mode = \"adaptive\" needs a policy: policy.kind = {}",
                        POLICY_KINDS.join(" | ")
                    ),
                ))
            }
            (
                Mode::Native | Mode::Nested | Mode::Shadow | Mode::NestedVirt | Mode::Agile,
                Some(p),
            ) => {
                return Err(Error::config(
                    "policy",
                    format!(
                        "policy `{}` switches the paging mode of an adaptive run; this run's \
                         mode is `{}` (use mode = \"adaptive\")",
                        p.kind(),
                        self.mode.name()
                    ),
                ))
            }
            (Mode::Native | Mode::Nested | Mode::Shadow | Mode::NestedVirt | Mode::Agile, None) => {
                return Ok(())
            }
            (Mode::Adaptive, Some(_)) => {}
        }
        if self.guest.vcpus > 1 {
            return Err(Error::config(
                "guest.vcpus",
                format!(
                    "an adaptive run's policy reads one core's performance counters, and the \
                     oracle runs its static simulations in lockstep on one vCPU: adaptive runs \
                     have one vCPU (this one asks for {})",
                    self.guest.vcpus
                ),
            ));
        }
        if h.technique != Technique::Hvm {
            return Err(Error::config(
                "hypervisor.technique",
                format!(
                    "technique `{}` uses direct paging, whose guest tables hold machine frames: \
                     an adaptive run switches between shadow paging by trap-and-emulate and \
                     nested paging (technique = \"hvm\")",
                    h.technique.name()
                ),
            ));
        }
        if !h.switch.at.is_empty() {
            return Err(Error::config(
                "hypervisor.switch.at",
                "an adaptive run switches when its policy decides; give either a policy or \
                 switch points, not both",
            ));
        }
        match self.policy.as_ref().expect("matched above") {
            PolicyConfig::Dav2m(c) => validate_dav2m(c),
            PolicyConfig::Costmodel(c) => {
                check_scale(c.time_scale, c.window_inst)?;
                at_least_one("policy.average", c.average)?;
                if !(c.hysteresis.is_finite() && c.hysteresis >= 0.0) {
                    return Err(Error::config(
                        "policy.hysteresis",
                        "must be a number of at least 0 (the fraction of a switch's cost the \
                         accumulated gain must exceed it by)",
                    ));
                }
                Ok(())
            }
            PolicyConfig::Oracle(c)
            | PolicyConfig::StaticShadow(c)
            | PolicyConfig::StaticNested(c) => check_scale(c.time_scale, c.window_inst),
        }
    }
}

/// `time_scale` and `window_inst`: positive, and the scaled window at least one instruction.
fn check_scale(time_scale: f64, window_inst: f64) -> Result<()> {
    if !(time_scale.is_finite() && time_scale > 0.0) {
        return Err(Error::config(
            "policy.time_scale",
            format!("must be a positive number (found {time_scale})"),
        ));
    }
    positive("policy.window_inst", window_inst)?;
    if window_inst * time_scale < 1.0 {
        return Err(Error::config(
            "policy.window_inst",
            format!(
                "{window_inst} instructions × time_scale {time_scale} is less than one \
                 instruction"
            ),
        ));
    }
    Ok(())
}

fn positive(field: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Error::config(
            field,
            format!("must be a positive number (found {v})"),
        ))
    }
}

fn at_least_one(field: &str, v: u32) -> Result<()> {
    if v >= 1 {
        Ok(())
    } else {
        Err(Error::config(field, "must be at least 1"))
    }
}

/// DAV²M's rules (seed 001 §7): positive windows in the order window_inst ≤ window_vexit <
/// window_tmiss < window_trans, each a whole number of PMU windows (the policy counts time in
/// PMU overflows), Prepaging ending after PreNested, pFactor ≥ 1, thresholds that can only
/// rise.
fn validate_dav2m(c: &Dav2mConfig) -> Result<()> {
    check_scale(c.time_scale, c.window_inst)?;
    let windows = [
        ("policy.window_vexit", c.window_vexit),
        ("policy.window_tmiss", c.window_tmiss),
        ("policy.window_trans", c.window_trans),
        ("policy.window_prepaging", c.window_prepaging),
    ];
    for (f, w) in windows {
        positive(f, w)?;
    }
    let order = [
        (
            "policy.window_vexit",
            c.window_inst <= c.window_vexit,
            "window_inst ≤ window_vexit",
        ),
        (
            "policy.window_tmiss",
            c.window_vexit < c.window_tmiss,
            "window_vexit < window_tmiss",
        ),
        (
            "policy.window_trans",
            c.window_tmiss < c.window_trans,
            "window_tmiss < window_trans",
        ),
        (
            "policy.window_prepaging",
            c.window_vexit < c.window_prepaging,
            "window_vexit < window_prepaging (Prepaging follows PreNested)",
        ),
    ];
    for (f, holds, rule) in order {
        if !holds {
            return Err(Error::config(
                f,
                format!(
                    "windows out of order: seed 001 §7 requires window_inst ≤ window_vexit < \
                     window_tmiss < window_trans; {rule} fails (window_inst {}, window_vexit {}, \
                     window_tmiss {}, window_trans {}, window_prepaging {})",
                    c.window_inst,
                    c.window_vexit,
                    c.window_tmiss,
                    c.window_trans,
                    c.window_prepaging
                ),
            ));
        }
    }
    for (f, w) in windows {
        let units = w / c.window_inst;
        if (units - units.round()).abs() > 1e-9 * units.max(1.0) {
            return Err(Error::config(
                f,
                format!(
                    "{w} is not a whole number of PMU windows (window_inst = {}): the policy \
                     counts time in PMU overflows",
                    c.window_inst
                ),
            ));
        }
    }
    if !(c.p_factor.is_finite() && c.p_factor >= 1.0) {
        return Err(Error::config(
            "policy.p_factor",
            format!(
                "must be at least 1 (found {}): a probed mode is kept unless its CPI exceeds the \
                 other's by this factor",
                c.p_factor
            ),
        ));
    }
    for (f, t) in [
        ("policy.threshold_vexit", c.threshold_vexit),
        ("policy.threshold_tmiss", c.threshold_tmiss),
    ] {
        if !(t.is_finite() && t >= 0.0) {
            return Err(Error::config(
                f,
                format!("must be a count of at least 0 (found {t})"),
            ));
        }
    }
    if !(c.threshold_step.is_finite() && c.threshold_step >= 1.0) {
        return Err(Error::config(
            "policy.threshold_step",
            format!(
                "must be at least 1 (found {}): thresholds are only ever raised",
                c.threshold_step
            ),
        ));
    }
    at_least_one("policy.cpi_average", c.cpi_average)?;
    if c.cpi_average > 1024 {
        return Err(Error::config(
            "policy.cpi_average",
            "must be at most 1024 windows",
        ));
    }
    Ok(())
}

/// The largest size of any window structure (the model keeps one entry per element).
const MAX_WINDOW: u32 = 1 << 16;

/// What each window field counts, for error messages.
fn window_meaning(name: &str) -> &'static str {
    match name {
        "rob" => "reorder-buffer entries",
        "load_queue" => "load-queue entries",
        "store_queue" => "store-queue entries",
        "mshrs" => "L1 data-cache miss-status registers",
        _ => "page walkers",
    }
}

impl SimConfig {
    /// Nested virtualization: its section belongs to its mode, whose L1 hypervisor runs the
    /// guest with hardware virtualization (technique `hvm`) in one paging mode.
    fn validate_nested_virt(&self) -> Result<()> {
        let is_mode = self.mode == Mode::NestedVirt;
        let Some(nv) = &self.nested_virt else {
            return Ok(());
        };
        if !is_mode {
            return Err(Error::config(
                "nested_virt.l1",
                format!(
                    "an L1 hypervisor (l1 = \"{}\") runs only under mode = \"nested-virt\"; \
                     this run's mode is `{}`",
                    nv.l1.name(),
                    self.mode.name()
                ),
            ));
        }
        if self.hypervisor.technique != Technique::Hvm {
            return Err(Error::config(
                "hypervisor.technique",
                format!(
                    "technique `{}` is direct paging of a single-level guest; a nested-virt \
                     run's L1 hypervisor uses hardware virtualization (technique = \"hvm\")",
                    self.hypervisor.technique.name()
                ),
            ));
        }
        if !self.hypervisor.switch.at.is_empty() {
            return Err(Error::config(
                "hypervisor.switch.at",
                "a nested-virt run keeps its L1 kind for the whole run; it cannot switch \
                 paging modes",
            ));
        }
        let l1 = nv.l1_bytes(self.guest.memory.0);
        if l1 < self.guest.memory.0 {
            return Err(Error::config(
                "nested_virt.l1_memory",
                format!(
                    "L1's memory ({l1} bytes) must hold the L2 guest's (guest.memory = {} \
                     bytes)",
                    self.guest.memory.0
                ),
            ));
        }
        if l1 > self.host.memory.0 {
            return Err(Error::config(
                "nested_virt.l1_memory",
                format!(
                    "L1's memory ({l1} bytes) exceeds the host's (host.memory = {} bytes); \
                     L1's memory defaults to twice guest.memory",
                    self.host.memory.0
                ),
            ));
        }
        Ok(())
    }

    /// Agile paging: its section belongs to its mode, whose shadow part is trap-and-emulate
    /// (technique `hvm`), and which keeps one mode for the run.
    fn validate_agile(&self) -> Result<()> {
        if self.agile.is_some() && self.mode != Mode::Agile {
            return Err(Error::config(
                "agile",
                format!(
                    "the [agile] section belongs to mode = \"agile\"; this run's mode is `{}`",
                    self.mode.name()
                ),
            ));
        }
        if self.mode != Mode::Agile {
            return Ok(());
        }
        if self.hypervisor.technique != Technique::Hvm {
            return Err(Error::config(
                "hypervisor.technique",
                format!(
                    "agile paging's shadow part is trap-and-emulate (technique = \"hvm\"); \
                     technique `{}` is direct paging",
                    self.hypervisor.technique.name()
                ),
            ));
        }
        if !self.hypervisor.switch.at.is_empty() {
            return Err(Error::config(
                "hypervisor.switch.at",
                "an agile run moves subtrees between shadow and nested mode itself; it does \
                 not switch the whole VM's mode",
            ));
        }
        let a = self.agile.unwrap_or_default();
        if a.write_threshold == 0 {
            return Err(Error::config(
                "agile.write_threshold",
                "must be at least 1 (the emulated writes that move a guest table to nested mode)",
            ));
        }
        if a.scan_interval == 0 {
            return Err(Error::config(
                "agile.scan_interval",
                "must be at least 1 instruction (the interval of the dirty-bit scans)",
            ));
        }
        Ok(())
    }
}
