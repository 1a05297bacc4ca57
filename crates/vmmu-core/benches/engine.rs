//! Micro-benchmarks of the hardware structures and simulated memory, sized as the bhargava08
//! preset (seed 002 Table 2): `cargo bench -p vmmu-core --bench engine` (`make bench-micro`).
//!
//! Each benchmark times one operation in a loop over a precomputed address sequence (a
//! power-of-two table indexed by the iteration count, so the loop itself costs two
//! instructions). "hit" sequences cycle over entries the structure holds; "miss" sequences draw
//! addresses from a range far larger than the structure, so nearly every operation misses and
//! fills. Each result is reduced to one word before `black_box` (a whole translation copied out
//! costs a store-forwarding stall that the simulator does not pay). The end-to-end figures are `make bench`'s (crates/vmmu-bench).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use vmmu_core::config::load_machine;
use vmmu_core::hw::cache::MemoryHierarchy;
use vmmu_core::hw::ntlb::Ntlb;
use vmmu_core::hw::psc::Psc;
use vmmu_core::hw::pwc::Pwc;
use vmmu_core::hw::tlb::{Tag, TlbHierarchy, TlbSide, Translation};
use vmmu_core::mem::PhysMem;
use vmmu_core::{Gpa, Gva, Hpa, PageSize};

/// Length of every address table (a power of two).
const N: usize = 1 << 14;

/// `N` pseudo-random values below `range`, aligned to `align` (a fixed LCG: the same sequence
/// every run).
fn addresses(range: u64, align: u64) -> Vec<u64> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..N)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 11) % range) & !(align - 1)
        })
        .collect()
}

fn translation(page: u64) -> Translation {
    Translation {
        page: Hpa::new(page),
        size: PageSize::Size4K,
        writable: true,
        user: true,
        executable: false,
        dirty: true,
        global: false,
    }
}

const TAG: Tag = Tag { pcid: 1, vpid: 1 };

fn tlb(c: &mut Criterion) {
    let m = load_machine("bhargava08").expect("preset");
    // Hits in the 64-entry L1: 48 pages, visited in a scrambled order so that the remembered
    // last hit never answers.
    let mut t = TlbHierarchy::new(&m.tlb);
    let pages: Vec<u64> = (0..48u64).map(|i| (i * 37 % 48) << 12).collect();
    for &p in &pages {
        t.fill(Gva::new(p), TlbSide::Data, TAG, translation(p));
    }
    let hits: Vec<u64> = (0..N).map(|i| pages[i % 48] + 8).collect();
    c.bench_function("tlb/lookup L1 hit", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(
                t.lookup(Gva::new(hits[i]), TlbSide::Data, TAG)
                    .map(|(_, t)| t.page),
            )
        })
    });
    // Hits in the L2 (512 entries, 4-way) after L1 misses: 400 pages.
    let mut t = TlbHierarchy::new(&m.tlb);
    let pages: Vec<u64> = (0..400u64).map(|i| (i * 7919 % 400) << 12).collect();
    for &p in &pages {
        t.fill(Gva::new(p), TlbSide::Data, TAG, translation(p));
    }
    let l2: Vec<u64> = (0..N).map(|i| pages[i % 400]).collect();
    c.bench_function("tlb/lookup L2 hit (fills L1)", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(
                t.lookup(Gva::new(l2[i]), TlbSide::Data, TAG)
                    .map(|(_, t)| t.page),
            )
        })
    });
    // Misses at both levels, each followed by the walk's fill (as the simulator does).
    let mut t = TlbHierarchy::new(&m.tlb);
    let far = addresses(1 << 36, 4096);
    c.bench_function("tlb/lookup miss + fill", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            let va = Gva::new(far[i]);
            if t.lookup(va, TlbSide::Data, TAG).is_none() {
                t.fill(va, TlbSide::Data, TAG, translation(far[i]));
            }
        })
    });
}

