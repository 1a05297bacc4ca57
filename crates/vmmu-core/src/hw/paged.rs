//! A translation array: one set-associative LRU array of page-granular entries that may hold
//! several page sizes, each entry tagged — the building block of a TLB array (Intel SDM Vol. 3A
//! §4.10.2) and of the Nested TLB (seed 002 §4.2).
//!
//! An entry is keyed by its page number at its own size, its size, and a 32-bit tag. A tag
//! mask stored with the entry says which tag bits it must match: a TLB's global entries ignore
//! the PCID half (SDM §4.10.2.4). A lookup of address `a` probes, for each size the array holds
//! (smallest first), the set selected by `a`'s page number at that size, and hits on the entry
//! of that size that maps `a` with a matching tag; the first size that hits wins. A fill
//! replaces the entries of its page and size that would answer any lookup it answers, so each
//! probe has at most one candidate. Sizes of which the array holds no entry right now are
//! skipped, which changes nothing but the time taken.
//!
//! Simplifications: the set index is the page number modulo the set count (real designs hash
//! some upper bits in); an array holding several sizes stores them in one LRU order, as seed
//! 002's "any page size" L1 D-TLB does.

use super::lanes::Lanes;
use super::lru::SetAssoc;
use super::narrow::Narrow;
use super::small::Small;
use super::store::{with_store, Concrete, LruStore, Store};
use crate::addr::PageSize;
use std::marker::PhantomData;

/// What an entry stores besides its key: its tag, its tag mask and the translation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tagged<V> {
    /// The entry's tag (bits outside `tmask` are zero).
    pub tag: u32,
    /// The tag bits the entry must match (`!0` for an ordinary entry).
    pub tmask: u32,
    /// The translation.
    pub val: V,
}

impl<V> Tagged<V> {
    /// Whether this entry answers a lookup with `tag`.
    #[inline]
    pub fn matches(&self, tag: u32) -> bool {
        (self.tag ^ tag) & self.tmask == 0
    }

    /// Whether some lookup would be answered by both this entry and one tagged `tag` with
    /// `tmask` (same key assumed): the tags agree on the bits both entries match.
    #[inline]
    pub fn overlaps(&self, tag: u32, tmask: u32) -> bool {
        (self.tag ^ tag) & self.tmask & tmask == 0
    }
}

/// The index of `size` in [`PageSize::ALL`] (its 2-bit code).
#[inline]
pub fn size_code(size: PageSize) -> usize {
    match size {
        PageSize::Size4K => 0,
        PageSize::Size2M => 1,
        PageSize::Size4M => 2,
        PageSize::Size1G => 3,
    }
}

/// The key of the page of `size` holding `addr`: `(addr >> size.shift()) << 2 | size code`.
#[inline]
pub fn page_key(addr: u64, size: PageSize) -> u64 {
    ((addr >> size.shift()) << 2) | size_code(size) as u64
}

/// The page size a key was made for.
#[inline]
pub fn key_size(key: u64) -> PageSize {
    PageSize::ALL[(key & 3) as usize]
}

/// The shift of each size code's page number ([`PageSize::shift`] by code).
pub(crate) const SHIFT: [u32; 4] = [12, 21, 22, 30];

/// The size codes an array may hold, one bit each, as a type parameter of [`PagedArray`]: any
/// size (the sizes held are then known only when the machine is built).
pub const ANY_SIZE: u8 = 0b1111;
/// 4 KiB pages only.
pub const ONLY_4K: u8 = 1 << 0;
/// 2 MiB pages only.
pub const ONLY_2M: u8 = 1 << 1;

/// The set and way of the entry of `s` of size code `code` that maps `addr` with `tag`.
#[inline(always)]
fn find_size<V: Copy, S: LruStore<Tagged<V>>>(
    s: &S,
    code: usize,
    addr: u64,
    tag: u32,
) -> Option<(usize, usize)> {
    let page = addr >> SHIFT[code];
    let set = s.set_of(page);
    let way = s.find(set, (page << 2) | code as u64, |e| e.matches(tag))?;
    Some((set, way))
}

