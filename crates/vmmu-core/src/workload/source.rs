//! The event stream of a synthetic workload: the preamble (process and region), then the
//! references of one pattern, or of several patterns taking turns with phase markers.

use super::pattern::{Pattern, RefGen};
use crate::event::{Event, EventSource};

/// One pattern with its reference maker (one per phase).
pub(crate) struct Part {
    pub pattern: Pattern,
    pub gen: RefGen,
}

/// A seeded synthetic workload as an [`EventSource`].
pub(crate) struct Synthetic {
    spec: String,
    base: u64,
    preamble: Vec<Event>,
    preamble_done: usize,
    parts: Vec<Part>,
    /// References per phase; `None` for a single pattern (no phase markers).
    period: Option<u64>,
    /// References still to emit in total.
    remaining: u64,
    /// References still to emit in the current phase (0: a marker comes next).
    left_in_phase: u64,
    /// Index of the current part.
    current: usize,
    /// Phase markers emitted so far.
    phases_emitted: u32,
    total_events: u64,
}

impl Synthetic {
    /// A workload emitting `preamble`, then `refs` references from `parts` (switching every
    /// `period` references with a marker when `period` is `Some`).
    pub fn new(
        spec: &str,
        base: u64,
        preamble: Vec<Event>,
        parts: Vec<Part>,
        refs: u64,
        period: Option<u64>,
    ) -> Synthetic {
        let markers = period.map_or(0, |p| refs.div_ceil(p));
        let total_events = preamble.len() as u64 + refs + markers;
        Synthetic {
            spec: spec.trim().to_string(),
            base,
            preamble,
            preamble_done: 0,
            parts,
            period,
            remaining: refs,
            left_in_phase: if period.is_some() { 0 } else { u64::MAX },
            current: 0,
            phases_emitted: 0,
            total_events,
        }
    }
}

impl EventSource for Synthetic {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> crate::error::Result<usize> {
        let start = buf.len();
        while self.preamble_done < self.preamble.len() && buf.len() - start < max {
            buf.push(self.preamble[self.preamble_done]);
            self.preamble_done += 1;
        }
        while self.remaining > 0 && buf.len() - start < max {
            if self.left_in_phase == 0 {
                let period = self
                    .period
                    .expect("phase budgets run out only with a period");
                if self.phases_emitted > 0 {
                    self.current = (self.current + 1) % self.parts.len();
                }
                buf.push(Event::Phase {
                    id: self.phases_emitted,
                });
                self.phases_emitted += 1;
                self.left_in_phase = period;
                continue;
            }
            let room = (max - (buf.len() - start)) as u64;
            let n = room.min(self.remaining).min(self.left_in_phase);
            let part = &mut self.parts[self.current];
            part.pattern.fill(&mut part.gen, self.base, buf, n as usize);
            self.remaining -= n;
            self.left_in_phase -= n;
        }
        Ok(buf.len() - start)
    }

    fn len_hint(&self) -> Option<u64> {
        Some(self.total_events)
    }

    fn describe(&self) -> String {
        self.spec.clone()
    }

    /// A generator says what its references depend on: each is independent unless its
    /// generator declares a chase.
    fn tracks_dependences(&self) -> bool {
        true
    }
}
