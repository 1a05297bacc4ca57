//! A set of disjoint half-open address ranges, each with a value: the one interval set of
//! vmmu (a process's virtual memory areas in the guest model, the mappings a trace checker
//! tracks). Ranges are kept sorted; removing or changing part of a range splits it.

/// One range `[start, end)` and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range<V> {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The value of every address in the range.
    pub value: V,
}

/// Disjoint ranges, sorted by start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeMap<V> {
    ranges: Vec<Range<V>>,
}

impl<V> Default for RangeMap<V> {
    fn default() -> Self {
        RangeMap { ranges: Vec::new() }
    }
}

impl<V: Copy + PartialEq> RangeMap<V> {
    /// No ranges.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ranges, in address order.
    pub fn ranges(&self) -> &[Range<V>] {
        &self.ranges
    }

    /// Whether there is no range.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The range holding `addr`.
    #[inline]
    pub fn get(&self, addr: u64) -> Option<&Range<V>> {
        let i = self.ranges.partition_point(|r| r.end <= addr);
        self.ranges.get(i).filter(|r| r.start <= addr)
    }

    /// The range holding `addr`, trying the range at `*hint` first (the last one found: streams
    /// of addresses stay in one range for long stretches); `*hint` follows the search.
    #[inline(always)]
    pub fn get_near(&self, addr: u64, hint: &mut usize) -> Option<&Range<V>> {
        if let Some(r) = self.ranges.get(*hint) {
            if r.start <= addr && addr < r.end {
                return Some(r);
            }
        }
        let i = self.ranges.partition_point(|r| r.end <= addr);
        let r = self.ranges.get(i).filter(|r| r.start <= addr)?;
        *hint = i;
        Some(r)
    }

    /// Whether any range overlaps `[start, end)`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.end <= start);
        self.ranges.get(i).is_some_and(|r| r.start < end)
    }

    /// Makes `[start, end)` one range of `value`, replacing whatever was there.
    pub fn insert(&mut self, start: u64, end: u64, value: V) {
        if start >= end {
            return;
        }
        self.remove(start, end);
        let i = self.ranges.partition_point(|r| r.start < start);
        self.ranges.insert(i, Range { start, end, value });
    }

    /// Removes `[start, end)`, splitting the ranges that straddle its ends.
    pub fn remove(&mut self, start: u64, end: u64) {
        self.update(start, end, |_| None);
    }

    /// Replaces the value of every part of `[start, end)` that lies in a range by `f(value)`,
    /// splitting ranges at its ends; returns whether any range overlapped.
    pub fn modify(&mut self, start: u64, end: u64, mut f: impl FnMut(V) -> V) -> bool {
        self.update(start, end, |v| Some(f(v)))
    }

    /// Replaces the value of each overlapped part of `[start, end)` by `f(value)` (`None`
    /// removes it); returns whether any range overlapped.
    fn update(&mut self, start: u64, end: u64, mut f: impl FnMut(V) -> Option<V>) -> bool {
        let first = self.ranges.partition_point(|r| r.end <= start);
        let last = self.ranges.partition_point(|r| r.start < end);
        if first >= last {
            return false;
        }
        let mut mid = Vec::with_capacity(last - first + 2);
        for r in &self.ranges[first..last] {
            if r.start < start {
                mid.push(Range { end: start, ..*r });
            }
            if let Some(value) = f(r.value) {
                mid.push(Range {
                    start: r.start.max(start),
                    end: r.end.min(end),
                    value,
                });
            }
            if r.end > end {
                mid.push(Range { start: end, ..*r });
            }
        }
        self.ranges.splice(first..last, mid);
        true
    }

    /// Joins neighbouring ranges that touch and have equal values.
    pub fn merge(&mut self) {
        self.ranges.dedup_by(|b, a| {
            if a.end == b.start && a.value == b.value {
                a.end = b.end;
                true
            } else {
                false
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference model: one value per page of a small space.
    fn pages(m: &RangeMap<u8>, n: u64) -> Vec<Option<u8>> {
        (0..n).map(|p| m.get(p).map(|r| r.value)).collect()
    }

    #[test]
    fn removing_the_middle_splits_a_range() {
        let mut m = RangeMap::new();
        m.insert(0, 10, 1u8);
        m.remove(3, 5);
        assert_eq!(
            m.ranges(),
            &[
                Range {
                    start: 0,
                    end: 3,
                    value: 1
                },
                Range {
                    start: 5,
                    end: 10,
                    value: 1
                }
            ]
        );
        assert!(!m.overlaps(3, 5));
        assert!(m.overlaps(4, 6));
        let mut hint = 1;
        assert_eq!(m.get_near(1, &mut hint).map(|r| r.end), Some(3));
        assert_eq!(hint, 0, "the hint follows the search");
        assert!(m.get_near(4, &mut hint).is_none());
        m.modify(0, 10, |_| 1);
        m.merge();
        assert_eq!(m.ranges().len(), 2, "modify changes only what exists");
    }

    proptest! {
        #[test]
        fn operations_agree_with_a_page_by_page_model(
            ops in prop::collection::vec((0u8..3, 0u64..32, 1u64..12, 0u8..4), 1..40)
        ) {
            let mut m = RangeMap::new();
            let mut model = vec![None; 48];
            for (op, start, len, v) in ops {
                let end = start + len;
                match op {
                    0 => {
                        m.insert(start, end, v);
                        for p in start..end { model[p as usize] = Some(v); }
                    }
                    1 => {
                        m.remove(start, end);
                        for p in start..end { model[p as usize] = None; }
                    }
                    _ => {
                        let any = m.modify(start, end, |_| v);
                        prop_assert_eq!(any, (start..end).any(|p| model[p as usize].is_some()));
                        for p in start..end {
                            if model[p as usize].is_some() { model[p as usize] = Some(v); }
                        }
                    }
                }
                m.merge();
                prop_assert_eq!(pages(&m, 48), model.clone());
                prop_assert!(m.ranges().windows(2).all(|w| w[0].end <= w[1].start));
            }
        }
    }
}
