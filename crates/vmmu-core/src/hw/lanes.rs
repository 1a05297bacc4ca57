//! Storage for sets of 5 to 64 ways, searched by one-byte fingerprints: each set keeps a
//! fingerprint per way in `L` lanes (8, 16, 32 or 64; the lanes beyond the set's ways hold 0,
//! which no fingerprint equals), compared with the fingerprint of the key sought sixteen lanes
//! at a time (SSE2 `pcmpeqb`; 32 with AVX2 where the build targets it: [`match_bytes`]); the
//! ways whose fingerprint matches are the only ones whose key is read. A 32-way set's miss is
//! two vector compares; a 64-entry fully associative TLB's, four. The set's byte-wide recency
//! links sit beside its fingerprints.
//!
//! One of the representations [`Store`](super::store::Store) chooses from at construction; it
//! behaves exactly as [`SetAssoc`](super::lru::SetAssoc), way for way (tests/hw_model.rs
//! compares them on random operation sequences).
//!
//! Indexing: keys and values are stored `ways` per set and read without bounds checks
//! (`at!`, `at_mut!`, hw/mod.rs). Every such index is `set * ways + w` where `set` has indexed
//! `sets` (checked) and `w < ways`: a way from a fingerprint match (the lanes from `ways` on
//! hold 0, never a fingerprint) or from the recency links (only ways below `ways` are linked),
//! or a way a public method asserts below `ways`.

use super::assoc::{LruStore, PerSet};
use super::recency::Links;

/// The fingerprint of `key`: the top byte of a Fibonacci product (every key bit reaches it, so
/// the keys of one set, which share their low bits, still differ), with bit 0 set so that 0 can
/// mean "no entry".
#[inline(always)]
pub fn fingerprint(key: u64) -> u8 {
    ((key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8) | 1
}

/// A mask with bit `i` set where `lanes[i] == b` (`L` at most 64): AVX2 compares of 32 lanes
/// each where the build targets AVX2 (`-C target-cpu=native` on a host that has it), else SSE2
/// compares of 16 lanes each (every x86-64), else [`match_bytes_scalar`]. Each vector path is
/// tested against the scalar one on the machine that runs the tests.
#[inline(always)]
pub fn match_bytes<const L: usize>(lanes: &[u8; L], b: u8) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    {
        // SAFETY: the build targets AVX2 (the cfg above).
        unsafe { match_bytes_avx2(lanes, b) }
    }
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "sse2",
        not(target_feature = "avx2")
    ))]
    {
        match_bytes_sse2(lanes, b)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        match_bytes_scalar(lanes, b)
    }
}

/// [`match_bytes`] by one compare per lane.
#[inline(always)]
pub fn match_bytes_scalar<const L: usize>(lanes: &[u8; L], b: u8) -> u64 {
    const { assert!(L <= 64) };
    lanes
        .iter()
        .enumerate()
        .fold(0, |m, (i, &x)| m | (u64::from(x == b) << i))
}

/// [`match_bytes`] by SSE2: `L` must be 8 or a multiple of 16.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub fn match_bytes_sse2<const L: usize>(lanes: &[u8; L], b: u8) -> u64 {
    use std::arch::x86_64::*;
    const { assert!(L == 8 || (L.is_multiple_of(16) && L <= 64)) };
    let p = lanes.as_ptr();
    // SAFETY: SSE2 is enabled for this target (the cfg above); every load reads 8 or 16
    // bytes from `p + i` with `i + 8 <= L` or `i + 16 <= L` (the const assertion), inside
    // `lanes`; the loads are unaligned ones.
    unsafe {
        let k = _mm_set1_epi8(b as i8);
        if L == 8 {
            let v = _mm_loadl_epi64(p.cast());
            return (_mm_movemask_epi8(_mm_cmpeq_epi8(v, k)) as u64) & 0xff;
        }
        let mut m = 0u64;
        let mut i = 0;
        while i < L {
            let v = _mm_loadu_si128(p.add(i).cast());
            m |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, k)) as u32 as u64) << i;
            i += 16;
        }
        m
    }
}