/// The first answer of `probe` over the size codes of `present` (one bit each), smallest
/// first, with the code that gave it: the order in which a lookup of a multi-size array tries
/// the sizes. `H` bounds the sizes: where it names one size, the probe is that size's alone,
/// its code a constant.
#[inline(always)]
pub(crate) fn first_size<T, const H: u8>(
    present: u8,
    mut probe: impl FnMut(usize) -> Option<T>,
) -> Option<(T, usize)> {
    if H.is_power_of_two() {
        let code = H.trailing_zeros() as usize;
        if present & H == 0 {
            return None;
        }
        return probe(code).map(|t| (t, code));
    }
    let mut bits = present & H;
    while bits != 0 {
        let code = bits.trailing_zeros() as usize & 3;
        bits &= bits - 1;
        if let Some(t) = probe(code) {
            return Some((t, code));
        }
    }
    None
}

/// The set, way and size code of the entry of `s` that maps `addr` with `tag`, probing the
/// sizes of `present` (size codes, one bit each) smallest first. `H` bounds the sizes: where
/// it names one size, the probe is that size's alone, its shift a constant.
#[inline(always)]
fn find_in<V, S: LruStore<Tagged<V>>, const H: u8>(
    s: &S,
    present: u8,
    addr: u64,
    tag: u32,
) -> Option<(usize, usize, usize)>
where
    V: Copy,
{
    let ((set, way), code) = first_size::<_, H>(present, |code| find_size(s, code, addr, tag))?;
    Some((set, way, code))
}

/// What a [`PagedArray`] needs of its storage beyond [`LruStore`]: its two hot steps, a probe
/// (find and touch) and an insertion, each run on the representation itself. Each concrete
/// representation runs them as written here; the general [`Store`] matches its representation
/// once per step and runs them there.
pub trait PagedStore<V: Copy>: LruStore<Tagged<V>> + Sized {
    /// The size code and entry of the entry that maps `addr` with `tag`, probing the sizes of
    /// `present` (bounded by `H`), made the most recently used of its set.
    #[inline(always)]
    fn probe<const H: u8>(
        &mut self,
        present: u8,
        addr: u64,
        tag: u32,
    ) -> Option<(usize, &mut Tagged<V>)> {
        let (set, way, code) = find_in::<V, Self, H>(self, present, addr, tag)?;
        Some((code, self.touch(set, way)))
    }

    /// [`probe`](Self::probe), with the hit's size and a copy of its value.
    #[inline(always)]
    fn probe_val<const H: u8>(
        &mut self,
        present: u8,
        addr: u64,
        tag: u32,
    ) -> Option<(PageSize, V)> {
        let (code, e) = self.probe::<H>(present, addr, tag)?;
        Some((PageSize::ALL[code], e.val))
    }

    /// Whether [`put`](Self::put) takes `key`: whether the representation
    /// [takes](LruStore::takes) it.
    #[inline(always)]
    fn accepts(&self, key: u64) -> bool {
        self.takes(key)
    }

    /// Inserts `new` under `key` into the set of page number `page` (see
    /// [`LruStore::insert`]); the representation must [accept](Self::accepts) `key`.
    #[inline(always)]
    fn put(&mut self, page: u64, key: u64, new: Tagged<V>) -> Option<(u64, Tagged<V>)> {
        debug_assert!(self.accepts(key), "key {key:#x} not taken");
        let set = self.set_of(page);
        self.insert(set, key, new)
    }
}

impl<V: Copy> PagedStore<V> for Store<Tagged<V>> {
    #[inline(always)]
    fn probe<const H: u8>(
        &mut self,
        present: u8,
        addr: u64,
        tag: u32,
    ) -> Option<(usize, &mut Tagged<V>)> {
        with_store!(self, s => PagedStore::probe::<H>(s, present, addr, tag))
    }

    #[inline(always)]
    fn probe_val<const H: u8>(
        &mut self,
        present: u8,
        addr: u64,
        tag: u32,
    ) -> Option<(PageSize, V)> {
        with_store!(self, s => PagedStore::probe_val::<H>(s, present, addr, tag))
    }

