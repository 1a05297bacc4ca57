//! A set-associative array with true LRU replacement: the one storage engine behind every
//! hardware structure in [`crate::hw`] (TLB arrays, the AMD PWC, the Nested TLB, the
//! paging-structure caches and the cache levels), as ChampSim builds its TLBs from its cache
//! component.
//!
//! Entries have a `u64` key (every structure folds what it matches on into one: a page number
//! and size code, a page-entry address, a line number) and a value; a lookup names the set, the
//! key and a predicate on the value (for tags kept in the value). Callers keep at most one entry
//! per set that a given (key, predicate) lookup can find.
//!
//! Each set keeps all its ways, used or not, on one circular doubly linked list in recency
//! order, from the most recently used way (the set's *head*) to the least recently used one
//! (the head's predecessor), with the empty ways oldest. An insertion therefore always takes
//! the head's predecessor — an empty way while there is one, else the LRU victim — and makes
//! it the head by moving the head one step back around the circle: no link changes. A hit
//! relinks one way in front of the head; a removal relinks its way behind the others (oldest),
//! so an emptied way is reused first. Every operation is O(1) and the LRU order is exact and
//! explicit. How a lookup finds its way depends on the shape:
//! - fully-associative arrays of more than [`SCAN_WAYS`] ways (a 64-entry TLB, a 24-entry PWC)
//!   keep an open-addressing hash index from key to way (linear probing, at most an eighth
//!   full, backward-shift deletion): one or two probes;
//! - sets of more than [`SCAN_WAYS`] ways of set-associative arrays (caches, L2 TLBs) keep a
//!   16-bit fingerprint of each key side by side (a 32-way set's fingerprints are one 64-byte
//!   line): a lookup compares eight fingerprints per step (SSE2 `pcmpeqw` once compiled) and
//!   reads a full key only where a fingerprint matches, so a miss in a 32-way set costs four
//!   vector compares and touches no key;
//! - smaller sets compare their keys directly.
//!
//! Why these three and no most-recently-used-first probe: docs/performance.md, "The LRU
//! arrays".
//!
//! Simplifications: replacement is exact LRU (real designs often use pseudo-LRU, e.g. tree-PLRU
//! in caches); the set index of a key is the caller's hash (`u64`) reduced modulo the set count
//! (a mask when the count is a power of two).
//!
//! Nothing allocates after [`SetAssoc::new`].
//!
//! Indexing: the recency lists, the slots written by [`SetAssoc::insert`] and the keys a
//! fingerprint points to are read and written without bounds checks (`at!`, `at_mut!`):
//! checked, the dozen indices of an insertion cost a third of the instructions of a
//! cache level's miss (docs/performance.md, "The LRU arrays"). They stay in bounds by
//! construction: a public method that takes a set or a way asserts it is below `sets` or
//! `ways` once, every vector holds a whole block per set (`ways` slots, `ways + 1` list nodes,
//! `fp_stride` fingerprints), and every link stored in a set's nodes, the head included, names
//! a way of the same set.
//! The hash index's buckets are the top `log2(len)` bits of a product, or the next bucket
//! masked by `len - 1`, and its entries are stored slots plus one. Debug builds check every
//! such index.

use super::assoc::LruStore;

/// Sets of more than this many ways are searched by hash index (fully associative) or by
/// fingerprint; smaller ones by key.
pub const SCAN_WAYS: usize = 4;

/// Fingerprints compared per step (one 16-byte vector of `u16`).
const LANES: usize = 8;

/// The key of an unused slot; no structure uses it as a real key (page numbers, entry
/// addresses and line numbers all stay below 2^62).
pub(crate) const EMPTY: u64 = u64::MAX;

/// The fingerprint of `key`: the top 16 bits of a Fibonacci product (every key bit reaches
/// them, so keys of one set, which share their low bits, still differ), with bit 0 set so that
/// 0 can mean "no entry".
#[inline(always)]
fn fingerprint(key: u64) -> u16 {
    ((key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) as u16) | 1
}

