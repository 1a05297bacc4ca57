//! The result of a run as plain data: schema `vmmu.result/1` (docs/statistics.md defines every
//! field and its unit). Keys are stable; new keys may be added, none removed or renamed
//! without a new schema version.

use crate::config::Mode;
use crate::sim::Simulator;
use crate::walk::step::{step_name, COL_G, GRID};
use serde_json::{json, Map, Value};

/// The schema identifier written into every result.
pub const SCHEMA: &str = "vmmu.result/1";

fn hm(h: crate::hw::HitMiss) -> Value {
    json!({"hits": h.hits, "misses": h.misses})
}

/// Builds the result object of a finished simulation.
pub fn result_json(sim: &Simulator, workload: &str, seconds: f64) -> Value {
    let cfg = &sim.cfg;
    let c = &sim.counters;
    let w = &sim.hw.stats;
    let native = cfg.mode != Mode::Nested;
    let base = (c.instructions as f64 * cfg.machine.core.base_cpi).round() as u64;
    let cyc = &c.cycles;
    let cycles = base + cyc.translation + cyc.data + cyc.guest_kernel + cyc.hypervisor;

    let mut tlb = Map::new();
    for (name, h) in sim.tlb.stats() {
        tlb.insert(name.to_string(), hm(h));
    }
    let mut by_step = Map::new();
    for col in 0..GRID {
        for row in 0..GRID {
            let n = w.refs[col][row];
            if n == 0 || (native && col != COL_G) {
                continue;
            }
            by_step.insert(step_name(col, row, native), json!(n));
        }
    }
    let mut served = Map::new();
    served.insert("pwc".into(), json!(w.served_pwc));
    let cache_stats = sim.hw.caches.stats();
    for (i, (name, _)) in cache_stats.iter().enumerate() {
        served.insert(name.clone(), json!(w.served_level[i]));
    }
    served.insert("dram".into(), json!(w.served_level[cache_stats.len()]));
    let mut caches = Map::new();
    for (name, h) in cache_stats {
        caches.insert(name, hm(h));
    }
    let os = &sim.os.stats;
    let nested = sim.vmm.as_ref().map(|v| {
        json!({
            "pages_4k": v.stats.nested_pages[0],
            "pages_2m": v.stats.nested_pages[1],
            "pages_1g": v.stats.nested_pages[3],
            "table_frames": v.stats.nested_table_frames,
        })
    });
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    json!({
        "schema": SCHEMA,
        "mode": cfg.mode.name(),
        "machine": cfg.machine.name,
        "workload": workload,
        "pwc_design": cfg.machine.pwc.design.name(),
        "seed": cfg.seed,
        "instructions": c.instructions,
        "memory_refs": c.memory_refs,
        "fetches": c.fetches,
        "cycles": cycles,
        "cpi": ratio(cycles, c.instructions),
        "tlb": tlb,
        "walks": w.walks,
        "walk_faults": w.walk_faults,
        "ad_updates": w.ad_updates,
        "walk_refs": w.total_refs(),
        "walk_refs_per_walk": ratio(w.total_refs(), w.walks),
        "walk_refs_by_step": by_step,
        "walk_refs_served_by": served,
        "walk_cache_hits": {"ntlb": w.ntlb_hits, "psc": w.psc_hits},
        "pwc": hm(sim.hw.pwc.stats()),
        "ntlb": hm(sim.hw.ntlb.stats()),
        "caches": caches,
        "technique": match cfg.mode {
            Mode::Shadow => serde_json::to_value(cfg.hypervisor.technique).unwrap_or(Value::Null),
            _ => Value::Null,
        },
        "profile": if cfg.mode == Mode::Native { Value::Null } else { json!(cfg.hypervisor.profile) },
        "exits": sim.exits.to_json(),
        "world_switches": sim.exits.world_switches(),
        "shadow": sim.shadow.as_ref().map(|sp| {
            let st = &sp.stats;
            json!({
                "pages_built": st.pages_built,
                "pages_removed": st.pages_removed,
                "pages_live": sp.page_count(),
                "fills": st.fills,
                "prefetched": st.prefetched,
                "resyncs": st.resyncs,
                "oos_writes": st.oos_writes,
                "unshadowed": st.unshadowed,
                "evictions": st.evictions,
                "root_hits": st.root_hits,
                "root_misses": st.root_misses,
            })
        }),
        "cycles_by_cause": {
            "base": base,
            "translation": cyc.translation,
            "data": cyc.data,
            "guest_kernel": cyc.guest_kernel,
            "hypervisor": cyc.hypervisor,
        },
        "mode_switches": 0,
        "instructions_in_mode": { cfg.mode.name(): c.instructions },
        "page_faults": os.page_faults,
        "cow_faults": os.cow_faults,
        "guest": {
            "pages_populated": os.pages_populated,
            "pages_mapped_4k": os.pages_mapped[0],
            "pages_mapped_2m": os.pages_mapped[1],
            "pages_mapped_4m": os.pages_mapped[2],
            "pages_mapped_1g": os.pages_mapped[3],
            "table_frames": os.table_frames,
            "processes": os.processes,
            "unmapped_touches": os.unmapped_touches,
        },
        "nested": nested,
        "os_events": {
            "cr3_writes": c.cr3_writes,
            "invlpgs": c.invlpgs,
            "tlb_flushes": c.tlb_flushes,
            "dirty_updates": c.dirty_updates,
            "tlb_hit_faults": c.tlb_hit_faults,
        },
        "checked_translations": c.checked,
        "config": serde_json::to_value(cfg).unwrap_or(Value::Null),
        "sim": {
            "events": c.events,
            "seconds": seconds,
            "events_per_second": if seconds > 0.0 { c.events as f64 / seconds } else { 0.0 },
        },
    })
}