/// [`match_bytes`] by AVX2, 32 lanes per compare (`L` of 8 or 16: by SSE2).
///
/// # Safety
/// The CPU must have AVX2 (`is_x86_feature_detected!("avx2")`, or a build that targets it).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn match_bytes_avx2<const L: usize>(lanes: &[u8; L], b: u8) -> u64 {
    use std::arch::x86_64::*;
    const { assert!(L == 8 || (L.is_multiple_of(16) && L <= 64)) };
    if !L.is_multiple_of(32) {
        return match_bytes_sse2(lanes, b);
    }
    let p = lanes.as_ptr();
    let k = _mm256_set1_epi8(b as i8);
    let mut m = 0u64;
    let mut i = 0;
    while i < L {
        // SAFETY: the load reads 32 bytes from `p + i` with `i + 32 <= L` (the const
        // assertion), inside `lanes`, unaligned; AVX2 is the caller's to guarantee.
        let v = unsafe { _mm256_loadu_si256(p.add(i).cast()) };
        m |= (_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, k)) as u32 as u64) << i;
        i += 32;
    }
    m
}

/// One set's fingerprints and recency order.
#[derive(Clone, Copy, Debug)]
struct LaneSet<const L: usize> {
    fps: [u8; L],
    links: Links<L>,
}

/// Sets of 5 to `L` ways searched by fingerprint, LRU within each set.
#[derive(Clone, Debug)]
pub struct Lanes<V, const L: usize> {
    sets: PerSet<LaneSet<L>>,
    /// `ways` per set.
    keys: Box<[u64]>,
    vals: Box<[V]>,
    ways: usize,
    total: usize,
}

impl<V: Copy, const L: usize> Lanes<V, L> {
    /// `sets` sets of `ways` ways (`ways <= L`); `filler` initialises unused value slots
    /// (never observed).
    pub fn new(sets: usize, ways: usize, filler: V) -> Self {
        assert!(
            sets > 0 && ways >= 1 && ways <= L && L.is_power_of_two() && L >= 8 && L <= 64,
            "Lanes<{L}>: {sets} sets of {ways} ways"
        );
        let empty = LaneSet {
            fps: [0; L],
            links: Links::new(ways),
        };
        Lanes {
            sets: PerSet::new(sets, empty),
            keys: vec![0; sets * ways].into_boxed_slice(),
            vals: vec![filler; sets * ways].into_boxed_slice(),
            ways,
            total: 0,
        }
    }
}

impl<V: Copy, const L: usize> Lanes<V, L> {
    /// The index of `way` of `set` in `keys` and `vals`: in bounds for every `way < ways`
    /// (module doc, "Indexing").
    #[inline(always)]
    fn slot(&self, set: usize, way: usize) -> usize {
        self.sets.ix(set) * self.ways + way
    }

    /// Puts `key` and `val` into the empty `way` of `set` without changing the recency order
    /// (to rebuild another representation's sets: [`Narrow::widen`](super::narrow::Narrow::widen)).
    pub(crate) fn put(&mut self, set: usize, way: usize, key: u64, val: V) {
        assert!(way < self.ways, "way {way} of set {set}");
        let i = self.slot(set, way);
        let s = self.sets.at_mut(set);
        debug_assert_eq!(s.fps[way], 0);
        s.fps[way] = fingerprint(key);
        self.keys[i] = key;
        self.vals[i] = val;
        self.total += 1;
    }

    /// Sets the recency order of `set` (of ways linked as this storage links them).
    pub(crate) fn set_links(&mut self, set: usize, links: Links<L>) {
        self.sets.at_mut(set).links = links;
    }
}

impl<V: Copy, const L: usize> LruStore<V> for Lanes<V, L> {
    #[inline]
    fn sets(&self) -> usize {
        self.sets.len()
    }

    #[inline]
    fn ways(&self) -> usize {
        self.ways
    }

    #[inline]
    fn len(&self) -> usize {
        self.total
    }

    fn set_len(&self, set: usize) -> usize {
        self.sets.at(set).fps.iter().filter(|&&f| f != 0).count()
    }

    #[inline(always)]
    fn set_of(&self, h: u64) -> usize {
        self.sets.of(h)
    }

    #[inline(always)]
    fn find(&self, set: usize, key: u64, pred: impl Fn(&V) -> bool) -> Option<usize> {
        let s = self.sets.at(set);
        let base = self.slot(set, 0);
        let mut m = match_bytes(&s.fps, fingerprint(key));
        while m != 0 {
            let w = m.trailing_zeros() as usize;
            if at!(self.keys, base + w) == key && pred(&at!(self.vals, base + w)) {
                return Some(w);
            }
            m &= m - 1;
        }
        None
    }

    #[inline(always)]
    fn get(&self, set: usize, way: usize) -> (u64, &V) {
        let i = self.slot(set, way);
        debug_assert_ne!(self.sets.at(set).fps[way], 0);
        (self.keys[i], &self.vals[i])
    }

