//! The storage of every hardware structure, specialised at construction: one set-associative
//! LRU interface ([`LruStore`]) with several representations, and [`Store`], which picks the
//! leanest one for a shape when the machine is built. The model is the same whatever the
//! representation — exact LRU, the same ways taken by the same insertions — so results do not
//! depend on the choice (tests/hw_model.rs runs every representation against the general one
//! on random operation sequences, way for way).
//!
//! | shape | representation | a lookup |
//! |---|---|---|
//! | 1 to 4 ways, a power-of-two number of sets | [`Small`]: keys, values and links of a set side by side | compares the keys |
//! | 5 to 64 ways, a power-of-two number of sets, keys below 2^32 - 1 | [`Narrow`]: the keys as `u32` tags, padded to 8, 16, 32 or 64 lanes | SSE2 compares four lanes at a time; a match is the key |
//! | 5 to 64 ways, a power-of-two number of sets, wider keys | [`Lanes`]: a byte fingerprint per way, padded to 8, 16, 32 or 64 lanes | SSE2 compares sixteen lanes at a time, reads only matching keys |
//! | any other | [`SetAssoc`]: the general array (hash index, 16-bit fingerprints) | see hw/lru.rs |
//!
//! Each representation is monomorphised for its way count, so its loops unroll and its indices
//! are masks. A structure's hot operation is written once, generic over [`LruStore`], and run
//! through [`with_store!`], which matches the representation once per operation; the rest
//! call [`Store`]'s own [`LruStore`] methods, which match per call.
//!
//! A structure of 5 to 64 ways starts as [`Narrow`]; the first key that does not fit its
//! 32-bit tags turns it into [`Lanes`] with the same entries, ways and recency order
//! ([`Store::insert`]; a hot operation written over [`LruStore`] asks
//! [`takes`](LruStore::takes) before it inserts and leaves such a key to `Store::insert`).
//! Nothing a lookup answers changes: only the speed does.
//!
//! Why these and not others: docs/performance.md, "The LRU arrays".

pub use super::assoc::LruStore;
use super::lanes::Lanes;
use super::lru::SetAssoc;
use super::narrow::Narrow;
use super::small::Small;

/// The representations a [`Store`] may take (for tests that build each one, and reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Repr {
    /// [`Small`] with 1, 2, 3 or 4 ways.
    Small,
    /// [`Narrow`] of 8, 16, 32 or 64 lanes (becomes [`Lanes`] at the first key of 32 bits or
    /// more).
    Narrow,
    /// [`Lanes`] of 8, 16, 32 or 64 lanes.
    Lanes,
    /// [`SetAssoc`], the general array.
    General,
}

/// A set-associative LRU array in the representation chosen for its shape (module doc). Its
/// discriminant is an explicit byte (`repr(u8)`), so that matching it is one load and an
/// indexed jump.
#[derive(Clone, Debug)]
#[repr(u8)]
pub enum Store<V> {
    /// Direct mapped.
    Small1(Small<V, 1>),
    /// 2 ways.
    Small2(Small<V, 2>),
    /// 3 ways.
    Small3(Small<V, 3>),
    /// 4 ways.
    Small4(Small<V, 4>),
    /// 5 to 8 ways, 32-bit keys.
    Narrow8(Narrow<V, 8>),
    /// 9 to 16 ways, 32-bit keys.
    Narrow16(Narrow<V, 16>),
    /// 17 to 32 ways, 32-bit keys.
    Narrow32(Narrow<V, 32>),
    /// 33 to 64 ways, 32-bit keys.
    Narrow64(Narrow<V, 64>),
    /// 5 to 8 ways.
    Lanes8(Lanes<V, 8>),
    /// 9 to 16 ways.
    Lanes16(Lanes<V, 16>),
    /// 17 to 32 ways.
    Lanes32(Lanes<V, 32>),
    /// 33 to 64 ways.
    Lanes64(Lanes<V, 64>),
    /// Any other shape.
    General(SetAssoc<V>),
}

/// Runs `$body` with `$s` bound to the representation of the [`Store`] `$store` (an expression
/// of type `&Store<V>` or `&mut Store<V>`): `$body` is compiled once per representation, each
/// copy specialised to its way count.
macro_rules! with_store {
    ($store:expr, $s:ident => $body:expr) => {
        match $store {
            $crate::hw::store::Store::Small1($s) => $body,
            $crate::hw::store::Store::Small2($s) => $body,
            $crate::hw::store::Store::Small3($s) => $body,
            $crate::hw::store::Store::Small4($s) => $body,
            $crate::hw::store::Store::Narrow8($s) => $body,
            $crate::hw::store::Store::Narrow16($s) => $body,
            $crate::hw::store::Store::Narrow32($s) => $body,
            $crate::hw::store::Store::Narrow64($s) => $body,
            $crate::hw::store::Store::Lanes8($s) => $body,
            $crate::hw::store::Store::Lanes16($s) => $body,
            $crate::hw::store::Store::Lanes32($s) => $body,
            $crate::hw::store::Store::Lanes64($s) => $body,
            $crate::hw::store::Store::General($s) => $body,
        }
    };
}
pub(crate) use with_store;