fn caches(c: &mut Criterion) {
    let m = load_machine("bhargava08").expect("preset");
    let mut h = MemoryHierarchy::new(&m.caches);
    // 16 KiB of lines: all L1 hits after the first pass, in an order that defeats the
    // remembered last line.
    let near = addresses(16 << 10, 64);
    for &a in &near {
        h.access(Hpa::new(a), 0);
    }
    c.bench_function("cache/access L1 hit", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(h.access(Hpa::new(near[i]), 0).1)
        })
    });
    // 256 MiB: misses at every level (and fills).
    let far = addresses(256 << 20, 64);
    c.bench_function("cache/access miss to DRAM", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(h.access(Hpa::new(far[i]), 0).1)
        })
    });
    // Page entries start at L2: 256 KiB of entries hit there.
    let l2 = h.level_index("l2").expect("l2");
    let mid = addresses(256 << 10, 8);
    for &a in &mid {
        h.access(Hpa::new(a), l2);
    }
    c.bench_function("cache/access page entry, L2 hit", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(h.access(Hpa::new(mid[i]), l2).1)
        })
    });
}

fn walk_caches(c: &mut Criterion) {
    // PWC: 24 entries, fully associative.
    let mut p = Pwc::new(24, 24);
    let held: Vec<u64> = (0..16u64).map(|i| 0x10_0000 + i * 0x1008).collect();
    for &e in &held {
        p.fill(Hpa::new(e));
    }
    let hits: Vec<u64> = (0..N).map(|i| held[i * 7 % 16]).collect();
    c.bench_function("pwc/lookup hit", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(p.lookup(Hpa::new(hits[i])))
        })
    });
    let far = addresses(1 << 30, 8);
    c.bench_function("pwc/lookup miss + fill", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            if !p.lookup(Hpa::new(far[i])) {
                p.fill(Hpa::new(far[i]));
            }
        })
    });
    // NTLB: 16 entries, fully associative, 4 KiB nested pages.
    let mut n = Ntlb::new(16, 16);
    for i in 0..12u64 {
        n.fill(
            Gpa::new(i << 12),
            1,
            Hpa::new((i + 100) << 12),
            PageSize::Size4K,
        );
    }
    let hits: Vec<u64> = (0..N as u64).map(|i| ((i * 5) % 12) << 12 | 0x18).collect();
    c.bench_function("ntlb/lookup hit", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(n.lookup(Gpa::new(hits[i]), 1).map(|(h, _)| h))
        })
    });
    let far = addresses(1 << 34, 4096);
    c.bench_function("ntlb/lookup miss + fill", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            let g = Gpa::new(far[i]);
            if n.lookup(g, 1).is_none() {
                n.fill(g, 1, Hpa::new(far[i] ^ (1 << 35)), PageSize::Size4K);
            }
        })
    });
    // Paging-structure caches of the preset: a walk's lookup, mostly hits at the PDE level.
    let m = load_machine("bhargava08").expect("preset");
    let mut s = Psc::new(&m.psc);
    let vas = addresses(1 << 30, 4096);
    for &va in &vas {
        s.fill(va, 0, 4, 0x1000);
        s.fill(va, 0, 3, 0x2000);
        s.fill(va, 0, 2, 0x3000 + (va >> 21));
    }
    c.bench_function("psc/lookup", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(s.lookup(vas[i], 0, 4).map(|(_, b)| b))
        })
    });
}

fn memory(c: &mut Criterion) {
    // 2048 table frames spread over 16 GiB of host memory, one read each at a random entry.
    let mut mem: PhysMem<Hpa> = PhysMem::new(16 << 30);
    let frames: Vec<u64> = (0..2048u64).map(|i| (i * 2053 % 4096) << 22).collect();
    for &f in &frames {
        mem.zero_frame(Hpa::new(f));
        mem.write_u64(Hpa::new(f + 8), f | 0x67);
    }
    let entries: Vec<u64> = (0..N)
        .map(|i| frames[(i * 977) % 2048] + ((i as u64 * 8) & 0xff8))
        .collect();
    c.bench_function("physmem/read_u64 of a table entry", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (N - 1);
            black_box(mem.read_u64(Hpa::new(entries[i])))
        })
    });
}

criterion_group!(benches, tlb, caches, walk_caches, memory);
criterion_main!(benches);
