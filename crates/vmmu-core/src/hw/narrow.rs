//! Storage for sets of 5 to 64 ways whose keys fit 32 bits: each set keeps its keys themselves
//! as `u32` tags in `L` lanes (8, 16, 32 or 64; the lanes beyond the set's ways and the empty
//! ways hold [`NO_TAG`], which no key equals), compared with the key sought four lanes at a
//! time (SSE2 `pcmpeqd`, sixteen lanes' results packed into one mask: [`match_tags`]). A match
//! is the key itself, so no second array is read to confirm it and no two keys collide; the
//! set's byte-wide recency links sit beside its tags. A line number below 256 GiB, a page-entry
//! number below 16 GiB and a 4 KiB page key below 4 TiB fit.
//!
//! One of the representations [`Store`](super::store::Store) chooses from at construction; it
//! behaves exactly as [`SetAssoc`](super::lru::SetAssoc), way for way (tests/hw_model.rs
//! compares them on random operation sequences). A key of 32 bits or more is never held
//! ([`find`](LruStore::find) misses it) and cannot be inserted ([`LruStore::takes`] says so):
//! the `Store` then turns itself into [`Lanes`] of the same sets, ways and recency order
//! ([`Narrow::widen`]) and goes on there, so a run whose addresses outgrow the tags keeps its
//! results and loses only the speed.
//!
//! Indexing: values are stored `ways` per set and read without bounds checks (`at!`,
//! `at_mut!`, hw/mod.rs). Every such index is `set * ways + w` where `set` is masked below the
//! (power-of-two) set count and `w < ways`: a way from a tag match (the lanes from `ways` on
//! hold [`NO_TAG`], never a key sought) or from the recency links (only ways below `ways` are
//! linked), or a way a public method asserts below `ways`.

use super::assoc::{LruStore, PerSet};
use super::lanes::Lanes;
use super::recency::Links;

/// The tag of an empty way or a padding lane: no key held equals it.
pub const NO_TAG: u32 = u32::MAX;

/// `key` as a tag, if it fits (below [`NO_TAG`]).
#[inline(always)]
fn tag_of(key: u64) -> Option<u32> {
    (key < NO_TAG as u64).then_some(key as u32)
}

/// A mask with bit `i` set where `tags[i] == t` (`L` a multiple of 8, at most 64): SSE2
/// compares of four lanes each on x86-64 (every x86-64 has SSE2), else [`match_tags_scalar`].
/// The vector path is tested against the scalar one on the machine that runs the tests.
#[inline(always)]
pub fn match_tags<const L: usize>(tags: &[u32; L], t: u32) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        match_tags_sse2(tags, t)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        match_tags_scalar(tags, t)
    }
}

/// [`match_tags`] by one compare per lane.
#[inline(always)]
pub fn match_tags_scalar<const L: usize>(tags: &[u32; L], t: u32) -> u64 {
    const { assert!(L <= 64) };
    tags.iter()
        .enumerate()
        .fold(0, |m, (i, &x)| m | (u64::from(x == t) << i))
}

/// [`match_tags`] by SSE2: four lanes per compare, the results of sixteen packed into one
/// byte mask (eight for `L == 8`).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub fn match_tags_sse2<const L: usize>(tags: &[u32; L], t: u32) -> u64 {
    use std::arch::x86_64::*;
    const { assert!(L.is_multiple_of(8) && L >= 8 && L <= 64) };
    let p = tags.as_ptr();
    // SAFETY: SSE2 is enabled for this target (the cfg above); every load reads four lanes
    // (16 bytes) from `p + j` with `j + 4 <= L` (the loops' conditions and the const
    // assertion: `L` is a multiple of 8), inside `tags`; the loads are unaligned ones.
    unsafe {
        let k = _mm_set1_epi32(t as i32);
        let eq = |j: usize| _mm_cmpeq_epi32(_mm_loadu_si128(p.add(j).cast()), k);
        let mut m = 0u64;
        let mut i = 0;
        while i + 16 <= L {
            let lo = _mm_packs_epi32(eq(i), eq(i + 4));
            let hi = _mm_packs_epi32(eq(i + 8), eq(i + 12));
            m |= (_mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32 as u64) << i;
            i += 16;
        }
        if i < L {
            let lo = _mm_packs_epi32(eq(i), eq(i + 4));
            let b = _mm_packs_epi16(lo, _mm_setzero_si128());
            m |= ((_mm_movemask_epi8(b) as u32 as u64) & 0xff) << i;
        }
        m
    }
}