    /// Every key: [`put`](PagedStore::put) widens the representation where it must.
    #[inline(always)]
    fn accepts(&self, _key: u64) -> bool {
        true
    }

    /// Inserts in any representation: a key this one does not take widens it first
    /// ([`Store`]'s own `insert`).
    #[inline(always)]
    fn put(&mut self, page: u64, key: u64, new: Tagged<V>) -> Option<(u64, Tagged<V>)> {
        let done =
            with_store!(&mut *self, s => s.takes(key).then(|| PagedStore::put(s, page, key, new)));
        match done {
            Some(evicted) => evicted,
            None => self.insert(self.set_of(page), key, new),
        }
    }
}

impl<V: Copy, const W: usize> PagedStore<V> for Small<Tagged<V>, W> {}
impl<V: Copy, const L: usize> PagedStore<V> for Narrow<Tagged<V>, L> {}
impl<V: Copy, const L: usize> PagedStore<V> for Lanes<Tagged<V>, L> {}
impl<V: Copy> PagedStore<V> for SetAssoc<Tagged<V>> {}

/// A set-associative LRU array of tagged translations of the page sizes it holds, stored in
/// `S`: the general [`Store`] (its representation matched per operation), or one concrete
/// representation fixed when the machine is built ([`PagedArray::specialise`]), with `H` the
/// sizes it may hold ([`ANY_SIZE`], [`ONLY_4K`], [`ONLY_2M`]). The model is one whatever `S`
/// and `H`.
#[derive(Clone, Debug)]
pub struct PagedArray<V, S = Store<Tagged<V>>, const H: u8 = ANY_SIZE> {
    arr: S,
    /// The size codes held, one bit each (within `H`).
    holds: u8,
    /// The size codes of which some entry is held, one bit each (bit `c`: `count[c] > 0`): a
    /// probe visits these sizes only, smallest first.
    present: u8,
    /// Entries currently held, per size code.
    count: [u32; 4],
    _val: PhantomData<V>,
}

impl<V: Copy> PagedArray<V> {
    /// `entries` entries in sets of `ways`, holding the page sizes in `sizes`, in the general
    /// [`Store`].
    pub fn new(entries: u32, ways: u32, sizes: &[PageSize], filler: V) -> Self {
        let filler = Tagged {
            tag: 0,
            tmask: 0,
            val: filler,
        };
        PagedArray {
            arr: Store::new(entries as usize, ways as usize, filler),
            holds: holds_of(sizes),
            present: 0,
            count: [0; 4],
            _val: PhantomData,
        }
    }

    /// The same array in the concrete representation `S`, holding at most the sizes of `H`,
    /// when its store is an `S` and it holds no size outside `H` (else itself, unchanged).
    // Run once per array when the machine is built: the size of the array handed back is
    // no cost.
    #[allow(clippy::result_large_err)]
    pub fn specialise<S: Concrete<Tagged<V>>, const H: u8>(
        self,
    ) -> Result<PagedArray<V, S, H>, Self> {
        if self.holds & !H != 0 || (H.is_power_of_two() && self.holds != H) {
            return Err(self);
        }
        let (arr, sizes) = self.split();
        match S::from_store(arr) {
            Ok(arr) => Ok(PagedArray::join(arr, sizes)),
            Err(arr) => Err(PagedArray::join(arr, sizes)),
        }
    }
}

impl<V: Copy> PagedArray<V> {
    /// The array over the general store `arr`, whose entries are already in it (keyed by
    /// [`page_key`]), holding the page sizes in `sizes`: a structure kept in a representation
    /// of its own (the Nested TLB's folded tags) handed over to the general array with the
    /// same entries, ways and recency order.
    pub(crate) fn from_store(arr: Store<Tagged<V>>, sizes: &[PageSize]) -> Self {
        let mut count = [0u32; 4];
        for set in 0..arr.sets() {
            for (k, _) in arr.iter_set(set) {
                count[(k & 3) as usize] += 1;
            }
        }
        let holds = holds_of(sizes);
        let present = present_of(&count);
        PagedArray::join(
            arr,
            Sizes {
                holds,
                present,
                count,
            },
        )
    }
}

