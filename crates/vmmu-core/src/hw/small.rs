//! Storage for sets of at most four ways: each set keeps its keys, values and byte-wide
//! recency links side by side, and a lookup compares the `W` keys directly (a 2-way cache set,
//! a 4-way L2 TLB set, a direct-mapped array). One of the representations
//! [`Store`](super::store::Store) chooses from at construction; it behaves exactly as
//! [`SetAssoc`](super::lru::SetAssoc) (tests/hw_model.rs compares them on random operation
//! sequences).

use super::assoc::{LruStore, PerSet};
use super::lru::EMPTY;
use super::recency::Links;

/// One set: `W` keys ([`EMPTY`] for an empty way), their values and their recency order.
#[derive(Clone, Copy, Debug)]
struct SmallSet<V, const W: usize> {
    keys: [u64; W],
    vals: [V; W],
    links: Links<W>,
}

/// Sets of exactly `W` ways (1 to 4), LRU within each set.
#[derive(Clone, Debug)]
pub struct Small<V, const W: usize> {
    sets: PerSet<SmallSet<V, W>>,
    total: usize,
}

impl<V: Copy, const W: usize> Small<V, W> {
    /// `sets` sets of `W` ways; `filler` initialises unused value slots (never observed).
    pub fn new(sets: usize, filler: V) -> Self {
        assert!(
            (1..=4).contains(&W) && sets > 0,
            "Small: {sets} sets of {W} ways"
        );
        let empty = SmallSet {
            keys: [EMPTY; W],
            vals: [filler; W],
            links: Links::new(W),
        };
        Small {
            sets: PerSet::new(sets, empty),
            total: 0,
        }
    }
}

impl<V: Copy, const W: usize> LruStore<V> for Small<V, W> {
    #[inline]
    fn sets(&self) -> usize {
        self.sets.len()
    }

    #[inline]
    fn ways(&self) -> usize {
        W
    }

    #[inline]
    fn len(&self) -> usize {
        self.total
    }

    fn set_len(&self, set: usize) -> usize {
        self.sets
            .at(set)
            .keys
            .iter()
            .filter(|&&k| k != EMPTY)
            .count()
    }

    #[inline(always)]
    fn set_of(&self, h: u64) -> usize {
        self.sets.of(h)
    }

    #[inline(always)]
    fn find(&self, set: usize, key: u64, pred: impl Fn(&V) -> bool) -> Option<usize> {
        debug_assert_ne!(key, EMPTY);
        let s = self.sets.at(set);
        (0..W).find(|&w| s.keys[w] == key && pred(&s.vals[w]))
    }

    #[inline(always)]
    fn get(&self, set: usize, way: usize) -> (u64, &V) {
        let s = self.sets.at(set);
        debug_assert_ne!(s.keys[way], EMPTY);
        (s.keys[way], &s.vals[way])
    }

    #[inline(always)]
    fn get_mut(&mut self, set: usize, way: usize) -> &mut V {
        &mut self.sets.at_mut(set).vals[way]
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, way: usize) -> &mut V {
        let s = self.sets.at_mut(set);
        assert!(way < W, "way {way} of set {set}");
        s.links.touch(way);
        &mut s.vals[way]
    }

    #[inline(always)]
    fn insert(&mut self, set: usize, key: u64, val: V) -> Option<(u64, V)> {
        debug_assert_ne!(key, EMPTY);
        let s = self.sets.at_mut(set);
        let way = s.links.oldest();
        let old = s.keys[way];
        let evicted = (old != EMPTY).then(|| (old, s.vals[way]));
        s.keys[way] = key;
        s.vals[way] = val;
        s.links.take_oldest(way);
        if evicted.is_none() {
            self.total += 1;
        }
        evicted
    }

    /// [`LruStore::lookup_fill`] with the keys compared in a plain loop; a miss is an
    /// [`insert`](LruStore::insert).
    #[inline(always)]
    fn lookup_fill(&mut self, set: usize, key: u64, val: V) -> Option<bool> {
        debug_assert_ne!(key, EMPTY);
        let s = self.sets.at_mut(set);
        // A loop the compiler unrolls (`Iterator::find` stayed a call in a cache level's search).
        for w in 0..W {
            if s.keys[w] == key {
                s.links.touch(w);
                return Some(true);
            }
        }
        self.insert(set, key, val);
        Some(false)
    }

    fn remove(&mut self, set: usize, way: usize) -> (u64, V) {
        let s = self.sets.at_mut(set);
        let out = (s.keys[way], s.vals[way]);
        debug_assert_ne!(out.0, EMPTY);
        s.keys[way] = EMPTY;
        s.links.make_oldest(way);
        self.total -= 1;
        out
    }

    fn retain(&mut self, mut keep: impl FnMut(u64, &V) -> bool) -> usize {
        if self.total == 0 {
            return 0;
        }
        let mut removed = 0;
        for set in 0..self.sets.len() {
            for w in 0..W {
                let s = self.sets.at(set);
                if s.keys[w] != EMPTY && !keep(s.keys[w], &s.vals[w]) {
                    self.remove(set, w);
                    removed += 1;
                }
            }
        }
        removed
    }

    fn clear(&mut self) {
        for s in self.sets.iter_mut() {
            s.keys = [EMPTY; W];
            s.links = Links::new(W);
        }
        self.total = 0;
    }

    fn iter_set<'a>(&'a self, set: usize) -> impl Iterator<Item = (u64, &'a V)> + 'a
    where
        V: 'a,
    {
        let s = self.sets.at(set);
        let mut w = s.links.head();
        // The set's entries are its newest ways; the empty ones follow.
        (0..self.set_len(set)).map(move |_| {
            let out = (s.keys[w], &s.vals[w]);
            w = s.links.older(w);
            out
        })
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.sets)
    }
}
