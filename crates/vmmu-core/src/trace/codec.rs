//! The record encoding of `.vtrace` chunks (docs/traces.md, "Records").
//!
//! A reference is one tag byte, then only what differs from a prediction. References are split
//! into two classes, instruction fetches and data (load, store, modify), each with its own
//! predictor state — last address, last size, last instruction count — because a program's code
//! and data addresses form two streams that are each far more regular than their interleaving.
//! The address is predicted to follow the previous one of its class (`last + last_size`: the
//! next instruction, the next element); otherwise it is a signed delta from the previous one,
//! in 1, 2, 4 or 6 bytes, or the full 8-byte address. Straight-line code and sequential data
//! are one byte per reference before compression; zstd then removes the loops.
//!
//! ```text
//! ref tag (bit 7 = 0):  bits 0-1 kind (0 load, 1 store, 2 modify, 3 fetch)
//!                       bit 2    a size byte follows      (else: size of the class's last ref)
//!                       bit 3    an instrs varint follows (else: instrs of the class's last ref)
//!                       bits 4-6 address: 0 last+last_size, 1 last, 2 i8 delta, 3 i16 delta,
//!                                4 i32 delta, 5 i48 delta, 6 absolute u64,
//!                                7 extended (version 2): an ext byte (bits 0-2 the address
//!                                code 0-6, bits 3-7 zero) and a dependence byte (1-255) follow
//! other events (0x80..): tag then LEB128 varints (prot, flags and advice one byte each)
//! ```
//!
//! A reference whose address depends on an earlier load ([`MemRef::dep`] ≠ 0) is the only one
//! that takes the extended form, so a trace without dependences encodes as version 1 did. The
//! predictor state is reset at the start of every chunk, so each chunk decodes on its own.

use crate::addr::Gva;
use crate::event::{AccessKind, Advice, Event, MapFlags, MemRef, Prot};
use crate::event::{Madvise, Mmap, Mprotect, Mremap, Munmap};
use std::mem::MaybeUninit;

/// The longest record: `Mremap`'s tag and four 10-byte varints, rounded up (a reference takes
/// at most 1 + 2 + 1 + 5 + 8).
pub(crate) const MAX_RECORD: usize = 48;

/// Bytes a reader must keep readable past a chunk's raw data (the decoder reads whole 8-byte
/// words and checks bounds once per record, not once per byte).
pub(crate) const PAD: usize = 64;

const SIZE_FOLLOWS: u8 = 1 << 2;
const INSTRS_FOLLOWS: u8 = 1 << 3;
const ADDR_SHIFT: u8 = 4;

const A_NEXT: u8 = 0;
const A_SAME: u8 = 1;
const A_ABS: u8 = 6;
/// The extended reference: the address code and the dependence follow in two bytes.
const A_EXT: u8 = 7;
/// Payload bytes of each address code.
const ADDR_BYTES: [usize; 8] = [0, 0, 1, 2, 4, 6, 8, 0];

/// How the decoder's fast loop rebuilds an address from its code (0 to 5), all in one table
/// (one cache line): `va = last + (last_size & size) + (delta & delta)`, the delta being the
/// payload sign-extended from the 8-byte word that starts at the tag, by shifting it left by
/// `left` then right by `right`. Codes 6 and 7 (an 8-byte payload, invalid) are not fast.
#[derive(Clone, Copy)]
struct AddrCode {
    size: u64,
    delta: u64,
    left: u32,
    right: u32,
}

const fn addr_code(code: usize) -> AddrCode {
    let bytes = ADDR_BYTES[code] as u32;
    match code {
        0 => AddrCode {
            size: !0,
            delta: 0,
            left: 0,
            right: 0,
        },
        2..=5 => AddrCode {
            size: 0,
            delta: !0,
            left: 56 - 8 * bytes,
            right: 64 - 8 * bytes,
        },
        _ => AddrCode {
            size: 0,
            delta: 0,
            left: 0,
            right: 0,
        },
    }
}

const ADDR_CODES: [AddrCode; 6] = [
    addr_code(0),
    addr_code(1),
    addr_code(2),
    addr_code(3),
    addr_code(4),
    addr_code(5),
];

/// The length of a reference record with no size or count, tag included, by address code:
/// one nibble per code, code 0 lowest (1, 1, 2, 3, 5, 7, 9, -). Computed from the tag by two
/// register operations instead of a table load: the next record's position is the loop's one
/// dependency chain from record to record.
const REF_LENS: u32 = {
    let mut v = 0u32;
    let mut code = 0;
    while code < 7 {
        v |= (1 + ADDR_BYTES[code] as u32) << (4 * code);
        code += 1;
    }
    v
};

/// The first tag the fast loop does not decode by its shape: address code 6 (an 8-byte
/// payload, left to [`Decoder::slow`]), 7 (extended: decoded in a branch of its own when its
/// payload is short), and every other event (bit 7, left to the slow path). A reference whose
/// count follows (a varint) is also left to it.
const FIRST_SLOW_TAG: u8 = A_ABS << ADDR_SHIFT;