impl<V: Copy> Store<V> {
    /// `entries` entries in sets of `ways` (`ways == entries`: fully associative; `ways == 1`:
    /// direct mapped), in the leanest representation for that shape. `filler` initialises
    /// unused value slots (never observed).
    ///
    /// # Panics
    /// If `ways` is 0, does not divide `entries`, or exceeds 65535 (configs are validated
    /// before this).
    pub fn new(entries: usize, ways: usize, filler: V) -> Self {
        let repr = match ways {
            _ if !(entries / ways).is_power_of_two() => Repr::General,
            1..=4 => Repr::Small,
            5..=64 => Repr::Narrow,
            _ => Repr::General,
        };
        Self::with_repr(entries, ways, filler, repr)
    }

    /// The same array in representation `repr`, where that representation takes the shape
    /// (else the general one): [`Small`], [`Narrow`] and [`Lanes`] take a power-of-two number
    /// of sets.
    pub fn with_repr(entries: usize, ways: usize, filler: V, repr: Repr) -> Self {
        assert!(
            ways > 0 && ways <= u16::MAX as usize && entries.is_multiple_of(ways),
            "Store: {ways} ways must divide {entries} entries"
        );
        let sets = (entries / ways).max(1);
        if !sets.is_power_of_two() {
            return Store::General(SetAssoc::new(entries, ways, filler));
        }
        match (repr, ways) {
            (Repr::Small, 1) => Store::Small1(Small::new(sets, filler)),
            (Repr::Small, 2) => Store::Small2(Small::new(sets, filler)),
            (Repr::Small, 3) => Store::Small3(Small::new(sets, filler)),
            (Repr::Small, 4) => Store::Small4(Small::new(sets, filler)),
            (Repr::Narrow, 1..=8) => Store::Narrow8(Narrow::new(sets, ways, filler)),
            (Repr::Narrow, 9..=16) => Store::Narrow16(Narrow::new(sets, ways, filler)),
            (Repr::Narrow, 17..=32) => Store::Narrow32(Narrow::new(sets, ways, filler)),
            (Repr::Narrow, 33..=64) => Store::Narrow64(Narrow::new(sets, ways, filler)),
            (Repr::Lanes, 1..=8) => Store::Lanes8(Lanes::new(sets, ways, filler)),
            (Repr::Lanes, 9..=16) => Store::Lanes16(Lanes::new(sets, ways, filler)),
            (Repr::Lanes, 17..=32) => Store::Lanes32(Lanes::new(sets, ways, filler)),
            (Repr::Lanes, 33..=64) => Store::Lanes64(Lanes::new(sets, ways, filler)),
            _ => Store::General(SetAssoc::new(entries, ways, filler)),
        }
    }

    /// The representation chosen.
    pub fn repr(&self) -> Repr {
        match self {
            Store::Small1(_) | Store::Small2(_) | Store::Small3(_) | Store::Small4(_) => {
                Repr::Small
            }
            Store::Narrow8(_) | Store::Narrow16(_) | Store::Narrow32(_) | Store::Narrow64(_) => {
                Repr::Narrow
            }
            Store::Lanes8(_) | Store::Lanes16(_) | Store::Lanes32(_) | Store::Lanes64(_) => {
                Repr::Lanes
            }
            Store::General(_) => Repr::General,
        }
    }
}

impl<V: Copy> Store<V> {
    /// Turns [`Narrow`] storage into [`Lanes`] of the same sets, ways, entries and recency
    /// order (any other representation stays as it is): the storage for keys that do not fit
    /// 32 bits.
    #[cold]
    #[inline(never)]
    pub fn widen(&mut self) {
        *self = match self {
            Store::Narrow8(n) => Store::Lanes8(n.widen()),
            Store::Narrow16(n) => Store::Lanes16(n.widen()),
            Store::Narrow32(n) => Store::Lanes32(n.widen()),
            Store::Narrow64(n) => Store::Lanes64(n.widen()),
            _ => return,
        };
    }
}