/// The size codes of `sizes`, one bit each.
fn holds_of(sizes: &[PageSize]) -> u8 {
    sizes.iter().fold(0, |m, &s| m | (1 << size_code(s)))
}

/// The size codes of which some entry is counted, one bit each.
fn present_of(count: &[u32; 4]) -> u8 {
    (0..4).fold(0, |p, c| p | (u8::from(count[c] > 0) << c))
}

/// A paged array's account of the sizes it holds, apart from its storage.
struct Sizes {
    holds: u8,
    present: u8,
    count: [u32; 4],
}

impl<V, S, const H: u8> PagedArray<V, S, H> {
    /// The storage and the account of sizes, apart.
    fn split(self) -> (S, Sizes) {
        let PagedArray {
            arr,
            holds,
            present,
            count,
            _val,
        } = self;
        (
            arr,
            Sizes {
                holds,
                present,
                count,
            },
        )
    }

    /// The array of storage `arr` with the account `sizes` (of the entries `arr` holds).
    fn join(arr: S, sizes: Sizes) -> Self {
        PagedArray {
            arr,
            holds: sizes.holds,
            present: sizes.present,
            count: sizes.count,
            _val: PhantomData,
        }
    }
}

impl<V: Copy, S: Concrete<Tagged<V>>, const H: u8> PagedArray<V, S, H> {
    /// The same array in the general [`Store`], entries, ways and recency order unchanged.
    pub fn general(self) -> PagedArray<V> {
        let (arr, sizes) = self.split();
        PagedArray::join(arr.into_store(), sizes)
    }
}

impl<V: Copy, S: PagedStore<V>, const H: u8> PagedArray<V, S, H> {
    /// Counts one more entry of size code `code`.
    #[inline]
    fn count_in(&mut self, code: usize) {
        self.count[code] += 1;
        self.present |= 1 << code;
    }

    /// Counts one entry of size code `code` fewer.
    #[inline]
    fn count_out(&mut self, code: usize) {
        self.count[code] -= 1;
        if self.count[code] == 0 {
            self.present &= !(1 << code);
        }
    }

