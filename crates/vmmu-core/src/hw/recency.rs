//! The recency order of one set of at most 256 ways, kept as [`SetAssoc`](super::lru::SetAssoc)
//! keeps it (its module doc): every way, used or empty, on one circular doubly linked list from
//! the most recently used way (the *head*) to the least recently used one (the head's
//! predecessor), the empty ways oldest. An insertion takes the head's predecessor and makes it
//! the head without changing a link; a use relinks one way in front of the head; a removal
//! relinks its way behind all others. The ways insertions take are therefore the same as
//! `SetAssoc`'s, way for way: empty ways lowest first, an emptied way before them.
//!
//! The specialised storages of [`store`](super::store) keep one of these per set, beside the
//! set's tags, as byte-wide links. `W` is the storage's lane count; only the first `ways` ways
//! are ever linked. Way numbers are masked by `W - 1` where `W` is a power of two, which keeps
//! every index in bounds without a check (a linked way is always below `ways <= W`).

/// The recency list of one set: `next` towards older ways, `prev` towards newer ones, `head`
/// the most recently used way.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Links<const W: usize> {
    next: [u8; W],
    prev: [u8; W],
    head: u8,
}

impl<const W: usize> Links<W> {
    /// The order of an empty set of `ways` ways: way 0 oldest, then 1, ..., so insertions take
    /// them in that order.
    pub(crate) fn new(ways: usize) -> Self {
        debug_assert!(ways >= 1 && ways <= W && W <= 256);
        let mut l = Links {
            next: [0; W],
            prev: [0; W],
            head: (ways - 1) as u8,
        };
        for w in 0..ways {
            l.prev[w] = ((w + 1) % ways) as u8;
            l.next[w] = ((w + ways - 1) % ways) as u8;
        }
        l
    }

    /// `w` as an index: masked where `W` is a power of two (module doc).
    #[inline(always)]
    fn ix(w: u8) -> usize {
        if W.is_power_of_two() {
            w as usize & (W - 1)
        } else {
            w as usize
        }
    }

    /// The most recently used way.
    #[inline(always)]
    pub(crate) fn head(&self) -> usize {
        Self::ix(self.head)
    }

    /// The way after `w`, towards older ways.
    #[inline(always)]
    pub(crate) fn older(&self, w: usize) -> usize {
        Self::ix(self.next[Self::ix(w as u8)])
    }

    /// The least recently used way (an empty way while the set has one): the way an insertion
    /// takes.
    #[inline(always)]
    pub(crate) fn oldest(&self) -> usize {
        Self::ix(self.prev[Self::ix(self.head)])
    }

    /// Moves `way`, not the head, to just in front of the head, whose predecessor is `last`.
    /// If `way` is `last` itself, unlinking it makes its predecessor the head's, and relinking
    /// puts it back where it was.
    #[inline(always)]
    fn relink(&mut self, way: usize, last: u8, head: u8) {
        let w = Self::ix(way as u8);
        // All loads before any store (a load run ahead of an older store to the same node
        // costs a pipeline flush).
        let (p, n) = (self.prev[w], self.next[w]);
        let last = if n == head { p } else { last };
        self.next[Self::ix(p)] = n;
        self.prev[Self::ix(n)] = p;
        self.next[Self::ix(last)] = way as u8;
        self.prev[w] = last;
        self.next[w] = head;
        self.prev[Self::ix(head)] = way as u8;
    }

    /// Makes `way` the most recently used.
    #[inline(always)]
    pub(crate) fn touch(&mut self, way: usize) {
        let head = self.head;
        if head as usize != way {
            let last = self.prev[Self::ix(head)];
            self.relink(way, last, head);
            self.head = way as u8;
        }
    }

    /// Makes the oldest way, which an insertion has just filled, the most recently used: one
    /// step back around the circle.
    #[inline(always)]
    pub(crate) fn take_oldest(&mut self, way: usize) {
        debug_assert_eq!(way, self.oldest());
        self.head = way as u8;
    }

    /// Makes `way`, just emptied, the oldest; the others keep their order.
    #[inline(always)]
    pub(crate) fn make_oldest(&mut self, way: usize) {
        let head = self.head;
        if head as usize == way {
            self.head = self.next[Self::ix(head)];
        } else {
            let last = self.prev[Self::ix(head)];
            self.relink(way, last, head);
        }
    }
}