/// One set's tags and recency order.
#[derive(Clone, Copy, Debug)]
struct TagSet<const L: usize> {
    tags: [u32; L],
    links: Links<L>,
}

/// Sets of 5 to `L` ways of 32-bit keys, compared directly, LRU within each set.
#[derive(Clone, Debug)]
pub struct Narrow<V, const L: usize> {
    sets: PerSet<TagSet<L>>,
    /// `ways` per set.
    vals: Box<[V]>,
    ways: usize,
    total: usize,
}

impl<V: Copy, const L: usize> Narrow<V, L> {
    /// `sets` sets of `ways` ways (`ways <= L`); `filler` initialises unused value slots
    /// (never observed).
    pub fn new(sets: usize, ways: usize, filler: V) -> Self {
        assert!(
            sets > 0 && ways >= 1 && ways <= L && L.is_power_of_two() && L >= 8 && L <= 64,
            "Narrow<{L}>: {sets} sets of {ways} ways"
        );
        Narrow {
            sets: PerSet::new(sets, Self::empty_set(ways)),
            vals: vec![filler; sets * ways].into_boxed_slice(),
            ways,
            total: 0,
        }
    }

    fn empty_set(ways: usize) -> TagSet<L> {
        TagSet {
            tags: [NO_TAG; L],
            links: Links::new(ways),
        }
    }

    /// The same entries, ways and recency order in [`Lanes`], which takes any key: what a
    /// [`Store`](super::store::Store) turns into when a key does not fit 32 bits.
    pub fn widen(&self) -> Lanes<V, L> {
        let mut wide = Lanes::new(self.sets.len(), self.ways, self.vals[0]);
        for (set, s) in self.sets.iter().enumerate() {
            for w in 0..self.ways {
                if s.tags[w] != NO_TAG {
                    wide.put(set, w, s.tags[w] as u64, self.vals[set * self.ways + w]);
                }
            }
            wide.set_links(set, s.links);
        }
        wide
    }

    /// The same sets, ways and recency order, each entry's key and value mapped by `f` (every
    /// key it gives must fit the tags): the entries of one structure in another's encoding.
    pub(crate) fn map<W: Copy>(&self, filler: W, f: impl Fn(u64, V) -> (u64, W)) -> Narrow<W, L> {
        let mut out = Narrow::new(self.sets.len(), self.ways, filler);
        for (set, s) in self.sets.iter().enumerate() {
            let o = &mut out.sets[set];
            o.links = s.links;
            for w in 0..self.ways {
                if s.tags[w] != NO_TAG {
                    let (k, v) = f(s.tags[w] as u64, self.vals[set * self.ways + w]);
                    o.tags[w] = tag_of(k).expect("Narrow::map to a key that does not fit 32 bits");
                    out.vals[set * self.ways + w] = v;
                }
            }
        }
        out.total = self.total;
        out
    }

    /// The index of `way` of `set` in `vals`: in bounds for every `way < ways` (module doc,
    /// "Indexing").
    #[inline(always)]
    fn slot(&self, set: usize, way: usize) -> usize {
        self.sets.ix(set) * self.ways + way
    }
}