    /// The sizes of which some entry is held, smallest first, as `(size, its code)`.
    #[inline]
    fn held(&self) -> impl Iterator<Item = (PageSize, usize)> {
        let mut bits = self.present;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let code = bits.trailing_zeros() as usize & 3;
            bits &= bits - 1;
            Some((PageSize::ALL[code], code))
        })
    }

    /// Whether this array holds translations of `size`.
    #[inline(always)]
    pub fn holds(&self, size: PageSize) -> bool {
        let bit = 1 << size_code(size);
        if H.is_power_of_two() {
            H & bit != 0
        } else {
            self.holds & bit != 0
        }
    }

    /// Whether a [`fill`](Self::fill) of the page of `size` holding `addr` fits this array's
    /// representation (always, but for the 32-bit tags of [`Narrow`] storage held in a concrete
    /// `S`; the general [`Store`] widens itself).
    #[inline(always)]
    pub fn takes(&self, addr: u64, size: PageSize) -> bool {
        !self.holds(size) || self.arr.accepts(page_key(addr, size))
    }

    /// Sizes held, smallest first.
    pub fn sizes(&self) -> Vec<PageSize> {
        PageSize::ALL
            .into_iter()
            .filter(|&s| self.holds & (1 << size_code(s)) != 0)
            .collect()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.arr.len()
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.arr.is_empty()
    }

    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.arr.capacity()
    }

    /// Bytes of storage.
    pub fn bytes(&self) -> usize {
        self.arr.bytes()
    }

    /// Looks `addr` up with `tag`; a hit becomes the most recently used entry of its set.
    #[inline]
    pub fn lookup(&mut self, addr: u64, tag: u32) -> Option<(PageSize, V)> {
        let present = self.present;
        if present == 0 {
            return None;
        }
        self.arr.probe_val::<H>(present, addr, tag)
    }

    /// Like [`lookup`](Self::lookup), returning the hit's value where it is stored. Hot paths
    /// use this to copy a large value once, straight from storage.
    #[inline(always)]
    pub fn lookup_ref(&mut self, addr: u64, tag: u32) -> Option<&V> {
        let present = self.present;
        if present == 0 {
            return None;
        }
        let (_, e) = self.arr.probe::<H>(present, addr, tag)?;
        Some(&e.val)
    }

    /// Like [`lookup`](Self::lookup) without touching the LRU order.
    pub fn peek(&self, addr: u64, tag: u32) -> Option<(PageSize, V)> {
        let (set, way, _) = find_in::<V, S, H>(&self.arr, self.present, addr, tag)?;
        let (k, e) = self.arr.get(set, way);
        Some((key_size(k), e.val))
    }

    /// Inserts the translation of the page of `size` holding `addr` as the most recently used
    /// entry of its set, tagged `tag` with tag mask `tmask`. It replaces every entry of the
    /// same page and size that would answer some lookup the new one answers, so no lookup ever
    /// has two candidates of one size. Does nothing if the array does not hold `size`. The
    /// representation must [take](Self::takes) the page.
    #[inline]
    pub fn fill(&mut self, addr: u64, size: PageSize, tag: u32, tmask: u32, val: V) {
        if !self.holds(size) {
            return;
        }
        let code = size_code(size);
        let set = self.arr.set_of(addr >> size.shift());
        let key = page_key(addr, size);
        while let Some(way) = self.arr.find(set, key, |e| e.overlaps(tag, tmask)) {
            self.arr.remove(set, way);
            self.count_out(code);
        }
        self.insert(addr, size, tag, tmask, val);
    }

    /// Like [`fill`](Self::fill) when the caller knows that no entry of the page overlaps the
    /// new one: a lookup of `addr` with `tag` has just missed, nothing has changed the array
    /// since, and the new entry is ordinary (`tmask` is `!0`, so it overlaps exactly the entries
    /// that lookup would have found). Skips the search.
    #[inline(always)]
    pub fn fill_absent(&mut self, addr: u64, size: PageSize, tag: u32, val: V) {
        if !self.holds(size) {
            return;
        }
        debug_assert!(
            self.arr
                .find(
                    self.arr.set_of(addr >> size.shift()),
                    page_key(addr, size),
                    |e| e.matches(tag)
                )
                .is_none(),
            "fill_absent of a page that is present"
        );
        self.insert(addr, size, tag, !0, val);
    }

    /// Inserts an entry no other entry of its set overlaps.
    #[inline(always)]
    fn insert(&mut self, addr: u64, size: PageSize, tag: u32, tmask: u32, val: V) {
        let code = size_code(size);
        let new = Tagged {
            tag: tag & tmask,
            tmask,
            val,
        };
        let page = addr >> size.shift();
        let key = (page << 2) | code as u64;
        match self.arr.put(page, key, new) {
            // An entry of the same size replaced (the only size, where `H` names one): the
            // counts stand.
            Some((old, _)) if H.is_power_of_two() || (old & 3) as usize == code => {}
            Some((old, _)) => {
                self.count_out((old & 3) as usize);
                self.count_in(code);
            }
            None => self.count_in(code),
        }
    }

    /// Applies `f` to every entry (one per size at most) that maps `addr` with `tag`; returns
    /// how many.
    pub fn update(&mut self, addr: u64, tag: u32, mut f: impl FnMut(&mut V)) -> usize {
        let mut n = 0;
        for (size, _) in self.held() {
            let set = self.arr.set_of(addr >> size.shift());
            if let Some(way) = self.arr.find(set, page_key(addr, size), |e| e.matches(tag)) {
                f(&mut self.arr.get_mut(set, way).val);
                n += 1;
            }
        }
        n
    }

    /// Drops every entry (any size held) that maps `addr` with `tag`; returns how many.
    pub fn invalidate(&mut self, addr: u64, tag: u32) -> usize {
        let mut n = 0;
        for (size, code) in self.held() {
            let set = self.arr.set_of(addr >> size.shift());
            let key = page_key(addr, size);
            while let Some(way) = self.arr.find(set, key, |e| e.matches(tag)) {
                self.arr.remove(set, way);
                self.count_out(code);
                n += 1;
            }
        }
        n
    }

    /// Keeps only the entries for which `keep(tag, tmask)` is true; returns how many were
    /// dropped.
    pub fn retain(&mut self, mut keep: impl FnMut(u32, u32) -> bool) -> usize {
        let count = &mut self.count;
        let removed = self.arr.retain(|k, e| {
            let kept = keep(e.tag, e.tmask);
            if !kept {
                count[(k & 3) as usize] -= 1;
            }
            kept
        });
        self.present = present_of(&self.count);
        removed
    }

    /// Drops everything.
    pub fn clear(&mut self) {
        if !self.arr.is_empty() {
            self.arr.clear();
        }
        self.count = [0; 4];
        self.present = 0;
    }

    /// Every entry as `(set, key, entry)`, each set most recently used first (for tests and
    /// reports).
    pub fn entries(&self) -> impl Iterator<Item = (usize, u64, Tagged<V>)> + '_ {
        (0..self.arr.sets()).flat_map(move |s| self.arr.iter_set(s).map(move |(k, e)| (s, k, *e)))
    }
}