/// Storage of `sets × ways` entries with `u64` keys and values `V`, LRU within each set.
#[derive(Clone, Debug)]
pub struct SetAssoc<V> {
    sets: usize,
    ways: usize,
    /// `sets - 1` when `sets` is a power of two, else `usize::MAX` (use `%`).
    set_mask: usize,
    keys: Vec<u64>,
    vals: Vec<V>,
    /// Sets of more than [`SCAN_WAYS`] ways: per set, the fingerprints of its ways' keys (0: no
    /// entry), padded with zeros to a multiple of [`LANES`]. Empty for smaller sets.
    fps: Vec<u16>,
    /// Fingerprint lanes per set (0 when `fps` is empty).
    fp_stride: usize,
    /// Hash index of fully-associative arrays of more than [`SCAN_WAYS`] ways: slot + 1,
    /// 0 = empty; otherwise empty.
    index: Vec<u32>,
    /// `64 - log2(index.len())`: the hash is the top bits of a Fibonacci product.
    ishift: u32,
    /// Per set, `ways + 1` nodes of way numbers: the ways' links on the circular recency list
    /// (`next` towards older ways, `prev` towards newer), then, in `next`, the set's head (its
    /// most recently used way; `prev` of the head is the least recently used or an empty way).
    /// (Two arrays, not one of pairs: a pair read after a half write stalls store forwarding.)
    prev: Vec<u16>,
    next: Vec<u16>,
    lens: Vec<u16>,
    total: usize,
}

impl<V: Copy> SetAssoc<V> {
    /// `entries` entries in sets of `ways` (`ways == entries`: fully associative; `ways == 1`:
    /// direct mapped). `filler` initializes unused value slots (never observed).
    ///
    /// # Panics
    /// If `ways` is 0, does not divide `entries`, or exceeds 65535 (configs are validated
    /// before this).
    pub fn new(entries: usize, ways: usize, filler: V) -> Self {
        assert!(
            ways > 0 && ways <= u16::MAX as usize && entries.is_multiple_of(ways),
            "SetAssoc: {ways} ways must divide {entries} entries"
        );
        let sets = (entries / ways).max(1);
        let n = sets * ways;
        let (index, ishift) = if sets == 1 && ways > SCAN_WAYS {
            let size = (8 * n).next_power_of_two();
            (vec![0u32; size], 64 - size.trailing_zeros())
        } else {
            (Vec::new(), 0)
        };
        let fp_stride = if sets > 1 && ways > SCAN_WAYS {
            ways.div_ceil(LANES) * LANES
        } else {
            0
        };
        let mut a = SetAssoc {
            sets,
            ways,
            set_mask: if sets.is_power_of_two() {
                sets - 1
            } else {
                usize::MAX
            },
            keys: vec![EMPTY; n],
            vals: vec![filler; n],
            fps: vec![0; sets * fp_stride],
            fp_stride,
            index,
            ishift,
            prev: vec![0; sets * (ways + 1)],
            next: vec![0; sets * (ways + 1)],
            lens: vec![0; sets],
            total: 0,
        };
        a.clear();
        a
    }
}

impl<V: Copy> SetAssoc<V> {
    /// Number of sets.
    #[inline]
    pub fn sets(&self) -> usize {
        self.sets
    }

    /// Associativity.
    #[inline]
    pub fn ways(&self) -> usize {
        self.ways
    }

