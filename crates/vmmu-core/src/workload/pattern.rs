//! Address patterns: where each generator's next reference falls, and the loop that fills a batch.
//!
//! A pattern appends `n` references to the simulator's batch buffer in one tight loop per
//! pattern (the `match` is taken once per batch, not once per reference), drawing from a
//! `Xoshiro256PlusPlus`; nothing is allocated per reference. Every address is 8-byte aligned
//! and the whole 8-byte access lies inside `[base, base + footprint)`.

use super::dist::{below, Scatter, Zipf};
use crate::addr::Gva;
use crate::event::{AccessKind, Event, MemRef};
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Access size of every generated reference, in bytes.
pub(crate) const REF_SIZE: u64 = 8;

/// What every reference of one generator shares: its RNG, instructions per reference,
/// load/store mix and load dependence.
pub(crate) struct RefGen {
    pub rng: Xoshiro256PlusPlus,
    ipr: u32,
    /// Every reference's [`MemRef::dep`]: 0 independent, `k` the address is the value loaded
    /// `k` references before (k interleaved pointer chases).
    pub dep: u8,
    /// A reference is a store when a 64-bit draw is below this; 0 = never (no draw),
    /// `u64::MAX` = always (no draw).
    write_threshold: u64,
}

impl RefGen {
    /// A reference maker with `write_ratio` ∈ [0, 1].
    pub fn new(rng: Xoshiro256PlusPlus, ipr: u32, write_ratio: f64) -> RefGen {
        let write_threshold = if write_ratio <= 0.0 {
            0
        } else if write_ratio >= 1.0 {
            u64::MAX
        } else {
            // Exact to 2^-64; the clamp keeps ratios just below 1 from meaning "always".
            ((write_ratio * 18_446_744_073_709_551_616.0) as u64).clamp(1, u64::MAX - 1)
        };
        RefGen {
            rng,
            ipr,
            dep: 0,
            write_threshold,
        }
    }

    /// The reference to `va`.
    #[inline(always)]
    fn make(&mut self, va: u64) -> Event {
        let kind = match self.write_threshold {
            0 => AccessKind::Load,
            u64::MAX => AccessKind::Store,
            t => {
                if self.rng.next_u64() < t {
                    AccessKind::Store
                } else {
                    AccessKind::Load
                }
            }
        };
        Event::Ref(MemRef {
            va: Gva::new(va),
            kind,
            size: REF_SIZE as u8,
            instrs: self.ipr,
            dep: self.dep,
        })
    }

    /// Appends `n` references to `buf`, each at the address `next` returns, in order: the room
    /// is reserved once, then each event written into it.
    #[inline(always)]
    fn fill(&mut self, buf: &mut Vec<Event>, n: usize, mut next: impl FnMut() -> u64) {
        self.fill_drawn(buf, n, |_| next());
    }

    /// [`fill`](Self::fill) with addresses drawn from the generator's RNG, each drawn before
    /// its reference's load/store draw.
    #[inline(always)]
    fn fill_drawn(
        &mut self,
        buf: &mut Vec<Event>,
        n: usize,
        mut next: impl FnMut(&mut Xoshiro256PlusPlus) -> u64,
    ) {
        let mut g = self.local();
        // Each event written into the room reserved once, in a loop compiled here: a push per
        // event checks the capacity each time (about 10 instructions), and an `extend` of a
        // mapped range goes through a library function the compiler may leave out of line,
        // where the RNG and the closures' state live in memory instead of registers (19
        // instructions per event more on the stream row where it did).
        buf.reserve(n);
        let start = buf.len();
        for slot in &mut buf.spare_capacity_mut()[..n] {
            let va = next(&mut g.rng);
            slot.write(g.make(va));
        }
        // SAFETY: `reserve` made room for `n` more events and the loop wrote the first `n`
        // slots past the length, each once.
        unsafe { buf.set_len(start + n) };
        self.rng = g.rng;
    }