/// Arrays of translations looked up in parallel, as one: one [`PagedArray`], a pair of them
/// (the first that hits answers a lookup), a list of general ones, or none (`()`). A TLB level
/// is one of these in the concrete type chosen for its shape when the machine is built; each
/// operation is written once here, over the arrays.
pub trait Arrays<V: Copy> {
    /// The hit of the first array that hits, where it is stored (made most recently used).
    fn lookup_ref(&mut self, addr: u64, tag: u32) -> Option<&V>;
    /// Like [`lookup_ref`](Self::lookup_ref) without touching the LRU order, with the hit's
    /// size.
    fn peek(&self, addr: u64, tag: u32) -> Option<(PageSize, V)>;
    /// Whether every array's representation takes a fill of the page of `size` holding `addr`
    /// ([`PagedArray::takes`]).
    fn takes(&self, addr: u64, size: PageSize) -> bool;
    /// [`PagedArray::fill`] into every array that holds `size`.
    fn fill(&mut self, addr: u64, size: PageSize, tag: u32, tmask: u32, val: V);
    /// [`PagedArray::fill_absent`] into every array that holds `size`.
    fn fill_absent(&mut self, addr: u64, size: PageSize, tag: u32, val: V);
    /// [`PagedArray::update`] in every array; returns how many entries.
    fn update(&mut self, addr: u64, tag: u32, f: &mut impl FnMut(&mut V)) -> usize;
    /// [`PagedArray::invalidate`] in every array; returns how many entries.
    fn invalidate(&mut self, addr: u64, tag: u32) -> usize;
    /// [`PagedArray::retain`] in every array; returns how many entries were dropped.
    fn retain(&mut self, keep: &mut impl FnMut(u32, u32) -> bool) -> usize;
    /// Drops everything.
    fn clear(&mut self);
    /// Entries held.
    fn len(&self) -> usize;
    /// True when no entry is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes of storage.
    fn bytes(&self) -> usize;
}