const T_COMPUTE: u8 = 0x80;
const T_PROC: u8 = 0x81;
const T_FORK: u8 = 0x82;
const T_EXEC: u8 = 0x83;
const T_EXIT: u8 = 0x84;
const T_SWITCH: u8 = 0x85;
const T_MMAP: u8 = 0x86;
const T_MUNMAP: u8 = 0x87;
const T_MPROTECT: u8 = 0x88;
const T_MREMAP: u8 = 0x89;
const T_BRK: u8 = 0x8A;
const T_PHASE: u8 = 0x8B;
const T_THREAD_CREATE: u8 = 0x8C;
const T_THREAD_EXIT: u8 = 0x8D;
const T_THREAD: u8 = 0x8E;
const T_MADVISE: u8 = 0x8F;

const KINDS: [AccessKind; 4] = [
    AccessKind::Load,
    AccessKind::Store,
    AccessKind::Modify,
    AccessKind::Fetch,
];

/// The predictor state of one class of references.
#[derive(Clone, Copy)]
struct Class {
    addr: u64,
    size: u8,
    instrs: u32,
}

impl Class {
    /// Advances to the next reference of the class: the address that code `a` and the
    /// (masked) `delta` give, predicted from the class's last address and size, then the size
    /// byte if the record has one; returns the new state.
    #[inline(always)]
    fn advance(&mut self, a: &AddrCode, delta: u64, sized: bool, size: u8) -> Class {
        self.addr = self
            .addr
            .wrapping_add(self.size as u64 & a.size)
            .wrapping_add(delta);
        if sized {
            self.size = size;
        }
        *self
    }

    /// The reference of a common record of this class with tag `tag`, address code `a`, the
    /// payload in `payload`'s bytes from 1 on (the fast loop's word, shifted past the tag and
    /// the bytes that precede the payload but one), the size byte `size` if `sized`, and
    /// dependence `dep`; the class advanced past it.
    #[inline(always)]
    fn reference(
        &mut self,
        tag: u8,
        a: &AddrCode,
        payload: u64,
        sized: bool,
        size: u8,
        dep: u8,
    ) -> Event {
        let delta = ((((payload << a.left) as i64) >> a.right) as u64) & a.delta;
        let c = self.advance(a, delta, sized, size);
        Event::Ref(MemRef {
            va: Gva::new(c.addr),
            kind: KINDS[(tag & 3) as usize],
            size: c.size,
            instrs: c.instrs,
            dep,
        })
    }
}

/// Initial state of both classes: data (index 0) and fetch (index 1), as a lackey trace starts.
const INITIAL: [Class; 2] = [
    Class {
        addr: 0,
        size: 8,
        instrs: 0,
    },
    Class {
        addr: 0,
        size: 4,
        instrs: 1,
    },
];

#[inline(always)]
fn class_of(kind: AccessKind) -> usize {
    kind.is_fetch() as usize
}

/// Encodes events into a chunk's raw bytes.
pub(crate) struct Encoder {
    classes: [Class; 2],
}

impl Encoder {
    /// An encoder at the start of a chunk.
    pub fn new() -> Encoder {
        Encoder { classes: INITIAL }
    }

    /// Starts a new chunk.
    pub fn reset(&mut self) {
        self.classes = INITIAL;
    }

    /// Writes the record of `e` at `buf[pos..]` and returns the position after it. `buf` must
    /// have at least [`MAX_RECORD`] bytes from `pos` (the writer's buffer is sized so; writing
    /// into a slice instead of pushing to a `Vec` keeps the per-reference path free of capacity
    /// checks).
    #[inline]
    pub fn encode(&mut self, e: &Event, buf: &mut [u8], pos: usize) -> usize {
        let rec: &mut [u8; MAX_RECORD] = (&mut buf[pos..pos + MAX_RECORD])
            .try_into()
            .expect("room for a record");
        let n = match *e {
            Event::Ref(r) => self.encode_ref(&r, rec),
            Event::Compute { instrs } => tagged(rec, T_COMPUTE, &[instrs]),
            Event::ProcessCreate { pid } => tagged(rec, T_PROC, &[pid as u64]),
            Event::Fork { parent, child } => tagged(rec, T_FORK, &[parent as u64, child as u64]),
            Event::Exec { pid } => tagged(rec, T_EXEC, &[pid as u64]),
            Event::Exit { pid } => tagged(rec, T_EXIT, &[pid as u64]),
            Event::Switch { pid } => tagged(rec, T_SWITCH, &[pid as u64]),
            Event::ThreadCreate { pid, tid } => {
                tagged(rec, T_THREAD_CREATE, &[pid as u64, tid as u64])
            }
            Event::ThreadExit { pid, tid } => tagged(rec, T_THREAD_EXIT, &[pid as u64, tid as u64]),
            Event::Thread { pid, tid } => tagged(rec, T_THREAD, &[pid as u64, tid as u64]),
            Event::Mmap(ref w) => {
                let Mmap {
                    start,
                    len,
                    prot,
                    flags,
                } = **w;
                let k = tagged(rec, T_MMAP, &[start.raw(), len]);
                rec[k] = prot.0;
                rec[k + 1] = flags.0;
                k + 2
            }
            Event::Munmap(ref w) => {
                let Munmap { start, len } = **w;
                tagged(rec, T_MUNMAP, &[start.raw(), len])
            }
            Event::Mprotect(ref w) => {
                let Mprotect { start, len, prot } = **w;
                let k = tagged(rec, T_MPROTECT, &[start.raw(), len]);
                rec[k] = prot.0;
                k + 1
            }
            Event::Mremap(ref w) => {
                let Mremap {
                    old,
                    old_len,
                    new,
                    new_len,
                } = **w;
                tagged(rec, T_MREMAP, &[old.raw(), old_len, new.raw(), new_len])
            }
            Event::Madvise(ref w) => {
                let Madvise { start, len, advice } = **w;
                let k = tagged(rec, T_MADVISE, &[start.raw(), len]);
                rec[k] = advice.0;
                k + 1
            }
            Event::Brk { end } => tagged(rec, T_BRK, &[end.raw()]),
            Event::Phase { id } => tagged(rec, T_PHASE, &[id as u64]),
        };
        pos + n
    }

