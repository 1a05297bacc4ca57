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

use super::store::{with_store, LruStore, Store};
use crate::addr::PageSize;

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
const SHIFT: [u32; 4] = [12, 21, 22, 30];

/// The set, way and size code of the entry of `s` that maps `addr` with `tag`, probing the
/// sizes of `present` (size codes, one bit each) smallest first.
#[inline(always)]
fn find_in<V, S: LruStore<Tagged<V>>>(
    s: &S,
    present: u8,
    addr: u64,
    tag: u32,
) -> Option<(usize, usize, usize)>
where
    V: Copy,
{
    let mut bits = present;
    while bits != 0 {
        let code = bits.trailing_zeros() as usize & 3;
        bits &= bits - 1;
        let page = addr >> SHIFT[code];
        let set = s.set_of(page);
        if let Some(way) = s.find(set, (page << 2) | code as u64, |e| e.matches(tag)) {
            return Some((set, way, code));
        }
    }
    None
}

/// A set-associative LRU array of tagged translations of the page sizes it holds.
#[derive(Clone, Debug)]
pub struct PagedArray<V> {
    arr: Store<Tagged<V>>,
    /// Sizes held, smallest first.
    sizes: Vec<PageSize>,
    /// The size codes held, one bit each.
    holds: u8,
    /// Entries currently held, per size code.
    count: [u32; 4],
    /// The size codes of which some entry is held, one bit each (bit `c`: `count[c] > 0`): a
    /// probe visits these sizes only, smallest first.
    present: u8,
}

impl<V: Copy> PagedArray<V> {
    /// `entries` entries in sets of `ways`, holding the page sizes in `sizes`.
    pub fn new(entries: u32, ways: u32, sizes: &[PageSize], filler: V) -> Self {
        let mut held: Vec<PageSize> = sizes.to_vec();
        held.sort();
        held.dedup();
        let filler = Tagged {
            tag: 0,
            tmask: 0,
            val: filler,
        };
        PagedArray {
            arr: Store::new(entries as usize, ways as usize, filler),
            holds: held.iter().fold(0, |m, &s| m | (1 << size_code(s))),
            sizes: held,
            count: [0; 4],
            present: 0,
        }
    }

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
    #[inline]
    pub fn holds(&self, size: PageSize) -> bool {
        self.holds & (1 << size_code(size)) != 0
    }

    /// Sizes held, smallest first.
    pub fn sizes(&self) -> &[PageSize] {
        &self.sizes
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
        with_store!(&mut self.arr, s => {
            let (set, way, code) = find_in(s, present, addr, tag)?;
            Some((PageSize::ALL[code], s.touch(set, way).val))
        })
    }

    /// Like [`lookup`](Self::lookup), returning the hit's value where it is stored. Hot paths
    /// use this to copy a large value once, straight from storage.
    #[inline(always)]
    pub fn lookup_ref(&mut self, addr: u64, tag: u32) -> Option<&V> {
        let present = self.present;
        if present == 0 {
            return None;
        }
        with_store!(&mut self.arr, s => {
            let (set, way, _) = find_in(s, present, addr, tag)?;
            Some(&s.touch(set, way).val)
        })
    }

    /// Like [`lookup`](Self::lookup) without touching the LRU order.
    pub fn peek(&self, addr: u64, tag: u32) -> Option<(PageSize, V)> {
        let (set, way, _) = find_in(&self.arr, self.present, addr, tag)?;
        let (k, e) = self.arr.get(set, way);
        Some((key_size(k), e.val))
    }

    /// Inserts the translation of the page of `size` holding `addr` as the most recently used
    /// entry of its set, tagged `tag` with tag mask `tmask`. It replaces every entry of the
    /// same page and size that would answer some lookup the new one answers, so no lookup ever
    /// has two candidates of one size. Does nothing if the array does not hold `size`.
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
        let evicted = with_store!(&mut self.arr, s => {
            let set = s.set_of(page);
            s.takes(key).then(|| s.insert(set, key, new))
        });
        // A key the representation does not take: through the `Store`, which widens.
        let evicted = match evicted {
            Some(e) => e,
            None => self.arr.insert(self.arr.set_of(page), key, new),
        };
        match evicted {
            // An entry of the same size replaced: the counts stand.
            Some((old, _)) if (old & 3) as usize == code => {}
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
        self.present = (0..4).fold(0, |p, c| p | (u8::from(self.count[c] > 0) << c));
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

#[cfg(test)]
mod tests {
    use super::*;
    use PageSize::*;

    #[test]
    fn probes_each_held_size_and_skips_absent_ones() {
        let mut a = PagedArray::new(8, 8, &[Size2M, Size4K], 0u32);
        assert_eq!(a.sizes(), &[Size4K, Size2M]);
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