impl<V: Copy, S: PagedStore<V>, const H: u8> Arrays<V> for PagedArray<V, S, H> {
    #[inline(always)]
    fn lookup_ref(&mut self, addr: u64, tag: u32) -> Option<&V> {
        PagedArray::lookup_ref(self, addr, tag)
    }
    fn peek(&self, addr: u64, tag: u32) -> Option<(PageSize, V)> {
        PagedArray::peek(self, addr, tag)
    }
    #[inline(always)]
    fn takes(&self, addr: u64, size: PageSize) -> bool {
        PagedArray::takes(self, addr, size)
    }
    #[inline(always)]
    fn fill(&mut self, addr: u64, size: PageSize, tag: u32, tmask: u32, val: V) {
        PagedArray::fill(self, addr, size, tag, tmask, val)
    }
    #[inline(always)]
    fn fill_absent(&mut self, addr: u64, size: PageSize, tag: u32, val: V) {
        PagedArray::fill_absent(self, addr, size, tag, val)
    }
    fn update(&mut self, addr: u64, tag: u32, f: &mut impl FnMut(&mut V)) -> usize {
        PagedArray::update(self, addr, tag, f)
    }
    fn invalidate(&mut self, addr: u64, tag: u32) -> usize {
        PagedArray::invalidate(self, addr, tag)
    }
    fn retain(&mut self, keep: &mut impl FnMut(u32, u32) -> bool) -> usize {
        PagedArray::retain(self, keep)
    }
    fn clear(&mut self) {
        PagedArray::clear(self)
    }
    fn len(&self) -> usize {
        PagedArray::len(self)
    }
    fn bytes(&self) -> usize {
        PagedArray::bytes(self)
    }
}

impl<V: Copy, A: Arrays<V>, B: Arrays<V>> Arrays<V> for (A, B) {
    #[inline(always)]
    fn lookup_ref(&mut self, addr: u64, tag: u32) -> Option<&V> {
        if let Some(v) = self.0.lookup_ref(addr, tag) {
            return Some(v);
        }
        self.1.lookup_ref(addr, tag)
    }
    fn peek(&self, addr: u64, tag: u32) -> Option<(PageSize, V)> {
        self.0.peek(addr, tag).or_else(|| self.1.peek(addr, tag))
    }
    #[inline(always)]
    fn takes(&self, addr: u64, size: PageSize) -> bool {
        self.0.takes(addr, size) && self.1.takes(addr, size)
    }
    #[inline(always)]
    fn fill(&mut self, addr: u64, size: PageSize, tag: u32, tmask: u32, val: V) {
        self.0.fill(addr, size, tag, tmask, val);
        self.1.fill(addr, size, tag, tmask, val);
    }
    #[inline(always)]
    fn fill_absent(&mut self, addr: u64, size: PageSize, tag: u32, val: V) {
        self.0.fill_absent(addr, size, tag, val);
        self.1.fill_absent(addr, size, tag, val);
    }
    fn update(&mut self, addr: u64, tag: u32, f: &mut impl FnMut(&mut V)) -> usize {
        self.0.update(addr, tag, f) + self.1.update(addr, tag, f)
    }
    fn invalidate(&mut self, addr: u64, tag: u32) -> usize {
        self.0.invalidate(addr, tag) + self.1.invalidate(addr, tag)
    }
    fn retain(&mut self, keep: &mut impl FnMut(u32, u32) -> bool) -> usize {
        self.0.retain(keep) + self.1.retain(keep)
    }
    fn clear(&mut self) {
        self.0.clear();
        self.1.clear();
    }
    fn len(&self) -> usize {
        self.0.len() + self.1.len()
    }
    fn bytes(&self) -> usize {
        self.0.bytes() + self.1.bytes()
    }
}

impl<V: Copy> Arrays<V> for Vec<PagedArray<V>> {
    #[inline(always)]
    fn lookup_ref(&mut self, addr: u64, tag: u32) -> Option<&V> {
        // A loop rather than `find_map`, which the compiler left out of line.
        for a in self.iter_mut() {
            if let Some(v) = a.lookup_ref(addr, tag) {
                return Some(v);
            }
        }
        None
    }
    fn peek(&self, addr: u64, tag: u32) -> Option<(PageSize, V)> {
        self.iter().find_map(|a| a.peek(addr, tag))
    }
    #[inline(always)]
    fn takes(&self, _addr: u64, _size: PageSize) -> bool {
        // The general store widens itself.
        true
    }
    fn fill(&mut self, addr: u64, size: PageSize, tag: u32, tmask: u32, val: V) {
        for a in self.iter_mut() {
            a.fill(addr, size, tag, tmask, val);
        }
    }
    #[inline(always)]
    fn fill_absent(&mut self, addr: u64, size: PageSize, tag: u32, val: V) {
        for a in self.iter_mut() {
            a.fill_absent(addr, size, tag, val);
        }
    }
    fn update(&mut self, addr: u64, tag: u32, f: &mut impl FnMut(&mut V)) -> usize {
        self.iter_mut().map(|a| a.update(addr, tag, &mut *f)).sum()
    }
    fn invalidate(&mut self, addr: u64, tag: u32) -> usize {
        self.iter_mut().map(|a| a.invalidate(addr, tag)).sum()
    }
    fn retain(&mut self, keep: &mut impl FnMut(u32, u32) -> bool) -> usize {
        self.iter_mut().map(|a| a.retain(&mut *keep)).sum()
    }
    fn clear(&mut self) {
        for a in self.iter_mut() {
            a.clear();
        }
    }
    fn len(&self) -> usize {
        self.iter().map(|a| a.len()).sum()
    }
    fn bytes(&self) -> usize {
        self.iter().map(|a| a.bytes()).sum()
    }
}