    /// Total capacity in entries.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.sets * self.ways
    }

    /// Valid entries held.
    #[inline]
    pub fn len(&self) -> usize {
        self.total
    }

    /// True when no entry is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Valid entries held in `set`.
    #[inline]
    pub fn set_len(&self, set: usize) -> usize {
        self.lens[set] as usize
    }

    /// The set that the hash `h` selects.
    #[inline(always)]
    pub fn set_of(&self, h: u64) -> usize {
        if self.set_mask != usize::MAX {
            (h as usize) & self.set_mask
        } else {
            (h % self.sets as u64) as usize
        }
    }

    /// The way of `set` holding `key` with a value satisfying `pred`, if any.
    #[inline(always)]
    pub fn find(&self, set: usize, key: u64, pred: impl Fn(&V) -> bool) -> Option<usize> {
        debug_assert_ne!(key, EMPTY);
        let base = set * self.ways;
        if !self.index.is_empty() {
            // Fully associative: `set` is 0 and slots are ways.
            let mask = self.index.len() - 1;
            let mut b = self.bucket(key);
            loop {
                let e = at!(self.index, b) as usize;
                if e == 0 {
                    return None;
                }
                // The index holds slots of stored entries, plus one.
                if at!(self.keys, e - 1) == key && pred(&at!(self.vals, e - 1)) {
                    return Some(e - 1);
                }
                b = (b + 1) & mask;
            }
        }
        if self.fp_stride == 0 {
            let keys = &self.keys[base..base + self.ways];
            return (0..keys.len()).find(|&w| keys[w] == key && pred(&self.vals[base + w]));
        }
        let fp = fingerprint(key);
        let lanes = &self.fps[set * self.fp_stride..(set + 1) * self.fp_stride];
        for (c, chunk) in lanes.chunks_exact(LANES).enumerate() {
            let chunk: &[u16; LANES] = chunk.try_into().expect("whole chunks");
            // One vector compare tells whether any lane matches; most chunks of a miss stop here.
            if chunk.iter().fold(false, |any, &f| any | (f == fp)) {
                for (i, &f) in chunk.iter().enumerate() {
                    let w = c * LANES + i;
                    // Padding lanes hold 0, which no fingerprint equals, so `w < ways` here, and
                    // `set` is a set: its lanes were sliced above.
                    if f == fp && at!(self.keys, base + w) == key && pred(&at!(self.vals, base + w))
                    {
                        return Some(w);
                    }
                }
            }
        }
        None
    }

    #[inline(always)]
    fn bucket(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.ishift) as usize
    }

    fn index_insert(&mut self, slot: usize) {
        let mask = self.index.len() - 1;
        let mut b = self.bucket(at!(self.keys, slot));
        while at!(self.index, b) != 0 {
            b = (b + 1) & mask;
        }
        *at_mut!(self.index, b) = slot as u32 + 1;
    }

    fn index_remove(&mut self, slot: usize) {
        let mask = self.index.len() - 1;
        let mut i = self.bucket(at!(self.keys, slot));
        while at!(self.index, i) as usize != slot + 1 {
            i = (i + 1) & mask;
        }
        // Backward-shift deletion keeps every probe chain unbroken without tombstones.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let e = at!(self.index, j) as usize;
            if e == 0 {
                break;
            }
            let home = self.bucket(at!(self.keys, e - 1));
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                *at_mut!(self.index, i) = e as u32;
                i = j;
            }
        }
        *at_mut!(self.index, i) = 0;
    }

    /// The key and value at `way` of `set` (which must hold an entry).
    #[inline(always)]
    pub fn get(&self, set: usize, way: usize) -> (u64, &V) {
        let i = set * self.ways + way;
        debug_assert_ne!(self.keys[i], EMPTY);
        (self.keys[i], &self.vals[i])
    }

    /// The value at `way` of `set`, for updates that do not change the recency order.
    #[inline(always)]
    pub fn get_mut(&mut self, set: usize, way: usize) -> &mut V {
        &mut self.vals[set * self.ways + way]
    }

    /// Node base of `set` in `prev` and `next`.
    #[inline(always)]
    fn lbase(&self, set: usize) -> usize {
        set * (self.ways + 1)
    }

    /// Moves `way`, not the head, to just in front of the head `head`, whose predecessor is
    /// `last`. No special case: if `way` is `last` itself, unlinking it makes its predecessor the
    /// head's, and relinking puts it back where it was.
    #[inline(always)]
    fn relink(&mut self, lb: usize, way: usize, last: u16, head: u16) {
        // All loads before any store: a load that the CPU runs ahead of an older store to the
        // same node (whose address depends on a loaded link) costs a pipeline flush.
        let (p, n) = (at!(self.prev, lb + way), at!(self.next, lb + way));
        let last = if n == head { p } else { last };
        *at_mut!(self.next, lb + p as usize) = n;
        *at_mut!(self.prev, lb + n as usize) = p;
        *at_mut!(self.next, lb + last as usize) = way as u16;
        *at_mut!(self.prev, lb + way) = last;
        *at_mut!(self.next, lb + way) = head;
        *at_mut!(self.prev, lb + head as usize) = way as u16;
    }

    /// Makes the entry at `way` of `set` the most recently used; returns its value.
    #[inline(always)]
    pub fn touch(&mut self, set: usize, way: usize) -> &mut V {
        assert!(set < self.sets && way < self.ways, "way {way} of set {set}");
        let lb = self.lbase(set);
        let h = lb + self.ways;
        let head = at!(self.next, h);
        if head as usize != way {
            let last = at!(self.prev, lb + head as usize);
            self.relink(lb, way, last, head);
            *at_mut!(self.next, h) = way as u16;
        }
        at_mut!(self.vals, set * self.ways + way)
    }

    /// Inserts a new entry as the most recently used of `set`, evicting (and returning) the
    /// least recently used one when the set is full. The caller ensures no entry of the set
    /// answers the same lookups.
    #[inline(always)]
    pub fn insert(&mut self, set: usize, key: u64, val: V) -> Option<(u64, V)> {
        debug_assert_ne!(key, EMPTY);
        assert!(set < self.sets, "set {set} of {}", self.sets);
        let base = set * self.ways;
        let lb = self.lbase(set);
        let h = lb + self.ways;
        // The head's predecessor is an empty way while the set has one (empty ways are the
        // oldest), else the least recently used entry.
        let way = at!(self.prev, lb + at!(self.next, h) as usize) as usize;
        let old = at!(self.keys, base + way);
        let evicted = if old == EMPTY {
            *at_mut!(self.lens, set) += 1;
            self.total += 1;
            None
        } else {
            if !self.index.is_empty() {
                self.index_remove(base + way);
            }
            Some((old, at!(self.vals, base + way)))
        };
        *at_mut!(self.keys, base + way) = key;
        *at_mut!(self.vals, base + way) = val;
        if self.fp_stride != 0 {
            *at_mut!(self.fps, set * self.fp_stride + way) = fingerprint(key);
        }
        if !self.index.is_empty() {
            self.index_insert(base + way);
        }
        *at_mut!(self.next, h) = way as u16;
        evicted
    }

    /// Removes the entry at `way` of `set` (the others keep their order); returns it. Its way
    /// becomes the oldest, so the next insertion into the set takes it.
    pub fn remove(&mut self, set: usize, way: usize) -> (u64, V) {
        assert!(set < self.sets && way < self.ways, "way {way} of set {set}");
        let base = set * self.ways;
        let lb = self.lbase(set);
        let out = (self.keys[base + way], self.vals[base + way]);
        debug_assert_ne!(out.0, EMPTY);
        if !self.index.is_empty() {
            self.index_remove(base + way);
        }
        self.keys[base + way] = EMPTY;
        if self.fp_stride != 0 {
            self.fps[set * self.fp_stride + way] = 0;
        }
        let h = lb + self.ways;
        let head = self.next[h];
        if head as usize == way {
            // The head becomes the oldest by moving the head forward one step.
            self.next[h] = self.next[lb + way];
        } else {
            let last = self.prev[lb + head as usize];
            self.relink(lb, way, last, head);
        }
        self.lens[set] -= 1;
        self.total -= 1;
        out
    }

    /// Keeps only the entries for which `keep(key, value)` is true, in every set; returns how
    /// many were removed.
    pub fn retain(&mut self, mut keep: impl FnMut(u64, &V) -> bool) -> usize {
        if self.total == 0 {
            return 0;
        }
        let mut removed = 0;
        for set in 0..self.sets {
            let base = set * self.ways;
            for w in 0..self.ways {
                let k = self.keys[base + w];
                if k != EMPTY && !keep(k, &self.vals[base + w]) {
                    self.remove(set, w);
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.keys.fill(EMPTY);
        self.fps.fill(0);
        self.index.fill(0);
        let ways = self.ways;
        for set in 0..self.sets {
            // Way 0 oldest, then 1, ...: insertions take the ways in that order. The head is the
            // way whose predecessor is way 0.
            let lb = set * (ways + 1);
            for w in 0..ways {
                self.prev[lb + w] = ((w + 1) % ways) as u16;
                self.next[lb + w] = ((w + ways - 1) % ways) as u16;
            }
            self.next[lb + ways] = (ways - 1) as u16;
            self.lens[set] = 0;
        }
        self.total = 0;
    }

    /// Bytes of storage: the vectors allocated at construction.
    pub fn bytes(&self) -> usize {
        use std::mem::size_of_val;
        size_of_val(&*self.keys)
            + size_of_val(&*self.vals)
            + size_of_val(&*self.fps)
            + size_of_val(&*self.index)
            + size_of_val(&*self.prev)
            + size_of_val(&*self.next)
            + size_of_val(&*self.lens)
    }

    /// The entries of `set`, most recently used first.
    pub fn iter_set<'a>(&'a self, set: usize) -> impl Iterator<Item = (u64, &'a V)> + 'a
    where
        V: 'a,
    {
        let base = set * self.ways;
        let lb = self.lbase(set);
        let mut w = self.next[lb + self.ways] as usize;
        // The set's entries are its newest `lens[set]` ways; the empty ones follow.
        (0..self.lens[set]).map(move |_| {
            let i = base + w;
            w = self.next[lb + w] as usize;
            (self.keys[i], &self.vals[i])
        })
    }
}

/// The general array as a [`Store`](super::store::Store) representation. Its operations stay
/// out of line: the structures' hot functions inline every representation's, and the general
/// array's, for the shapes the others do not take, would only crowd their registers.
impl<V: Copy> LruStore<V> for SetAssoc<V> {
    #[inline]
    fn sets(&self) -> usize {
        SetAssoc::sets(self)
    }

    #[inline]
    fn ways(&self) -> usize {
        SetAssoc::ways(self)
    }

    #[inline]
    fn len(&self) -> usize {
        SetAssoc::len(self)
    }

    fn set_len(&self, set: usize) -> usize {
        SetAssoc::set_len(self, set)
    }

    #[inline(always)]
    fn set_of(&self, h: u64) -> usize {
        SetAssoc::set_of(self, h)
    }

    #[inline(never)]
    fn find(&self, set: usize, key: u64, pred: impl Fn(&V) -> bool) -> Option<usize> {
        SetAssoc::find(self, set, key, pred)
    }

    #[inline(always)]
    fn get(&self, set: usize, way: usize) -> (u64, &V) {
        SetAssoc::get(self, set, way)
    }

    #[inline(always)]
    fn get_mut(&mut self, set: usize, way: usize) -> &mut V {
        SetAssoc::get_mut(self, set, way)
    }

    #[inline(never)]
    fn touch(&mut self, set: usize, way: usize) -> &mut V {
        SetAssoc::touch(self, set, way)
    }

    #[inline(never)]
    fn insert(&mut self, set: usize, key: u64, val: V) -> Option<(u64, V)> {
        SetAssoc::insert(self, set, key, val)
    }

    fn remove(&mut self, set: usize, way: usize) -> (u64, V) {
        SetAssoc::remove(self, set, way)
    }

    fn retain(&mut self, keep: impl FnMut(u64, &V) -> bool) -> usize {
        SetAssoc::retain(self, keep)
    }

    fn clear(&mut self) {
        SetAssoc::clear(self)
    }

    fn iter_set<'a>(&'a self, set: usize) -> impl Iterator<Item = (u64, &'a V)> + 'a
    where
        V: 'a,
    {
        SetAssoc::iter_set(self, set)
    }

    fn bytes(&self) -> usize {
        SetAssoc::bytes(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(a: &SetAssoc<()>, set: usize) -> Vec<u64> {
        a.iter_set(set).map(|(k, _)| k).collect()
    }

    fn any(_: &()) -> bool {
        true
    }

    #[test]
    fn fully_associative_evicts_least_recently_used() {
        for ways in [3, 8] {
            let mut a = SetAssoc::<()>::new(ways, ways, ());
            for k in 1..=ways as u64 {
                assert_eq!(a.insert(0, k, ()), None);
            }
            let w = a.find(0, 1, any).unwrap();
            a.touch(0, w);
            // 2 is now the least recently used.
            assert_eq!(a.insert(0, 100, ()), Some((2, ())));
            assert_eq!(keys(&a, 0)[..2], [100, 1]);
            assert_eq!(a.find(0, 2, any), None);
            assert_eq!(a.len(), ways);
        }
    }

    #[test]
    fn set_index_uses_mask_or_modulo() {
        let a = SetAssoc::<()>::new(16, 4, ());
        assert_eq!((a.sets(), a.set_of(7)), (4, 3));
        let b = SetAssoc::<()>::new(12, 4, ());
        assert_eq!((b.sets(), b.set_of(7)), (3, 1));
    }

    #[test]
    fn remove_and_retain_keep_lru_order() {
        for ways in [4, 6] {
            let mut a = SetAssoc::<()>::new(ways, ways, ());
            for k in [1, 2, 3, 4] {
                a.insert(0, k, ());
            }
            let w = a.find(0, 3, any).unwrap();
            assert_eq!(a.remove(0, w), (3, ()));
            assert_eq!(keys(&a, 0), vec![4, 2, 1]);
            assert_eq!(a.retain(|k, _| k != 2), 1);
            assert_eq!(keys(&a, 0), vec![4, 1]);
            assert_eq!(a.len(), 2);
            // A freed way is reused before anything is evicted.
            a.insert(0, 5, ());
            a.insert(0, 6, ());
            assert_eq!(keys(&a, 0), vec![6, 5, 4, 1]);
            a.clear();
            assert!(a.is_empty());
            assert_eq!(a.find(0, 4, any), None);
        }
    }

    #[test]
    fn search_survives_colliding_keys_and_deletions() {
        // Keys with one fingerprint, hence one hash-index home too (both are the top bits of the
        // same product; found by search), and duplicates told apart by the value predicate: in a
        // fully-associative array (hash index) and in a set of a set-associative one
        // (fingerprints).
        let ks: Vec<u64> = (1u64..)
            .filter(|&k| fingerprint(k) == fingerprint(0))
            .take(6)
            .collect();
        for entries in [8, 16] {
            let mut a = SetAssoc::<u8>::new(entries, 8, 0);
            for (i, &k) in ks.iter().enumerate() {
                a.insert(0, k, i as u8);
            }
            a.insert(0, ks[0], 9);
            assert_eq!(
                a.find(0, ks[0], |&v| v == 9).map(|w| *a.get(0, w).1),
                Some(9)
            );
            for &k in &ks[1..4] {
                let w = a.find(0, k, |_| true).unwrap();
                a.remove(0, w);
            }
            for (i, &k) in ks.iter().enumerate() {
                assert_eq!(
                    a.find(0, k, |_| true).is_some(),
                    !(1..4).contains(&i),
                    "{entries} entries, key {i}"
                );
            }
            assert_eq!(
                a.find(0, ks[0], |&v| v == 0).map(|w| *a.get(0, w).1),
                Some(0)
            );
        }
    }
}