    /// A copy to fill a batch with, written back after it: a local the compiler keeps in
    /// registers, where the generator's own state would be reloaded and stored around every
    /// event written (the events' buffer might alias it).
    #[inline(always)]
    fn local(&self) -> RefGen {
        RefGen {
            rng: self.rng.clone(),
            ipr: self.ipr,
            dep: self.dep,
            write_threshold: self.write_threshold,
        }
    }
}

/// Where the references of one generator fall.
pub(crate) enum Pattern {
    /// `arrays` equal arrays of `array_len` bytes swept in lockstep by `step` bytes, wrapping:
    /// reference `i` is at `(i mod arrays) × array_len + ((i div arrays) × step mod array_len)`.
    /// `stream` (step = element size) and `stride` (arrays = 1) are both sweeps.
    Sweep {
        array_len: u64,
        arrays: u64,
        step: u64,
        /// Offset within the arrays of the next reference.
        off: u64,
        /// Array of the next reference.
        array: u64,
    },
    /// Uniform over `slots` 8-byte slots.
    Random { slots: u64 },
    /// A node drawn hot with probability `hot_threshold / 2^64` (always when it is
    /// `u64::MAX`), uniform within the hot set
    /// (`[0, hot)`) or the cold set (`[hot, nodes)`).
    HotCold {
        nodes: u64,
        hot: u64,
        hot_threshold: u64,
        node_bytes: u64,
        scatter: Option<Scatter>,
    },
    /// A node of Zipf rank k (rank 1 the most popular) is node k-1.
    Zipf {
        zipf: Zipf,
        node_bytes: u64,
        scatter: Option<Scatter>,
    },
}

impl Pattern {
    /// A sweep; `step` is reduced modulo `array_len` (≥ 8).
    pub fn sweep(array_len: u64, arrays: u64, step: u64) -> Pattern {
        Pattern::Sweep {
            array_len,
            arrays,
            step: step % array_len,
            off: 0,
            array: 0,
        }
    }

    /// Appends `n` references at `base + offset` to `buf`.
    pub fn fill(&mut self, g: &mut RefGen, base: u64, buf: &mut Vec<Event>, n: usize) {
        match self {
            Pattern::Sweep {
                array_len,
                arrays,
                step,
                off,
                array,
            } => {
                let (array_len, arrays, step) = (*array_len, *arrays, *step);
                if arrays == 1 {
                    let mut o = *off;
                    g.fill(buf, n, || {
                        let va = base + o;
                        o += step;
                        if o >= array_len {
                            o -= array_len;
                        }
                        va
                    });
                    *off = o;
                } else {
                    let (mut o, mut a) = (*off, *array);
                    g.fill(buf, n, || {
                        let va = base + a * array_len + o;
                        a += 1;
                        if a == arrays {
                            a = 0;
                            o += step;
                            if o >= array_len {
                                o -= array_len;
                            }
                        }
                        va
                    });
                    (*off, *array) = (o, a);
                }
            }
            Pattern::Random { slots } => {
                let slots = *slots;
                g.fill_drawn(buf, n, |rng| base + below(rng, slots) * REF_SIZE);
            }
            Pattern::HotCold {
                nodes,
                hot,
                hot_threshold,
                node_bytes,
                scatter,
            } => {
                let (nodes, hot, thr, nb) = (*nodes, *hot, *hot_threshold, *node_bytes);
                g.fill_drawn(buf, n, |rng| {
                    let hot_draw = rng.next_u64() < thr || thr == u64::MAX;
                    let rank = if hot_draw || hot == nodes {
                        below(rng, hot)
                    } else {
                        hot + below(rng, nodes - hot)
                    };
                    let node = scatter.as_ref().map_or(rank, |s| s.apply(rank));
                    base + node * nb
                });
            }
            Pattern::Zipf {
                zipf,
                node_bytes,
                scatter,
            } => {
                let nb = *node_bytes;
                g.fill_drawn(buf, n, |rng| {
                    let rank = zipf.sample(rng) - 1;
                    let node = scatter.as_ref().map_or(rank, |s| s.apply(rank));
                    base + node * nb
                });
            }
        }
    }
}