    /// Writes a reference's record into `rec`; returns its length.
    #[inline(always)]
    fn encode_ref(&mut self, r: &MemRef, rec: &mut [u8; MAX_RECORD]) -> usize {
        let c = &mut self.classes[class_of(r.kind)];
        let va = r.va.raw();
        let next = c.addr.wrapping_add(c.size as u64);
        let delta = va.wrapping_sub(c.addr) as i64;
        let code = if va == next {
            A_NEXT
        } else if va == c.addr {
            A_SAME
        } else if delta == delta as i8 as i64 {
            2
        } else if delta == delta as i16 as i64 {
            3
        } else if delta == delta as i32 as i64 {
            4
        } else if delta == (delta << 16) >> 16 {
            5
        } else {
            A_ABS
        };
        let mut k = 1;
        let mut tag = if r.dep == 0 {
            r.kind as u8 | code << ADDR_SHIFT
        } else {
            rec[1] = code;
            rec[2] = r.dep;
            k = 3;
            r.kind as u8 | A_EXT << ADDR_SHIFT
        };
        if r.size != c.size {
            tag |= SIZE_FOLLOWS;
            rec[k] = r.size;
            k += 1;
            c.size = r.size;
        }
        if r.instrs != c.instrs {
            tag |= INSTRS_FOLLOWS;
            k += varint(&mut rec[k..], r.instrs as u64);
            c.instrs = r.instrs;
        }
        rec[0] = tag;
        let payload = if code == A_ABS { va } else { delta as u64 };
        rec[k..k + 8].copy_from_slice(&payload.to_le_bytes());
        c.addr = va;
        k + ADDR_BYTES[code as usize]
    }
}

/// Writes a tag and varint fields into `rec`; returns the length.
fn tagged(rec: &mut [u8], tag: u8, fields: &[u64]) -> usize {
    rec[0] = tag;
    let mut k = 1;
    for &f in fields {
        k += varint(&mut rec[k..], f);
    }
    k
}

/// LEB128 (7 bits per byte, low first, bit 7 set on every byte but the last) into `out`;
/// returns the length (at most 10).
#[inline]
fn varint(out: &mut [u8], mut v: u64) -> usize {
    let mut k = 0;
    while v >= 0x80 {
        out[k] = v as u8 | 0x80;
        v >>= 7;
        k += 1;
    }
    out[k] = v as u8;
    k + 1
}

/// Decodes a chunk's raw bytes into events.
pub(crate) struct Decoder {
    classes: [Class; 2],
    /// Extended references (address code 7) are valid: the file is version 2 or later.
    extended: bool,
}

/// Totals of decoded events, kept for the footer check.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    /// Memory references.
    pub refs: u64,
    /// Instructions of references and `Compute` events (wrapping).
    pub instructions: u64,
    /// Process and address-space events (everything but references, compute and phases).
    pub os_events: u64,
}

/// Where and why a chunk's records do not decode.
#[derive(Debug)]
pub(crate) struct DecodeError {
    /// Byte offset of the bad record within the chunk's raw data.
    pub at: usize,
    /// What is wrong.
    pub reason: String,
}

#[inline(always)]
fn word(raw: &[u8], p: usize) -> u64 {
    u64::from_le_bytes(raw[p..p + 8].try_into().expect("8 bytes"))
}

impl Decoder {
    /// A decoder at the start of a chunk of a file of format `version`.
    pub fn new(version: u16) -> Decoder {
        Decoder {
            classes: INITIAL,
            extended: version >= 2,
        }
    }

    /// Starts a new chunk.
    pub fn reset(&mut self) {
        self.classes = INITIAL;
    }

