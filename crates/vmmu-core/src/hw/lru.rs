//! A set-associative array with true LRU replacement: the one storage engine behind every
//! hardware structure in [`crate::hw`] (TLB arrays, the AMD PWC, the Nested TLB, the
//! paging-structure caches and the cache levels), as ChampSim builds its TLBs from its cache
//! component.
//!
//! Each set keeps its valid entries as a prefix of its `ways` slots, most recently used first.
//! A hit moves the entry to the front; a fill inserts at the front and drops the last (LRU)
//! entry when the set is full. So a lookup of the entry that hit last is found in the first
//! slot it looks at, which is the "MRU memo" for free, and the LRU order is explicit.
//!
//! Simplifications: replacement is exact LRU (real designs often use pseudo-LRU, e.g. tree-PLRU
//! in caches); no valid bits beyond the per-set count; the set index of a key is the caller's
//! hash (`u64`) reduced modulo the set count (a mask when the count is a power of two).
//!
//! Nothing allocates after [`SetAssoc::new`].

/// Storage of `sets × ways` entries of key `K` and value `V`, LRU within each set.
#[derive(Clone, Debug)]
pub struct SetAssoc<K, V> {
    sets: usize,
    ways: usize,
    /// `sets - 1` when `sets` is a power of two, else `usize::MAX` (use `%`).
    mask: usize,
    keys: Vec<K>,
    vals: Vec<V>,
    /// Valid entries of each set; they occupy slots `0..lens[s]`, MRU first.
    lens: Vec<u32>,
    total: usize,
}

impl<K: Copy + Default, V: Copy> SetAssoc<K, V> {
    /// `entries` entries in sets of `ways` (`ways == entries`: fully associative; `ways == 1`:
    /// direct mapped). `filler` initializes the unused value slots (never observed).
    ///
    /// # Panics
    /// If `ways` is 0 or does not divide `entries` (configs are validated before this).
    pub fn new(entries: usize, ways: usize, filler: V) -> Self {
        assert!(
            ways > 0 && entries % ways == 0,
            "SetAssoc: {ways} ways must divide {entries} entries"
        );
        let sets = (entries / ways).max(1);
        let entries = sets * ways;
        SetAssoc {
            sets,
            ways,
            mask: if sets.is_power_of_two() {
                sets - 1
            } else {
                usize::MAX
            },
            keys: vec![K::default(); entries],
            vals: vec![filler; entries],
            lens: vec![0; sets],
            total: 0,
        }
    }
}

impl<K: Copy, V: Copy> SetAssoc<K, V> {
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

    /// The set that the hash `h` selects.
    #[inline]
    pub fn set_of(&self, h: u64) -> usize {
        if self.mask != usize::MAX {
            (h as usize) & self.mask
        } else {
            (h % self.sets as u64) as usize
        }
    }

    /// Position (0 = MRU) of the first entry of `set`, in MRU order, whose key satisfies `pred`.
    #[inline]
    pub fn find(&self, set: usize, mut pred: impl FnMut(&K) -> bool) -> Option<usize> {
        let base = set * self.ways;
        let len = self.lens[set] as usize;
        self.keys[base..base + len].iter().position(|k| pred(k))
    }

    /// The key and value at `pos` of `set`.
    #[inline]
    pub fn get(&self, set: usize, pos: usize) -> (&K, &V) {
        debug_assert!(pos < self.lens[set] as usize);
        let i = set * self.ways + pos;
        (&self.keys[i], &self.vals[i])
    }

    /// Makes the entry at `pos` of `set` the most recently used; returns its value.
    #[inline]
    pub fn touch(&mut self, set: usize, pos: usize) -> &mut V {
        let base = set * self.ways;
        debug_assert!(pos < self.lens[set] as usize);
        if pos != 0 {
            let (k, v) = (self.keys[base + pos], self.vals[base + pos]);
            self.keys.copy_within(base..base + pos, base + 1);
            self.vals.copy_within(base..base + pos, base + 1);
            self.keys[base] = k;
            self.vals[base] = v;
        }
        &mut self.vals[base]
    }

    /// Inserts a new entry as the most recently used of `set`, evicting (and returning) the
    /// least recently used one when the set is full. The caller ensures the key is not present.
    #[inline]
    pub fn insert(&mut self, set: usize, key: K, val: V) -> Option<(K, V)> {
        let base = set * self.ways;
        let len = self.lens[set] as usize;
        let evicted = if len == self.ways {
            let last = base + len - 1;
            Some((self.keys[last], self.vals[last]))
        } else {
            self.lens[set] += 1;
            self.total += 1;
            None
        };
        let shift = len.min(self.ways - 1);
        self.keys.copy_within(base..base + shift, base + 1);
        self.vals.copy_within(base..base + shift, base + 1);
        self.keys[base] = key;
        self.vals[base] = val;
        evicted
    }