/// No array: every lookup misses, every fill is dropped.
impl<V: Copy> Arrays<V> for () {
    #[inline(always)]
    fn lookup_ref(&mut self, _addr: u64, _tag: u32) -> Option<&V> {
        None
    }
    fn peek(&self, _addr: u64, _tag: u32) -> Option<(PageSize, V)> {
        None
    }
    #[inline(always)]
    fn takes(&self, _addr: u64, _size: PageSize) -> bool {
        true
    }
    #[inline(always)]
    fn fill(&mut self, _addr: u64, _size: PageSize, _tag: u32, _tmask: u32, _val: V) {}
    #[inline(always)]
    fn fill_absent(&mut self, _addr: u64, _size: PageSize, _tag: u32, _val: V) {}
    fn update(&mut self, _addr: u64, _tag: u32, _f: &mut impl FnMut(&mut V)) -> usize {
        0
    }
    fn invalidate(&mut self, _addr: u64, _tag: u32) -> usize {
        0
    }
    fn retain(&mut self, _keep: &mut impl FnMut(u32, u32) -> bool) -> usize {
        0
    }
    fn clear(&mut self) {}
    fn len(&self) -> usize {
        0
    }
    fn bytes(&self) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PageSize::*;

    #[test]
    fn probes_each_held_size_and_skips_absent_ones() {
        let mut a = PagedArray::new(8, 8, &[Size2M, Size4K], 0u32);
        assert_eq!(a.sizes(), [Size4K, Size2M]);
        a.fill(0x40_0000, Size2M, 7, !0, 1);
        assert_eq!(a.lookup(0x5f_f123, 7), Some((Size2M, 1)));
        assert_eq!(a.lookup(0x5f_f123, 8), None);
        assert_eq!(a.lookup(0x60_0000, 7), None);
        a.fill(0x5f_f000, Size4K, 7, !0, 2);
        // The 4 KiB probe comes first.
        assert_eq!(a.lookup(0x5f_f123, 7), Some((Size4K, 2)));
        assert_eq!(a.invalidate(0x5f_f000, 7), 2);
        assert!(a.is_empty());
    }

    #[test]
    fn refill_replaces_instead_of_duplicating() {
        let mut a = PagedArray::new(4, 4, &[Size4K], 0u32);
        a.fill(0x1000, Size4K, 1, !0, 10);
        a.fill(0x1000, Size4K, 1, !0, 11);
        assert_eq!(a.len(), 1);
        assert_eq!(a.peek(0x1000, 1), Some((Size4K, 11)));
        // An array that does not hold a size ignores fills of it.
        a.fill(0x20_0000, Size2M, 1, !0, 12);
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn masked_tag_matches_any_value_of_the_ignored_bits() {
        let mut a = PagedArray::new(4, 4, &[Size4K], 0u32);
        a.fill(0x1000, Size4K, 0x0001_0005, 0xffff_0000, 3);
        assert_eq!(a.peek(0x1000, 0x0001_0009), Some((Size4K, 3)));
        assert_eq!(a.peek(0x1000, 0x0002_0005), None);
        assert_eq!(a.retain(|_, m| m == !0), 1);
        assert!(a.is_empty());
    }
}