    /// Decodes `n` records of `raw[..len]` starting at `*pos` into `out`, advancing `*pos` and
    /// adding to `counts`. `raw` must extend at least [`PAD`] bytes past `len`. A record that
    /// does not decode, or that ends past `len`, is an error naming its offset.
    ///
    /// Runs of the common record — a reference with its class's count: a tag byte, perhaps a
    /// size byte, an address payload of up to 6 bytes — are decoded by [`fast_refs`]; any other
    /// record, or one that would end past `len`, by [`Decoder::slow`], which decodes it or
    /// names its offset. A record that fails is not handed out; the events before it are.
    #[inline]
    pub fn decode(
        &mut self,
        raw: &[u8],
        len: usize,
        pos: &mut usize,
        out: &mut Vec<Event>,
        n: usize,
        counts: &mut Counts,
    ) -> Result<(), DecodeError> {
        assert!(raw.len() >= len + PAD, "a chunk buffer lacks its padding");
        let raw = &raw[..len + PAD];
        // The events are written in place into room reserved first: no capacity check per
        // event, no filler written before them, and nothing of the loop's state escapes to a
        // call.
        let base = out.len();
        out.reserve(n);
        let dst = &mut out.spare_capacity_mut()[..n];
        let mut p = *pos;
        let [mut data, mut fetch] = self.classes;
        let mut t = Totals::default();
        let mut done = 0;
        let mut failed = None;
        while done < n {
            let run = fast_refs(raw, len, p, &mut dst[done..], [data, fetch], self.extended);
            p = run.p;
            done += run.done;
            [data, fetch] = run.classes;
            let fetches = run.fetches as u64;
            let datas = run.done as u64 - fetches;
            t.instructions = t
                .instructions
                .wrapping_add(fetches.wrapping_mul(fetch.instrs as u64))
                .wrapping_add(datas.wrapping_mul(data.instrs as u64));
            if done == n {
                break;
            }
            if p >= len {
                failed = Some(DecodeError {
                    at: p,
                    reason: "the chunk's records end before its event count".into(),
                });
                break;
            }
            match Self::slow(raw, p, [data, fetch], t, self.extended) {
                Ok((_, np, ..)) if np > len => {
                    failed = Some(DecodeError {
                        at: p,
                        reason: "a record runs past the end of the chunk".into(),
                    });
                    break;
                }
                Ok((e, np, [d, f], nt)) => {
                    dst[done].write(e);
                    (p, data, fetch, t) = (np, d, f, nt);
                    done += 1;
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // SAFETY: the slots `base..base + done` were each written above (`dst[i]` for every
        // `i < done`, in order) and lie within the capacity reserved; setting the length is what
        // makes them the vector's. Writing into spare capacity saves a filler pass over a
        // batch that is about to be overwritten (docs/performance.md, "The trace reader's
        // threads").
        unsafe { out.set_len(base + done) };
        if let Some(e) = failed {
            // The events decoded before the bad record stay, as the caller's stream has them.
            return Err(e);
        }
        self.classes = [data, fetch];
        *pos = p;
        counts.refs += n as u64 - t.others;
        counts.instructions = counts.instructions.wrapping_add(t.instructions);
        counts.os_events += t.os_events;
        Ok(())
    }

    /// Decodes the record at `p` that the fast loop leaves (a reference with a size or count
    /// that follows, an invalid address code, or another event); returns it with the position
    /// after it and the updated classes and totals (by value: no state of the fast loop has its
    /// address taken).
    #[inline(never)]
    fn slow(
        raw: &[u8],
        mut p: usize,
        mut classes: [Class; 2],
        mut t: Totals,
        extended: bool,
    ) -> Result<(Event, usize, [Class; 2], Totals), DecodeError> {
        let start = p;
        let tag = raw[start];
        p += 1;
        if tag >= 0x80 {
            let e = decode_other(tag, raw, &mut p, start)?;
            t.others += 1;
            match e {
                Event::Compute { instrs } => t.instructions = t.instructions.wrapping_add(instrs),
                Event::Phase { .. } => {}
                _ => t.os_events += 1,
            }
            return Ok((e, p, classes, t));
        }
        let kind = KINDS[(tag & 3) as usize];
        let c = &mut classes[class_of(kind)];
        let next = c.addr.wrapping_add(c.size as u64);
        let mut code = (tag >> ADDR_SHIFT) & 7;
        let mut dep = 0;
        if code == A_EXT {
            if !extended {
                return Err(invalid_code(tag, start));
            }
            let (ext, d) = (raw[p], raw[p + 1]);
            p += 2;
            if ext > A_ABS {
                return Err(DecodeError {
                    at: start,
                    reason: format!(
                        "extended reference: address code byte {ext:#04x} is not a code 0-6"
                    ),
                });
            }
            if d == 0 {
                return Err(DecodeError {
                    at: start,
                    reason: "extended reference with dependence 0 (only dependences 1-255 are \
                             written in the extended form)"
                        .into(),
                });
            }
            (code, dep) = (ext, d);
        }
        if tag & SIZE_FOLLOWS != 0 {
            c.size = raw[p];
            p += 1;
        }
        if tag & INSTRS_FOLLOWS != 0 {
            let v = read_varint(raw, &mut p, start)?;
            c.instrs = u32::try_from(v).map_err(|_| DecodeError {
                at: start,
                reason: format!("instruction count {v} does not fit in 32 bits"),
            })?;
        }
        let va = match code {
            A_NEXT => next,
            A_SAME => c.addr,
            2..=5 => {
                let w = ADDR_BYTES[code as usize];
                let shift = 64 - 8 * w as u32;
                let delta = ((word(raw, p) << shift) as i64) >> shift;
                p += w;
                c.addr.wrapping_add(delta as u64)
            }
            A_ABS => {
                let a = word(raw, p);
                p += 8;
                a
            }
            _ => return Err(invalid_code(tag, start)),
        };
        c.addr = va;
        t.instructions = t.instructions.wrapping_add(c.instrs as u64);
        let e = Event::Ref(MemRef {
            va: Gva::new(va),
            kind,
            size: c.size,
            instrs: c.instrs,
            dep,
        });
        Ok((e, p, classes, t))
    }
}

/// What a run of [`fast_refs`] decoded.
struct FastRun {
    /// Records decoded.
    done: usize,
    /// The position after them.
    p: usize,
    /// Both classes after them (data, fetch).
    classes: [Class; 2],
    /// Instruction fetches among them.
    fetches: usize,
}

/// Decodes common records from `p` into `dst` until a record that is not common, or that
/// would end past `len`, or the end of `dst`. A common record is a reference with its class's
/// count: a tag byte, perhaps a size byte, and an address payload of up to 6 bytes, so one
/// 8-byte load gives the whole record, and an extended one (its address code and dependence
/// after the tag) a second (`raw` extends at least [`PAD`] bytes past `len`, so no load fails,
/// whatever the bytes after `len` hold). Only the addresses and sizes change
/// from record to record (the counts do not), so the loop's state is a few registers. The
/// record's length is computed from its tag in registers, and only when the tag's shape
/// differs from the previous record's (below).
#[inline(never)]
fn fast_refs(
    raw: &[u8],
    len: usize,
    mut p: usize,
    dst: &mut [MaybeUninit<Event>],
    classes: [Class; 2],
    extended: bool,
) -> FastRun {
    let [mut data, mut fetch] = classes;
    let mut fetches = 0;
    let mut done = 0;
    // The previous record's tag without its kind bits (its shape: flags and address code),
    // and what follows from it. A record of the same shape has the same length, and the branch
    // that says so is predicted: the next record's position does not wait for this record's
    // load, only for the branch to be confirmed. A stride stream is all one shape; a recorded
    // program changes shape often and decodes as fast as with the length computed every time.
    let mut shape = 0xFFu8;
    let mut step = 0usize;
    let mut code = 0usize;
    let mut sized = false;
    while done < dst.len() {
        let w = word(raw, p);
        let tag = w as u8;
        if tag & !3 != shape {
            if tag >= FIRST_SLOW_TAG || tag & INSTRS_FOLLOWS != 0 {
                // An extended reference — its address code and its dependence in the two
                // bytes after the tag, then the size byte if there is one — with its class's
                // count and a payload of up to 6 bytes is common too (a recorded program's
                // dependent loads, about one record in ten): `extended_ref` decodes it, out of
                // line so that the loop's own state stays in registers. Anything else about it
                // (an 8-byte payload, a bad code or dependence, a version 1 file) is the slow
                // path's to decode or name.
                if !extended || tag & (0xF0 | INSTRS_FOLLOWS) != A_EXT << ADDR_SHIFT {
                    break;
                }
                let is_fetch = tag & 3 == 3;
                let class = if is_fetch { fetch } else { data };
                let Some((e, next, c)) = extended_ref(raw, len, p, w, class) else {
                    break;
                };
                if is_fetch {
                    fetch = c;
                    fetches += 1;
                } else {
                    data = c;
                }
                dst[done].write(e);
                p = next;
                done += 1;
                continue;
            }
            shape = tag & !3;
            code = (tag >> ADDR_SHIFT) as usize;
            sized = tag & SIZE_FOLLOWS != 0;
            step = ((REF_LENS >> (4 * code)) & 0xF) as usize + sized as usize;
        }
        let next = p + step;
        if next > len {
            break;
        }
        p = next;
        let a = &ADDR_CODES[code];
        // The payload after the tag, and after the size byte if there is one.
        let payload = w >> (8 * sized as u32);
        let size = (w >> 8) as u8;
        // One branch per class keeps each class's state in registers.
        let e = if tag & 3 == 3 {
            fetches += 1;
            fetch.reference(tag, a, payload, sized, size, 0)
        } else {
            data.reference(tag, a, payload, sized, size, 0)
        };
        dst[done].write(e);
        done += 1;
    }
    FastRun {
        done,
        p,
        classes: [data, fetch],
        fetches,
    }
}

/// The extended reference at `p` (tag, address code, dependence, then the size byte if the tag
/// says so and the payload; its count is its class's), `w` the word that starts at its tag,
/// when its address code has a payload of up to 6 bytes and the record ends by `len`: the
/// event, the position after it and its class advanced past it. `None` leaves it to
/// [`Decoder::slow`], which decodes or names whatever else it is.
#[inline(never)]
fn extended_ref(
    raw: &[u8],
    len: usize,
    p: usize,
    w: u64,
    mut class: Class,
) -> Option<(Event, usize, Class)> {
    let tag = w as u8;
    let (code, dep) = ((w >> 8) as u8 as usize, (w >> 16) as u8);
    if code >= ADDR_CODES.len() || dep == 0 {
        return None;
    }
    let sized = tag & SIZE_FOLLOWS != 0;
    let head = 3 + sized as usize;
    let next = p + head + ADDR_BYTES[code];
    if next > len {
        return None;
    }
    // The word whose byte 0 is the one before the payload, as `w` is for a plain record.
    let payload = word(raw, p + head - 1);
    let e = class.reference(tag, &ADDR_CODES[code], payload, sized, (w >> 24) as u8, dep);
    Some((e, next, class))
}

/// Running totals of one [`Decoder::decode`] call.
#[derive(Clone, Copy, Default)]
struct Totals {
    /// Events that are not references.
    others: u64,
    /// Instructions of references and `Compute` events (wrapping).
    instructions: u64,
    /// Process and address-space events.
    os_events: u64,
}

fn invalid_code(tag: u8, start: usize) -> DecodeError {
    DecodeError {
        at: start,
        reason: format!(
            "reference tag {tag:#04x} has address code 7, which a version 1 file does not use"
        ),
    }
}

#[inline]
fn read_varint(raw: &[u8], p: &mut usize, start: usize) -> Result<u64, DecodeError> {
    let mut v = 0u64;
    for i in 0..10 {
        let b = raw[*p];
        *p += 1;
        v |= ((b & 0x7F) as u64) << (7 * i);
        if b < 0x80 {
            if i == 9 && b > 1 {
                break;
            }
            return Ok(v);
        }
    }
    Err(DecodeError {
        at: start,
        reason: "a varint runs past 64 bits".into(),
    })
}

fn read_u32(raw: &[u8], p: &mut usize, start: usize, what: &str) -> Result<u32, DecodeError> {
    let v = read_varint(raw, p, start)?;
    u32::try_from(v).map_err(|_| DecodeError {
        at: start,
        reason: format!("{what} {v} does not fit in 32 bits"),
    })
}

fn decode_other(tag: u8, raw: &[u8], p: &mut usize, start: usize) -> Result<Event, DecodeError> {
    let mut v = || read_varint(raw, p, start);
    Ok(match tag {
        T_COMPUTE => Event::Compute { instrs: v()? },
        T_MMAP => {
            let (start_va, len) = (v()?, v()?);
            let (prot, flags) = (raw[*p], raw[*p + 1]);
            *p += 2;
            Event::mmap(Gva::new(start_va), len, Prot(prot), MapFlags(flags))
        }
        T_MUNMAP => Event::munmap(Gva::new(v()?), v()?),
        T_MPROTECT => {
            let (start_va, len) = (v()?, v()?);
            let prot = raw[*p];
            *p += 1;
            Event::mprotect(Gva::new(start_va), len, Prot(prot))
        }
        T_MREMAP => Event::mremap(Gva::new(v()?), v()?, Gva::new(v()?), v()?),
        T_MADVISE => {
            let (start_va, len) = (v()?, v()?);
            let advice = raw[*p];
            *p += 1;
            Event::madvise(Gva::new(start_va), len, Advice(advice))
        }
        T_BRK => Event::Brk {
            end: Gva::new(v()?),
        },
        T_PROC => Event::ProcessCreate {
            pid: read_u32(raw, p, start, "pid")?,
        },
        T_FORK => Event::Fork {
            parent: read_u32(raw, p, start, "pid")?,
            child: read_u32(raw, p, start, "pid")?,
        },
        T_EXEC => Event::Exec {
            pid: read_u32(raw, p, start, "pid")?,
        },
        T_EXIT => Event::Exit {
            pid: read_u32(raw, p, start, "pid")?,
        },
        T_SWITCH => Event::Switch {
            pid: read_u32(raw, p, start, "pid")?,
        },
        T_PHASE => Event::Phase {
            id: read_u32(raw, p, start, "phase id")?,
        },
        T_THREAD_CREATE => Event::ThreadCreate {
            pid: read_u32(raw, p, start, "pid")?,
            tid: read_u32(raw, p, start, "tid")?,
        },
        T_THREAD_EXIT => Event::ThreadExit {
            pid: read_u32(raw, p, start, "pid")?,
            tid: read_u32(raw, p, start, "tid")?,
        },
        T_THREAD => Event::Thread {
            pid: read_u32(raw, p, start, "pid")?,
            tid: read_u32(raw, p, start, "tid")?,
        },
        _ => {
            return Err(DecodeError {
                at: start,
                reason: format!("unknown record tag {tag:#04x}"),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::format::VERSION;
    use super::*;

    fn round_trip(events: &[Event]) -> (Vec<u8>, Vec<Event>) {
        let mut raw = vec![0u8; events.len() * MAX_RECORD + MAX_RECORD];
        let mut enc = Encoder::new();
        let mut len = 0;
        for e in events {
            len = enc.encode(e, &mut raw, len);
        }
        raw.truncate(len);
        let mut padded = raw.clone();
        padded.resize(len + PAD, 0);
        let mut out = Vec::new();
        let mut pos = 0;
        Decoder::new(VERSION)
            .decode(
                &padded,
                len,
                &mut pos,
                &mut out,
                events.len(),
                &mut Counts::default(),
            )
            .unwrap();
        assert_eq!(pos, len);
        (raw, out)
    }

    fn load(va: u64, size: u8) -> Event {
        Event::Ref(MemRef {
            va: Gva::new(va),
            kind: AccessKind::Load,
            size,
            instrs: 0,
            dep: 0,
        })
    }

    #[test]
    fn sequential_references_take_one_byte() {
        let events: Vec<Event> = (0..100).map(|i| load(0x1000 + 8 * i, 8)).collect();
        let (raw, out) = round_trip(&events);
        assert_eq!(out, events);
        // The first needs a 2-byte delta from 0; the rest are predicted.
        assert_eq!(raw.len(), 3 + 99);
    }

    #[test]
    fn deltas_use_the_narrowest_width() {
        let events = [
            load(0x100, 8),                 // i16 from 0
            load(0x100 - 100, 8),           // i8
            load(0x10_0000, 8),             // i32
            load(0x7fff_0000_0000, 8),      // i48
            load(0xffff_ffff_ffff_fff8, 8), // i48: the wrapping delta is -0x7fff_0000_0008
            load(0x8000_0000_0000_0000, 8), // absolute
            load(0, 1),                     // size changes
        ];
        let (_, out) = round_trip(&events);
        assert_eq!(out, events);
    }

    /// Decodes `n` records of `bytes` (padded as a reader pads them).
    fn decode_bytes(bytes: &[u8], n: usize) -> (Vec<Event>, Result<usize, DecodeError>) {
        let mut raw = bytes.to_vec();
        raw.resize(bytes.len() + PAD, 0);
        let (mut out, mut pos) = (Vec::new(), 0);
        let res = Decoder::new(VERSION)
            .decode(
                &raw,
                bytes.len(),
                &mut pos,
                &mut out,
                n,
                &mut Counts::default(),
            )
            .map(|_| pos);
        (out, res)
    }

    /// Decoding `n` records of `bytes` fails at offset `at`, a record running past the chunk's
    /// end, after handing out `before` (the cut record itself is not handed out).
    fn assert_cut(bytes: &[u8], n: usize, at: usize, before: &[Event]) {
        let (out, res) = decode_bytes(bytes, n);
        let e = res.unwrap_err();
        assert_eq!(
            (e.at, e.reason.as_str()),
            (at, "a record runs past the end of the chunk")
        );
        assert_eq!(out, before);
    }

    #[test]
    fn a_record_cut_by_the_chunk_end_is_named_after_the_events_before_it() {
        // Two predicted loads (one byte each), then a load with a 4-byte delta whose payload
        // the chunk cuts after one byte.
        let bytes = [0x00, 0x00, 4 << 4, 0x10];
        assert_cut(&bytes, 3, 2, &[load(8, 8), load(16, 8)]);
        // The same cut as the last record asked for.
        let e = decode_bytes(&bytes[2..], 1).1.unwrap_err();
        assert_eq!(e.at, 0);
    }

    #[test]
    fn a_cut_record_of_the_same_shape_as_the_one_before_is_named() {
        // Two loads with a 1-byte delta (the second of the same shape, so its length is not
        // recomputed); the chunk cuts the second after its tag.
        assert_cut(&[2 << 4, 0x05, 2 << 4], 2, 2, &[load(5, 8)]);
    }

    #[test]
    fn records_that_end_before_the_event_count_name_the_end() {
        // A load with a size byte (the slow path: predicted from the old size), then a predicted
        // load; three asked for.
        let bytes = [SIZE_FOLLOWS, 4, 0x00];
        let (out, res) = decode_bytes(&bytes, 3);
        let e = res.unwrap_err();
        assert_eq!(e.at, 3);
        assert!(
            e.reason.contains("end before its event count"),
            "{}",
            e.reason
        );
        assert_eq!(out, [load(8, 4), load(12, 4)]);
    }

    fn dependent(va: u64, kind: AccessKind, size: u8, instrs: u32, dep: u8) -> Event {
        Event::Ref(MemRef {
            va: Gva::new(va),
            kind,
            size,
            instrs,
            dep,
        })
    }

    #[test]
    fn dependences_round_trip_in_every_address_code_and_cost_two_bytes() {
        let events = [
            load(0x1000, 8),
            dependent(0x1008, AccessKind::Load, 8, 0, 1), // next: code 0
            dependent(0x1008, AccessKind::Modify, 8, 0, 255), // same: code 1
            dependent(0x1010, AccessKind::Store, 4, 7, 3), // size and count follow
            dependent(0x9_0000, AccessKind::Load, 4, 7, 2), // i32 delta
            dependent(0x8000_0000_0000_0000, AccessKind::Load, 4, 7, 9), // absolute
            load(0x8000_0000_0000_0004, 4),               // plain again, predicted
        ];
        let (raw, out) = round_trip(&events);
        assert_eq!(out, events);
        // The same stream without dependences is two bytes shorter per dependent reference.
        let plain: Vec<Event> = events
            .iter()
            .map(|e| match e {
                &Event::Ref(r) => Event::Ref(MemRef { dep: 0, ..r }),
                e => e.clone(),
            })
            .collect();
        let (raw_plain, _) = round_trip(&plain);
        assert_eq!(raw.len(), raw_plain.len() + 2 * 5);
    }

    #[test]
    fn extended_references_with_short_payloads_decode_in_the_fast_loop() {
        // Dependent references in every address code the fast loop takes (0 to 5), with and
        // without a size byte, of both classes, between plain ones; no count changes after the
        // first of each class.
        let events = [
            dependent(0x1000, AccessKind::Load, 8, 0, 4),
            dependent(0x1008, AccessKind::Load, 8, 0, 1), // next: code 0
            dependent(0x1008, AccessKind::Store, 8, 0, 2), // same: code 1
            load(0x1010, 8),
            dependent(0x1030, AccessKind::Load, 8, 0, 7), // i8: code 2
            dependent(0x2000, AccessKind::Modify, 4, 0, 255), // i16 and a size byte: code 3
            dependent(0x9_0000, AccessKind::Load, 4, 0, 3), // i32: code 4
            dependent(0x7fff_0000_0000, AccessKind::Load, 2, 0, 9), // i48, sized: code 5
            dependent(0x40_0000, AccessKind::Fetch, 4, 1, 5), // the fetch class
            dependent(0x40_0004, AccessKind::Fetch, 4, 1, 6),
            load(0x7fff_0000_0002, 2),
        ];
        let (raw, out) = round_trip(&events);
        assert_eq!(out, events);
        // One run of the fast loop takes them all (no count follows: the classes' counts are
        // those a stream starts with).
        let mut padded = raw.clone();
        padded.resize(raw.len() + PAD, 0);
        let mut dst: Vec<MaybeUninit<Event>> =
            (0..events.len()).map(|_| MaybeUninit::uninit()).collect();
        let run = fast_refs(&padded, raw.len(), 0, &mut dst, INITIAL, true);
        assert_eq!((run.done, run.p, run.fetches), (events.len(), raw.len(), 2));
        // SAFETY: the run wrote every slot (`done` is their number).
        let fast: Vec<Event> = dst
            .into_iter()
            .map(|e| unsafe { e.assume_init() })
            .collect();
        assert_eq!(fast, events);
        // A version 1 file's decoder leaves them to the slow path, which refuses them.
        let mut dst: Vec<MaybeUninit<Event>> = (0..1).map(|_| MaybeUninit::uninit()).collect();
        assert_eq!(
            fast_refs(&padded, raw.len(), 0, &mut dst, INITIAL, false).done,
            0
        );
        // Cut by the chunk's end after its tag and two bytes, an extended record is named.
        assert_cut(
            &[0x00, A_EXT << ADDR_SHIFT, 4, 1, 0x10],
            2,
            1,
            &[load(8, 8)],
        );
    }

    #[test]
    fn madvise_round_trips() {
        let events = [
            Event::madvise(
                Gva::new(0x7f00_0020_0000),
                0x40_0000,
                Advice(Advice::HUGEPAGE),
            ),
            Event::madvise(Gva::new(0), 4096, Advice(200)),
        ];
        assert_eq!(round_trip(&events).1, events);
    }

    #[test]
    fn an_extended_reference_is_refused_in_a_version_1_file() {
        let e = dependent(0x1000, AccessKind::Load, 8, 0, 1);
        let mut raw = vec![0u8; MAX_RECORD + PAD];
        let len = Encoder::new().encode(&e, &mut raw, 0);
        let mut pos = 0;
        let err = Decoder::new(1)
            .decode(
                &raw,
                len,
                &mut pos,
                &mut Vec::new(),
                1,
                &mut Counts::default(),
            )
            .unwrap_err();
        assert_eq!(err.at, 0);
        assert!(err.reason.contains("version 1"), "{}", err.reason);
        // Version 2 reads it.
        let mut out = Vec::new();
        Decoder::new(2)
            .decode(&raw, len, &mut pos, &mut out, 1, &mut Counts::default())
            .unwrap();
        assert_eq!(out, [e]);
    }

    #[test]
    fn a_malformed_extended_reference_names_what_is_wrong() {
        // Tag: load, address code 7; ext byte 7 (not a code 0-6).
        let (_, res) = decode_bytes(&[A_EXT << ADDR_SHIFT, 7, 1], 1);
        assert!(res.unwrap_err().reason.contains("not a code 0-6"));
        // A dependence of 0 is never written in the extended form.
        let (_, res) = decode_bytes(&[A_EXT << ADDR_SHIFT, A_NEXT, 0], 1);
        assert!(res.unwrap_err().reason.contains("dependence 0"));
    }

    #[test]
    fn an_unknown_tag_names_its_offset() {
        let mut raw = vec![0x10u8, 0x9F];
        raw.resize(2 + PAD, 0);
        let mut pos = 0;
        let err = Decoder::new(VERSION)
            .decode(
                &raw,
                2,
                &mut pos,
                &mut Vec::new(),
                2,
                &mut Counts::default(),
            )
            .unwrap_err();
        assert_eq!(err.at, 1);
        assert!(err.reason.contains("0x9f"), "{}", err.reason);
    }
}
