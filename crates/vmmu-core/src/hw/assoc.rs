//! The interface every storage representation of a hardware structure implements: a
//! set-associative array with exact LRU replacement ([`LruStore`]), and the set mask of the
//! specialised representations. [`super::store::Store`] picks a representation per shape.

/// A set-associative array with exact LRU replacement within each set: entries with a `u64`
/// key (every structure folds what it matches on into one) and a value; a lookup names the
/// set, the key and a predicate on the value. Callers keep at most one entry per set that a
/// given (key, predicate) lookup can find.
///
/// Each set keeps its ways on one recency list, the empty ways oldest: an insertion takes the
/// least recently used way (an empty one while there is one, lowest first), a removal makes its
/// way the oldest. Way numbers are the same in every representation.
pub trait LruStore<V: Copy> {
    /// Number of sets.
    fn sets(&self) -> usize;
    /// Associativity.
    fn ways(&self) -> usize;
    /// Valid entries held.
    fn len(&self) -> usize;
    /// Valid entries held in `set`.
    fn set_len(&self, set: usize) -> usize;
    /// The set that the hash `h` selects (`h` modulo the set count).
    fn set_of(&self, h: u64) -> usize;
    /// Whether this representation can hold `key` (a key it cannot hold is never found).
    /// Only [`Narrow`](super::narrow::Narrow) refuses keys: those of 32 bits or more.
    #[inline(always)]
    fn takes(&self, _key: u64) -> bool {
        true
    }
    /// The way of `set` holding `key` with a value satisfying `pred`, if any.
    fn find(&self, set: usize, key: u64, pred: impl Fn(&V) -> bool) -> Option<usize>;
    /// The key and value at `way` of `set` (which must hold an entry).
    fn get(&self, set: usize, way: usize) -> (u64, &V);
    /// The value at `way` of `set`, for updates that do not change the recency order.
    fn get_mut(&mut self, set: usize, way: usize) -> &mut V;
    /// Makes the entry at `way` of `set` the most recently used; returns its value.
    fn touch(&mut self, set: usize, way: usize) -> &mut V;
    /// Inserts a new entry as the most recently used of `set`, evicting (and returning) the
    /// least recently used one when the set is full. The caller ensures no entry of the set
    /// answers the same lookups, and that the representation [`takes`](Self::takes) `key`
    /// ([`Store`](super::store::Store)'s own `insert` changes representation where it does not).
    fn insert(&mut self, set: usize, key: u64, val: V) -> Option<(u64, V)>;
    /// Removes the entry at `way` of `set` (the others keep their order); returns it. Its way
    /// becomes the oldest, so the next insertion into the set takes it.
    fn remove(&mut self, set: usize, way: usize) -> (u64, V);
    /// Keeps only the entries for which `keep(key, value)` is true, in every set; returns how
    /// many were removed.
    fn retain(&mut self, keep: impl FnMut(u64, &V) -> bool) -> usize;
    /// Drops every entry.
    fn clear(&mut self);
    /// The entries of `set`, most recently used first.
    fn iter_set<'a>(&'a self, set: usize) -> impl Iterator<Item = (u64, &'a V)> + 'a
    where
        V: 'a;
    /// Bytes of storage (the heap blocks the representation allocated at construction).
    fn bytes(&self) -> usize;

    /// The value of the entry of `set` holding `key` with a value satisfying `pred`, made the
    /// most recently used: [`find`](Self::find), then [`touch`](Self::touch).
    #[inline(always)]
    fn lookup(&mut self, set: usize, key: u64, pred: impl Fn(&V) -> bool) -> Option<&mut V> {
        let way = self.find(set, key, pred)?;
        Some(self.touch(set, way))
    }

    /// One reference to `key` in `set` as a cache level makes it, lookup and fill in one pass
    /// over the set: the entry holding `key` (whatever its value) becomes the most recently
    /// used, or, where none does, `key` is inserted with `val` as the most recently used entry
    /// (evicting the least recently used one of a full set). Returns whether it hit; `None`,
    /// changing nothing, where this representation does not [take](Self::takes) `key` and
    /// does not hold it. The caller keeps at most one entry per key.
    #[inline(always)]
    fn lookup_fill(&mut self, set: usize, key: u64, val: V) -> Option<bool> {
        if self.lookup(set, key, |_| true).is_some() {
            return Some(true);
        }
        if !self.takes(key) {
            return None;
        }
        self.insert(set, key, val);
        Some(false)
    }

    /// Total capacity in entries.
    #[inline]
    fn capacity(&self) -> usize {
        self.sets() * self.ways()
    }

    /// True when no entry is held.
    #[inline]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The per-set storage of the specialised representations ([`Small`](super::small::Small),
/// [`Narrow`](super::narrow::Narrow), [`Lanes`](super::lanes::Lanes)): one `S` per set, a
/// power-of-two number of sets, so the set a hash selects is the hash's low bits and a set is
/// read without a bounds check ([`at`](Self::at): the index is masked below the set count).
/// Derefs to the slice of sets.
#[derive(Clone, Debug)]
pub(crate) struct PerSet<S> {
    sets: Box<[S]>,
    /// The set count minus one.
    mask: usize,
}

impl<S: Clone> PerSet<S> {
    /// `sets` sets (a power of two), each `empty`.
    pub(crate) fn new(sets: usize, empty: S) -> Self {
        assert!(sets.is_power_of_two(), "{sets} sets");
        PerSet {
            sets: vec![empty; sets].into_boxed_slice(),
            mask: sets - 1,
        }
    }
}

impl<S> PerSet<S> {
    /// The set of hash `h`.
    #[inline(always)]
    pub(crate) fn of(&self, h: u64) -> usize {
        (h as usize) & self.mask
    }

    /// `set` as an index into per-set storage: `set` itself for every set the caller may name
    /// (below the set count), and in bounds whatever `set` is.
    #[inline(always)]
    pub(crate) fn ix(&self, set: usize) -> usize {
        debug_assert!(set <= self.mask, "set {set} of {}", self.mask + 1);
        set & self.mask
    }

    /// Set `set`, without a bounds check.
    #[inline(always)]
    pub(crate) fn at(&self, set: usize) -> &S {
        let i = self.ix(set);
        // SAFETY: `i` is masked by the set count minus one, and `sets` holds the set count.
        unsafe { self.sets.get_unchecked(i) }
    }

    /// [`at`](Self::at), for writing.
    #[inline(always)]
    pub(crate) fn at_mut(&mut self, set: usize) -> &mut S {
        let i = self.ix(set);
        // SAFETY: as in `at`.
        unsafe { self.sets.get_unchecked_mut(i) }
    }
}

impl<S> std::ops::Deref for PerSet<S> {
    type Target = [S];
    fn deref(&self) -> &[S] {
        &self.sets
    }
}

impl<S> std::ops::DerefMut for PerSet<S> {
    fn deref_mut(&mut self) -> &mut [S] {
        &mut self.sets
    }
}
