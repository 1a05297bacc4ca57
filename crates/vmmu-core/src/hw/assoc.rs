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

/// The set a hash selects in the specialised representations, whose set count is a power of
/// two: the hash's low bits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SetMask(usize);

impl SetMask {
    /// The mask of `sets` sets (a power of two).
    pub(crate) fn new(sets: usize) -> Self {
        assert!(sets.is_power_of_two(), "{sets} sets");
        SetMask(sets - 1)
    }

    /// The set of hash `h`.
    #[inline(always)]
    pub(crate) fn of(&self, h: u64) -> usize {
        (h as usize) & self.0
    }

    /// `set` as an index into per-set storage: `set` itself for every set the caller may name
    /// (below the set count), and in bounds whatever `set` is.
    #[inline(always)]
    pub(crate) fn ix(&self, set: usize) -> usize {
        debug_assert!(set <= self.0, "set {set} of {}", self.0 + 1);
        set & self.0
    }
}