impl<V: Copy, const L: usize> LruStore<V> for Narrow<V, L> {
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
        self.sets
            .at(set)
            .tags
            .iter()
            .filter(|&&t| t != NO_TAG)
            .count()
    }

    #[inline(always)]
    fn set_of(&self, h: u64) -> usize {
        self.sets.of(h)
    }

    #[inline(always)]
    fn takes(&self, key: u64) -> bool {
        tag_of(key).is_some()
    }

    #[inline(always)]
    fn find(&self, set: usize, key: u64, pred: impl Fn(&V) -> bool) -> Option<usize> {
        let t = tag_of(key)?;
        let base = self.slot(set, 0);
        let mut m = match_tags(&self.sets.at(set).tags, t);
        while m != 0 {
            let w = m.trailing_zeros() as usize;
            if pred(&at!(self.vals, base + w)) {
                return Some(w);
            }
            m &= m - 1;
        }
        None
    }

    #[inline(always)]
    fn get(&self, set: usize, way: usize) -> (u64, &V) {
        let t = self.sets.at(set).tags[way];
        debug_assert_ne!(t, NO_TAG);
        (t as u64, &self.vals[self.slot(set, way)])
    }

    #[inline(always)]
    fn get_mut(&mut self, set: usize, way: usize) -> &mut V {
        let i = self.slot(set, way);
        &mut self.vals[i]
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, way: usize) -> &mut V {
        // Without the way in the message: formatting it would keep the way and the set on
        // the stack in every inlined lookup.
        assert!(way < self.ways, "way beyond the set's ways");
        self.sets.at_mut(set).links.touch(way);
        let i = self.slot(set, way);
        at_mut!(self.vals, i)
    }

    #[inline(always)]
    fn insert(&mut self, set: usize, key: u64, val: V) -> Option<(u64, V)> {
        let t = tag_of(key).expect("Narrow::insert of a key that does not fit 32 bits");
        let i0 = self.slot(set, 0);
        let s = self.sets.at_mut(set);
        let way = s.links.oldest();
        let old = s.tags[way];
        s.tags[way] = t;
        s.links.take_oldest(way);
        let i = i0 + way;
        let evicted = if old == NO_TAG {
            self.total += 1;
            None
        } else {
            Some((old as u64, at!(self.vals, i)))
        };
        *at_mut!(self.vals, i) = val;
        evicted
    }

    /// [`LruStore::lookup_fill`] with the tags compared once: a tag match is the key, so the
    /// first match is the hit; a miss is an [`insert`](LruStore::insert).
    #[inline(always)]
    fn lookup_fill(&mut self, set: usize, key: u64, val: V) -> Option<bool> {
        let t = tag_of(key)?;
        let s = self.sets.at_mut(set);
        let m = match_tags(&s.tags, t);
        if m != 0 {
            // A matching lane is below `ways` (the lanes beyond hold `NO_TAG`, never `t`).
            s.links.touch(m.trailing_zeros() as usize);
            return Some(true);
        }
        self.insert(set, key, val);
        Some(false)
    }

    fn remove(&mut self, set: usize, way: usize) -> (u64, V) {
        assert!(way < self.ways, "way {way} of set {set}");
        let s = self.sets.at_mut(set);
        let t = s.tags[way];
        debug_assert_ne!(t, NO_TAG);
        s.tags[way] = NO_TAG;
        s.links.make_oldest(way);
        self.total -= 1;
        (t as u64, self.vals[self.slot(set, way)])
    }

    fn retain(&mut self, mut keep: impl FnMut(u64, &V) -> bool) -> usize {
        if self.total == 0 {
            return 0;
        }
        let mut removed = 0;
        for set in 0..self.sets.len() {
            for w in 0..self.ways {
                let t = self.sets.at(set).tags[w];
                if t != NO_TAG && !keep(t as u64, &self.vals[set * self.ways + w]) {
                    self.remove(set, w);
                    removed += 1;
                }
            }
        }
        removed
    }

    fn clear(&mut self) {
        self.sets.fill(Self::empty_set(self.ways));
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
            let out = (s.tags[w] as u64, &self.vals[base + w]);
            w = s.links.older(w);
            out
        })
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.sets) + std::mem::size_of_val(&*self.vals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check<const L: usize>(tags: &[u32], t: u32) -> Result<(), TestCaseError> {
        let a: [u32; L] = tags[..L].try_into().unwrap();
        let scalar = match_tags_scalar(&a, t);
        let want = (0..L).fold(0u64, |m, i| m | (u64::from(a[i] == t) << i));
        prop_assert_eq!(scalar, want);
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        prop_assert_eq!(match_tags_sse2(&a, t), scalar, "L = {}", L);
        prop_assert_eq!(match_tags(&a, t), scalar);
        Ok(())
    }

    proptest! {
        /// The SSE2 compare and the scalar one give the same mask at every lane count, on
        /// lanes drawn from a few values (so that several lanes match), the empty tag and
        /// values whose sign bit is set (the packs saturate signed).
        #[test]
        fn vector_and_scalar_tag_matches_agree(
            tags in prop::collection::vec(prop_oneof![0u32..4, Just(NO_TAG), any::<u32>()], 64),
            t in prop_oneof![0u32..4, Just(NO_TAG), Just(0x8000_0000u32), any::<u32>()],
        ) {
            check::<8>(&tags, t)?;
            check::<16>(&tags, t)?;
            check::<32>(&tags, t)?;
            check::<64>(&tags, t)?;
        }
    }

    #[test]
    fn a_match_in_the_last_lane_sets_the_top_bit() {
        let mut a = [NO_TAG; 64];
        a[63] = 0x8000_0001;
        a[15] = 0x8000_0001;
        a[7] = 5;
        assert_eq!(match_tags(&a, 0x8000_0001), (1 << 63) | (1 << 15));
        assert_eq!(match_tags(&a, 5), 1 << 7);
        assert_eq!(match_tags(&a, 0x8000_0000), 0);
        let b: [u32; 8] = a[..8].try_into().unwrap();
        assert_eq!(match_tags(&b, 5), 1 << 7);
    }

    #[test]
    fn keys_of_32_bits_or_more_are_never_found_nor_taken() {
        let mut n = Narrow::<u8, 8>::new(1, 8, 0);
        assert!(n.takes(u32::MAX as u64 - 1));
        assert!(!n.takes(u32::MAX as u64));
        assert!(!n.takes(1 << 40));
        n.insert(0, 7, 1);
        assert_eq!(n.find(0, 7, |_| true), Some(0));
        assert_eq!(n.find(0, (1 << 32) | 7, |_| true), None);
    }

    #[test]
    fn widening_keeps_entries_ways_and_order() {
        let mut n = Narrow::<u16, 16>::new(2, 12, 0);
        for k in 0..30u64 {
            n.insert((k % 2) as usize, k, k as u16 * 3);
        }
        n.touch(0, 3);
        let w = n.remove(1, 5);
        let wide = n.widen();
        assert_eq!(wide.len(), n.len());
        for set in 0..2 {
            let a: Vec<_> = n.iter_set(set).map(|(k, &v)| (k, v)).collect();
            let b: Vec<_> = wide.iter_set(set).map(|(k, &v)| (k, v)).collect();
            assert_eq!(a, b);
            for &(k, _) in &a {
                assert_eq!(n.find(set, k, |_| true), wide.find(set, k, |_| true));
            }
        }
        // The emptied way is the one the next insertion takes in both.
        let mut wide = wide;
        assert_eq!(n.insert(1, 99, 0), wide.insert(1, 99, 0));
        assert_eq!(n.find(1, 99, |_| true), Some(5));
        assert_eq!(wide.find(1, 99, |_| true), Some(5));
        assert_ne!(w.0, 99);
    }
}