    #[inline(always)]
    fn get_mut(&mut self, set: usize, way: usize) -> &mut V {
        let i = self.slot(set, way);
        &mut self.vals[i]
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, way: usize) -> &mut V {
        assert!(way < self.ways, "way {way} of set {set}");
        self.sets.at_mut(set).links.touch(way);
        let i = self.slot(set, way);
        at_mut!(self.vals, i)
    }

    #[inline(always)]
    fn insert(&mut self, set: usize, key: u64, val: V) -> Option<(u64, V)> {
        let base = self.slot(set, 0);
        let s = self.sets.at_mut(set);
        let way = s.links.oldest();
        let empty = s.fps[way] == 0;
        s.fps[way] = fingerprint(key);
        s.links.take_oldest(way);
        let i = base + way;
        let evicted = if empty {
            self.total += 1;
            None
        } else {
            Some((at!(self.keys, i), at!(self.vals, i)))
        };
        *at_mut!(self.keys, i) = key;
        *at_mut!(self.vals, i) = val;
        evicted
    }

    fn remove(&mut self, set: usize, way: usize) -> (u64, V) {
        assert!(way < self.ways, "way {way} of set {set}");
        let s = self.sets.at_mut(set);
        debug_assert_ne!(s.fps[way], 0);
        s.fps[way] = 0;
        s.links.make_oldest(way);
        self.total -= 1;
        let i = self.slot(set, way);
        (self.keys[i], self.vals[i])
    }

    fn retain(&mut self, mut keep: impl FnMut(u64, &V) -> bool) -> usize {
        if self.total == 0 {
            return 0;
        }
        let mut removed = 0;
        for set in 0..self.sets.len() {
            for w in 0..self.ways {
                let i = set * self.ways + w;
                if self.sets.at(set).fps[w] != 0 && !keep(self.keys[i], &self.vals[i]) {
                    self.remove(set, w);
                    removed += 1;
                }
            }
        }
        removed
    }

    fn clear(&mut self) {
        let empty = LaneSet {
            fps: [0; L],
            links: Links::new(self.ways),
        };
        self.sets.fill(empty);
        self.total = 0;
    }

    fn iter_set<'a>(&'a self, set: usize) -> impl Iterator<Item = (u64, &'a V)> + 'a
    where
        V: 'a,
    {
        let s = self.sets.at(set);
        let base = self.slot(set, 0);
        let mut w = s.links.head();
        // The set's entries are its newest ways; the empty ones follow.
        (0..self.set_len(set)).map(move |_| {
            let out = (self.keys[base + w], &self.vals[base + w]);
            w = s.links.older(w);
            out
        })
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.sets)
            + std::mem::size_of_val(&*self.keys)
            + std::mem::size_of_val(&*self.vals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check<const L: usize>(lanes: &[u8], b: u8) -> Result<(), TestCaseError> {
        let a: [u8; L] = lanes[..L].try_into().unwrap();
        let scalar = match_bytes_scalar(&a, b);
        let want = (0..L).fold(0u64, |m, i| m | (u64::from(a[i] == b) << i));
        prop_assert_eq!(scalar, want);
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        prop_assert_eq!(match_bytes_sse2(&a, b), scalar, "L = {}", L);
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (detected just above).
            prop_assert_eq!(unsafe { match_bytes_avx2(&a, b) }, scalar, "L = {}", L);
        }
        prop_assert_eq!(match_bytes(&a, b), scalar);
        Ok(())
    }

    proptest! {
        /// The SSE2 compare, the AVX2 one (where the CPU has AVX2) and the scalar one give the
        /// same mask, at every lane count, on lanes drawn from a few values (so that several
        /// lanes match).
        #[test]
        fn vector_and_scalar_byte_matches_agree(
            lanes in prop::collection::vec(prop_oneof![0u8..4, any::<u8>()], 64),
            b in prop_oneof![0u8..4, any::<u8>()],
        ) {
            check::<8>(&lanes, b)?;
            check::<16>(&lanes, b)?;
            check::<32>(&lanes, b)?;
            check::<64>(&lanes, b)?;
        }
    }

    #[test]
    fn a_match_in_the_last_lane_sets_the_top_bit() {
        let mut a = [0u8; 64];
        a[63] = 0x81;
        a[15] = 0x81;
        assert_eq!(match_bytes(&a, 0x81), (1 << 63) | (1 << 15));
        assert_eq!(match_bytes(&a, 0x80), 0);
        assert_eq!(match_bytes(&a, 0), !((1 << 63) | (1 << 15)));
    }

    #[test]
    fn fingerprints_are_never_zero() {
        assert!((0..100_000u64).all(|k| fingerprint(k) != 0 && fingerprint(k << 20) != 0));
    }
}
