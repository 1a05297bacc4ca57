//! Results that subtract and add as typed values: the change of a result over a stretch of a
//! run (`later − earlier`) and sums of such changes. The oracle stitches its result from
//! stretches of two simulations this way (`crate::run`).
//!
//! The rules, one per kind of field ([`Tally`]):
//! - a count (`u64`) subtracts and adds modulo 2⁶⁴: a level that falls over a stretch (the
//!   shadow pages live) gives a change that wraps, and a sum of changes comes back to the
//!   level;
//! - a description (a name, a flag, a ratio, the configuration, a list) is taken from the later
//!   value: ratios are recomputed by whoever stitches;
//! - a map is taken key by key over the union of its keys, a key missing on one side counting
//!   as its other side's entry with every count zero;
//! - an optional part missing on either side is taken from the later value: the change of a
//!   part that appears is the part itself, and a sum whose later change lacks the part lacks
//!   it.
//!
//! Every counter struct lists its fields once, in [`counts!`], which destructures the struct
//! whole: a field added to one of them and not to its list does not compile.

use super::{
    AgileResult, BySide, CoreResult, CyclesByCause, GuestCounts, NestedCounts, OracleSummary,
    OsEvents, PagerLockCounts, RunResult, ShootdownCounts, SimInfo, SizingCounts, VcpuCounts,
    WalkCaches, Warmup, WindowRecord,
};
use crate::config::SimConfig;
use crate::hw::HitMiss;
use crate::shadow::ShadowStats;
use crate::vmm::exits::ExitCount;
use crate::vmm::AgileStats;
use std::collections::BTreeMap;
use std::ops::{Add, Sub};
use std::sync::Arc;

/// A value that has a change over a stretch and can take one (the rules of the module).
pub(crate) trait Tally: Sized {
    /// The change from `earlier` to `self`.
    fn since(&self, earlier: &Self) -> Self;
    /// `self` with `change` added.
    fn plus(&self, change: &Self) -> Self;
    /// `self` with every count zero and every description kept.
    fn zeroed(&self) -> Self;
}

impl Tally for u64 {
    fn since(&self, earlier: &Self) -> Self {
        self.wrapping_sub(*earlier)
    }
    fn plus(&self, change: &Self) -> Self {
        self.wrapping_add(*change)
    }
    fn zeroed(&self) -> Self {
        0
    }
}

/// Descriptions: the later value.
macro_rules! described {
    ($($t:ty),* $(,)?) => {$(
        impl Tally for $t {
            fn since(&self, _earlier: &Self) -> Self {
                self.clone()
            }
            fn plus(&self, change: &Self) -> Self {
                change.clone()
            }
            fn zeroed(&self) -> Self {
                self.clone()
            }
        }
    )*};
}

described!(
    String,
    bool,
    f64,
    Arc<SimConfig>,
    Vec<VcpuCounts>,
    Vec<WindowRecord>,
    OracleSummary,
    SizingCounts,
);

impl<T: Tally + Clone> Tally for Option<T> {
    fn since(&self, earlier: &Self) -> Self {
        match (self, earlier) {
            (Some(b), Some(a)) => Some(b.since(a)),
            (later, _) => later.clone(),
        }
    }
    fn plus(&self, change: &Self) -> Self {
        match (self, change) {
            (Some(a), Some(d)) => Some(a.plus(d)),
            (_, change) => change.clone(),
        }
    }
    fn zeroed(&self) -> Self {
        self.as_ref().map(T::zeroed)
    }
}

impl<T: Tally + Clone> Tally for BTreeMap<String, T> {
    fn since(&self, earlier: &Self) -> Self {
        let mut out = BTreeMap::new();
        for (k, b) in self {
            let d = match earlier.get(k) {
                Some(a) => b.since(a),
                None => b.since(&b.zeroed()),
            };
            out.insert(k.clone(), d);
        }
        for (k, a) in earlier {
            if !self.contains_key(k) {
                out.insert(k.clone(), a.zeroed().since(a));
            }
        }
        out
    }
    fn plus(&self, change: &Self) -> Self {
        let mut out = self.clone();
        for (k, d) in change {
            let sum = match self.get(k) {
                Some(a) => a.plus(d),
                None => d.clone(),
            };
            out.insert(k.clone(), sum);
        }
        out
    }
    fn zeroed(&self) -> Self {
        self.iter().map(|(k, v)| (k.clone(), v.zeroed())).collect()
    }
}

/// [`Tally`] field by field for each struct listed with its fields, and `Sub` (`later −
/// earlier`) and `Add` (`sum + change`) for those listed under `ops` — the counter structs,
/// whose every field is a count or a counter struct.
macro_rules! counts {
    (@tally $($t:ident { $($f:ident),* })*) => {$(
        impl Tally for $t {
            fn since(&self, earlier: &Self) -> Self {
                let $t { $($f),* } = self;
                $t { $($f: $f.since(&earlier.$f)),* }
            }
            fn plus(&self, change: &Self) -> Self {
                let $t { $($f),* } = self;
                $t { $($f: $f.plus(&change.$f)),* }
            }
            fn zeroed(&self) -> Self {
                let $t { $($f),* } = self;
                $t { $($f: $f.zeroed()),* }
            }
        }
    )*};
    ($(ops $t:ident { $($f:ident),* $(,)? })* $(; $u:ident { $($g:ident),* $(,)? })*) => {
        counts!(@tally $($t { $($f),* })* $($u { $($g),* })*);
        $(
            impl Sub for $t {
                type Output = $t;
                fn sub(self, earlier: $t) -> $t {
                    self.since(&earlier)
                }
            }
            impl Add for $t {
                type Output = $t;
                fn add(self, change: $t) -> $t {
                    self.plus(&change)
                }
            }
        )*
    };
}