/// A concrete representation: one variant of [`Store`], taken out of it and put back
/// ([`PagedArray::specialise`](super::paged::PagedArray::specialise) and
/// [`general`](super::paged::PagedArray::general)).
pub trait Concrete<V: Copy>: LruStore<V> + Sized {
    /// The representation held by `s`, if `s` holds this one (else `s`).
    // Run once per array when the machine is built: the size of the store handed back is no
    // cost.
    #[allow(clippy::result_large_err)]
    fn from_store(s: Store<V>) -> Result<Self, Store<V>>;
    /// The [`Store`] holding this representation.
    fn into_store(self) -> Store<V>;
}

/// [`Concrete`] for each variant of [`Store`].
macro_rules! concrete {
    ($($variant:ident: $ty:ty),* $(,)?) => {$(
        impl<V: Copy> Concrete<V> for $ty {
            fn from_store(s: Store<V>) -> Result<Self, Store<V>> {
                match s {
                    Store::$variant(x) => Ok(x),
                    other => Err(other),
                }
            }
            fn into_store(self) -> Store<V> {
                Store::$variant(self)
            }
        }
    )*};
}

concrete!(
    Small1: Small<V, 1>,
    Small2: Small<V, 2>,
    Small3: Small<V, 3>,
    Small4: Small<V, 4>,
    Narrow8: Narrow<V, 8>,
    Narrow16: Narrow<V, 16>,
    Narrow32: Narrow<V, 32>,
    Narrow64: Narrow<V, 64>,
    Lanes8: Lanes<V, 8>,
    Lanes16: Lanes<V, 16>,
    Lanes32: Lanes<V, 32>,
    Lanes64: Lanes<V, 64>,
    General: SetAssoc<V>,
);

impl<V: Copy> LruStore<V> for Store<V> {
    #[inline]
    fn sets(&self) -> usize {
        with_store!(self, s => s.sets())
    }

    #[inline]
    fn ways(&self) -> usize {
        with_store!(self, s => s.ways())
    }

    #[inline]
    fn len(&self) -> usize {
        with_store!(self, s => s.len())
    }

    fn set_len(&self, set: usize) -> usize {
        with_store!(self, s => s.set_len(set))
    }

    #[inline]
    fn set_of(&self, h: u64) -> usize {
        with_store!(self, s => s.set_of(h))
    }

    #[inline]
    fn find(&self, set: usize, key: u64, pred: impl Fn(&V) -> bool) -> Option<usize> {
        with_store!(self, s => s.find(set, key, pred))
    }

    #[inline]
    fn get(&self, set: usize, way: usize) -> (u64, &V) {
        with_store!(self, s => s.get(set, way))
    }

    #[inline]
    fn get_mut(&mut self, set: usize, way: usize) -> &mut V {
        with_store!(self, s => s.get_mut(set, way))
    }

    #[inline]
    fn touch(&mut self, set: usize, way: usize) -> &mut V {
        with_store!(self, s => s.touch(set, way))
    }

    #[inline]
    fn takes(&self, key: u64) -> bool {
        with_store!(self, s => s.takes(key))
    }

    /// Inserts as [`LruStore::insert`] does, in any representation: where this one does not
    /// take `key`, the storage is [widened](Store::widen) first.
    #[inline]
    fn insert(&mut self, set: usize, key: u64, val: V) -> Option<(u64, V)> {
        if !self.takes(key) {
            self.widen();
        }
        with_store!(self, s => s.insert(set, key, val))
    }

    /// [`LruStore::lookup_fill`] in any representation: where this one does not take `key`,
    /// the storage is [widened](Store::widen) first, so the answer is never `None`.
    #[inline]
    fn lookup_fill(&mut self, set: usize, key: u64, val: V) -> Option<bool> {
        if let Some(hit) = with_store!(self, s => s.lookup_fill(set, key, val)) {
            return Some(hit);
        }
        self.widen();
        with_store!(self, s => s.lookup_fill(set, key, val))
    }

    fn remove(&mut self, set: usize, way: usize) -> (u64, V) {
        with_store!(self, s => s.remove(set, way))
    }

    fn retain(&mut self, keep: impl FnMut(u64, &V) -> bool) -> usize {
        with_store!(self, s => s.retain(keep))
    }

    fn clear(&mut self) {
        with_store!(self, s => s.clear())
    }

    fn iter_set<'a>(&'a self, set: usize) -> impl Iterator<Item = (u64, &'a V)> + 'a
    where
        V: 'a,
    {
        let it: Box<dyn Iterator<Item = (u64, &'a V)> + 'a> =
            with_store!(self, s => Box::new(s.iter_set(set)));
        it
    }

    fn bytes(&self) -> usize {
        with_store!(self, s => s.bytes())
    }
}