    /// Removes the entry at `pos` of `set`, keeping the others in LRU order; returns it.
    pub fn remove(&mut self, set: usize, pos: usize) -> (K, V) {
        let base = set * self.ways;
        let len = self.lens[set] as usize;
        debug_assert!(pos < len);
        let out = (self.keys[base + pos], self.vals[base + pos]);
        self.keys
            .copy_within(base + pos + 1..base + len, base + pos);
        self.vals
            .copy_within(base + pos + 1..base + len, base + pos);
        self.lens[set] -= 1;
        self.total -= 1;
        out
    }

    /// Keeps only the entries of `set` for which `keep` is true (LRU order preserved); returns
    /// how many were removed.
    pub fn retain_in_set(&mut self, set: usize, mut keep: impl FnMut(&K, &V) -> bool) -> usize {
        let base = set * self.ways;
        let len = self.lens[set] as usize;
        let mut w = 0;
        for r in 0..len {
            let (k, v) = (self.keys[base + r], self.vals[base + r]);
            if keep(&k, &v) {
                self.keys[base + w] = k;
                self.vals[base + w] = v;
                w += 1;
            }
        }
        let removed = len - w;
        self.lens[set] = w as u32;
        self.total -= removed;
        removed
    }

    /// Keeps only the entries for which `keep` is true, in every set; returns how many were
    /// removed.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) -> usize {
        if self.total == 0 {
            return 0;
        }
        (0..self.sets)
            .map(|s| self.retain_in_set(s, &mut keep))
            .sum()
    }

    /// Applies `f` to the value of every entry of `set` whose key satisfies `pred` (LRU order
    /// unchanged); returns how many.
    pub fn update_in_set(
        &mut self,
        set: usize,
        mut pred: impl FnMut(&K) -> bool,
        mut f: impl FnMut(&mut V),
    ) -> usize {
        let base = set * self.ways;
        let len = self.lens[set] as usize;
        let mut n = 0;
        for i in base..base + len {
            if pred(&self.keys[i]) {
                f(&mut self.vals[i]);
                n += 1;
            }
        }
        n
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.lens.iter_mut().for_each(|l| *l = 0);
        self.total = 0;
    }

    /// The entries of `set`, most recently used first.
    pub fn iter_set(&self, set: usize) -> impl Iterator<Item = (&K, &V)> + '_ {
        let base = set * self.ways;
        let len = self.lens[set] as usize;
        self.keys[base..base + len]
            .iter()
            .zip(&self.vals[base..base + len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(a: &SetAssoc<u64, ()>, set: usize) -> Vec<u64> {
        a.iter_set(set).map(|(k, _)| *k).collect()
    }

    #[test]
    fn fully_associative_evicts_least_recently_used() {
        let mut a = SetAssoc::<u64, ()>::new(3, 3, ());
        for k in [1, 2, 3] {
            assert_eq!(a.insert(0, k, ()), None);
        }
        assert_eq!(keys(&a, 0), vec![3, 2, 1]);
        let p = a.find(0, |&k| k == 1).unwrap();
        assert_eq!(p, 2);
        a.touch(0, p);
        assert_eq!(keys(&a, 0), vec![1, 3, 2]);
        assert_eq!(a.insert(0, 4, ()), Some((2, ())));
        assert_eq!(keys(&a, 0), vec![4, 1, 3]);
        assert_eq!(a.len(), 3);
    }

    #[test]
    fn set_index_uses_mask_or_modulo() {
        let a = SetAssoc::<u64, ()>::new(16, 4, ());
        assert_eq!((a.sets(), a.set_of(7)), (4, 3));
        let b = SetAssoc::<u64, ()>::new(12, 4, ());
        assert_eq!((b.sets(), b.set_of(7)), (3, 1));
    }

    #[test]
    fn remove_and_retain_keep_lru_order() {
        let mut a = SetAssoc::<u64, ()>::new(4, 4, ());
        for k in [1, 2, 3, 4] {
            a.insert(0, k, ());
        }
        assert_eq!(a.remove(0, 1), (3, ()));
        assert_eq!(keys(&a, 0), vec![4, 2, 1]);
        assert_eq!(a.retain(|&k, _| k != 2), 1);
        assert_eq!(keys(&a, 0), vec![4, 1]);
        assert_eq!(a.len(), 2);
        a.clear();
        assert!(a.is_empty());
        assert_eq!(a.find(0, |_| true), None);
    }
}