counts! {
    ops HitMiss { hits, misses }
    ops BySide { instr, data }
    ops WalkCaches { pwc, ntlb, psc }
    ops Warmup { events, refs, instructions }
    ops CyclesByCause {
        base, translation, data, guest_kernel, hypervisor, mode_switch, shootdown_wait,
        pager_lock_wait,
    }
    ops GuestCounts {
        pages_populated, pages_mapped_4k, pages_mapped_2m, pages_mapped_4m, pages_mapped_1g,
        table_frames, processes, unmapped_touches, thp_fault_alloc, thp_fault_fallback,
        thp_collapse_alloc, thp_collapse_alloc_failed, thp_split_pmd, hugetlb_fallback,
        pages_zapped, khugepaged_wakeups,
    }
    ops NestedCounts { pages_4k, pages_2m, pages_1g, table_frames }
    ops OsEvents { cr3_writes, invlpgs, tlb_flushes, vm_flushes, psc_flushes, tlb_hit_faults }
    ops ShadowStats {
        pages_built, pages_removed, pages_live, fills, prefetched, resyncs, revalidated,
        oos_writes, unshadowed, evictions, root_hits, root_misses, backed,
    }
    ops ShootdownCounts {
        shootdowns, ipis, remote_invlpgs, remote_context_flushes, handler_cycles, wait_cycles,
        remote_flushes, remote_flush_cycles,
    }
    ops PagerLockCounts { holds, contended, wait_cycles, held_cycles }
    ops AgileStats { to_nested, to_shadow, exits_avoided, scans, nested_tables }
    ;
    ExitCount { count, cycles, world_switch }
    ;
    AgileResult { policy, walks_by_shadow_levels }
    ;
    SimInfo { events, seconds, events_per_second }
    ;
    CoreResult {
        model, dependences, cycles_additive, cycles_by_cause_additive, stall_by_reason,
        walker_wait_cycles, mshr_wait_cycles,
    }
    ;
    RunResult {
        schema, mode, policy, machine, workload, pwc_design, seed, technique, profile,
        instructions, memory_refs, fetches, cycles, cpi, tlb, walks, walk_faults,
        walk_faults_by_side, d_assists, ad_updates, walk_refs, walk_refs_per_walk,
        walk_refs_by_step, pwc_hits_by_step, walk_refs_served_by, walk_caches, caches, exits,
        world_switches, shadow, cycles_by_cause, core, mode_switches, instructions_in_mode,
        page_faults, page_faults_by_side, cow_faults, guest, nested, os_events,
        checked_translations, warmup, config, sim, elapsed_cycles, vcpus, shootdowns,
        pager_lock, timeline, oracle, sizing, agile,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(count: u64, cycles: u64) -> ExitCount {
        ExitCount {
            count,
            cycles,
            world_switch: true,
        }
    }

    #[test]
    fn changes_cover_the_union_of_keys_and_sum_back() {
        let a: BTreeMap<String, ExitCount> = [("pt_write".to_string(), exit(2, 10))].into();
        let b: BTreeMap<String, ExitCount> = [
            ("pt_write".to_string(), exit(5, 40)),
            ("invlpg".to_string(), exit(1, 7)),
        ]
        .into();
        let d = b.since(&a);
        assert_eq!(d["pt_write"], exit(3, 30));
        assert_eq!(d["invlpg"], exit(1, 7));
        assert_eq!(a.plus(&d), b);
        // A key only the earlier side has changes by minus its counts.
        let back = a.since(&b);
        assert_eq!(back["invlpg"].count, 1u64.wrapping_neg());
        assert_eq!(b.plus(&back), {
            let mut m = a.clone();
            m.insert("invlpg".to_string(), exit(0, 0));
            m
        });
    }

    #[test]
    fn a_level_that_falls_wraps_and_sums_back() {
        let a = ShadowStats {
            pages_live: 7,
            pages_built: 7,
            ..ShadowStats::default()
        };
        let b = ShadowStats {
            pages_live: 3,
            pages_built: 9,
            pages_removed: 6,
            ..ShadowStats::default()
        };
        let d = b - a;
        assert_eq!(d.pages_built, 2);
        assert_eq!(d.pages_live, 4u64.wrapping_neg());
        assert_eq!(a + d, b);
    }

    #[test]
    fn an_optional_part_is_taken_from_the_later_side_when_one_lacks_it() {
        let s = Some(HitMiss { hits: 4, misses: 1 });
        assert_eq!(s.since(&None), s);
        assert_eq!(None.since(&s), None::<HitMiss>);
        assert_eq!(s.plus(&None), None);
        assert_eq!(None.plus(&s), s);
        assert_eq!(
            s.plus(&s),
            Some(HitMiss { hits: 8, misses: 2 }),
            "both present: added"
        );
    }
}
