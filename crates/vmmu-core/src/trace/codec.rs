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
//!                                4 i32 delta, 5 i48 delta, 6 absolute u64, 7 invalid
//! other events (0x80..): tag then LEB128 varints (prot and flags one byte each)
//! ```
//!
//! The predictor state is reset at the start of every chunk, so each chunk decodes on its own.

use crate::addr::Gva;
use crate::event::{AccessKind, Event, MapFlags, MemRef, Prot};

/// Bytes a reader must keep readable past a chunk's raw data (the decoder reads whole 8-byte
/// words and checks bounds once per record, not once per byte).
pub(crate) const PAD: usize = 64;

const SIZE_FOLLOWS: u8 = 1 << 2;
const INSTRS_FOLLOWS: u8 = 1 << 3;
const ADDR_SHIFT: u8 = 4;

const A_NEXT: u8 = 0;
const A_SAME: u8 = 1;
const A_ABS: u8 = 6;
/// Delta widths in bytes of address codes 2..=5.
const DELTA_BYTES: [usize; 8] = [0, 0, 1, 2, 4, 6, 0, 0];

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

    /// Appends the record of `e` to `out`.
    #[inline]
    pub fn encode(&mut self, e: &Event, out: &mut Vec<u8>) {
        match *e {
            Event::Ref(r) => self.encode_ref(&r, out),
            Event::Compute { instrs } => tagged(out, T_COMPUTE, &[instrs]),
            Event::ProcessCreate { pid } => tagged(out, T_PROC, &[pid as u64]),
            Event::Fork { parent, child } => tagged(out, T_FORK, &[parent as u64, child as u64]),
            Event::Exec { pid } => tagged(out, T_EXEC, &[pid as u64]),
            Event::Exit { pid } => tagged(out, T_EXIT, &[pid as u64]),
            Event::Switch { pid } => tagged(out, T_SWITCH, &[pid as u64]),
            Event::Mmap {
                start,
                len,
                prot,
                flags,
            } => {
                tagged(out, T_MMAP, &[start.0, len]);
                out.extend_from_slice(&[prot.0, flags.0]);
            }
            Event::Munmap { start, len } => tagged(out, T_MUNMAP, &[start.0, len]),
            Event::Mprotect { start, len, prot } => {
                tagged(out, T_MPROTECT, &[start.0, len]);
                out.push(prot.0);
            }
            Event::Mremap {
                old,
                old_len,
                new,
                new_len,
            } => tagged(out, T_MREMAP, &[old.0, old_len, new.0, new_len]),
            Event::Brk { end } => tagged(out, T_BRK, &[end.0]),
            Event::Phase { id } => tagged(out, T_PHASE, &[id as u64]),
        }
    }

    #[inline(always)]
    fn encode_ref(&mut self, r: &MemRef, out: &mut Vec<u8>) {
        let c = &mut self.classes[class_of(r.kind)];
        let va = r.va.0;
        let mut tag = r.kind as u8;
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
        tag |= code << ADDR_SHIFT;
        if r.size != c.size {
            tag |= SIZE_FOLLOWS;
        }
        if r.instrs != c.instrs {
            tag |= INSTRS_FOLLOWS;
        }
        out.push(tag);
        if r.size != c.size {
            out.push(r.size);
            c.size = r.size;
        }
        if r.instrs != c.instrs {
            varint(out, r.instrs as u64);
            c.instrs = r.instrs;
        }
        match code {
            A_ABS => out.extend_from_slice(&va.to_le_bytes()),
            A_NEXT | A_SAME => {}
            _ => out.extend_from_slice(&delta.to_le_bytes()[..DELTA_BYTES[code as usize]]),
        }
        c.addr = va;
    }
}

fn tagged(out: &mut Vec<u8>, tag: u8, fields: &[u64]) {
    out.push(tag);
    for &f in fields {
        varint(out, f);
    }
}

/// LEB128: 7 bits per byte, low first, bit 7 set on every byte but the last.
#[inline]
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a chunk's raw bytes into events.
pub(crate) struct Decoder {
    classes: [Class; 2],
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
    /// A decoder at the start of a chunk.
    pub fn new() -> Decoder {
        Decoder { classes: INITIAL }
    }

    /// Starts a new chunk.
    pub fn reset(&mut self) {
        self.classes = INITIAL;
    }

    /// Decodes `n` records of `raw[..len]` starting at `*pos` into `out`, advancing `*pos`.
    /// `raw` must extend at least [`PAD`] bytes past `len`. A record that does not decode, or
    /// that ends past `len`, is an error naming its offset.
    #[inline]
    pub fn decode(
        &mut self,
        raw: &[u8],
        len: usize,
        pos: &mut usize,
        out: &mut Vec<Event>,
        n: usize,
    ) -> Result<(), DecodeError> {
        debug_assert!(raw.len() >= len + PAD);
        out.reserve(n);
        let mut p = *pos;
        let mut classes = self.classes;
        for _ in 0..n {
            if p >= len {
                return Err(DecodeError {
                    at: p,
                    reason: "the chunk's records end before its event count".into(),
                });
            }
            let start = p;
            let tag = raw[p];
            p += 1;
            if tag < 0x80 {
                let kind = KINDS[(tag & 3) as usize];
                let c = &mut classes[class_of(kind)];
                let next = c.addr.wrapping_add(c.size as u64);
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
                let code = (tag >> ADDR_SHIFT) & 7;
                let va = match code {
                    A_NEXT => next,
                    A_SAME => c.addr,
                    2..=5 => {
                        let w = DELTA_BYTES[code as usize];
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
                    _ => {
                        return Err(DecodeError {
                            at: start,
                            reason: format!(
                                "reference tag {tag:#04x} has the invalid address code 7"
                            ),
                        })
                    }
                };
                c.addr = va;
                out.push(Event::Ref(MemRef {
                    va: Gva(va),
                    kind,
                    size: c.size,
                    instrs: c.instrs,
                }));
            } else {
                let e = decode_other(tag, raw, &mut p, start)?;
                out.push(e);
            }
            if p > len {
                return Err(DecodeError {
                    at: start,
                    reason: "a record runs past the end of the chunk".into(),
                });
            }
        }
        self.classes = classes;
        *pos = p;
        Ok(())
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
            Event::Mmap {
                start: Gva(start_va),
                len,
                prot: Prot(prot),
                flags: MapFlags(flags),
            }
        }
        T_MUNMAP => Event::Munmap {
            start: Gva(v()?),
            len: v()?,
        },
        T_MPROTECT => {
            let (start_va, len) = (v()?, v()?);
            let prot = raw[*p];
            *p += 1;
            Event::Mprotect {
                start: Gva(start_va),
                len,
                prot: Prot(prot),
            }
        }
        T_MREMAP => Event::Mremap {
            old: Gva(v()?),
            old_len: v()?,
            new: Gva(v()?),
            new_len: v()?,
        },
        T_BRK => Event::Brk { end: Gva(v()?) },
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
    use super::*;

    fn round_trip(events: &[Event]) -> (Vec<u8>, Vec<Event>) {
        let mut raw = Vec::new();
        let mut enc = Encoder::new();
        for e in events {
            enc.encode(e, &mut raw);
        }
        let len = raw.len();
        let mut padded = raw.clone();
        padded.resize(len + PAD, 0);
        let mut out = Vec::new();
        let mut pos = 0;
        Decoder::new()
            .decode(&padded, len, &mut pos, &mut out, events.len())
            .unwrap();
        assert_eq!(pos, len);
        (raw, out)
    }

    fn load(va: u64, size: u8) -> Event {
        Event::Ref(MemRef {
            va: Gva(va),
            kind: AccessKind::Load,
            size,
            instrs: 0,
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

    #[test]
    fn an_unknown_tag_names_its_offset() {
        let mut raw = vec![0x10u8, 0x9F];
        raw.resize(2 + PAD, 0);
        let mut pos = 0;
        let err = Decoder::new()
            .decode(&raw, 2, &mut pos, &mut Vec::new(), 2)
            .unwrap_err();
        assert_eq!(err.at, 1);
        assert!(err.reason.contains("0x9f"), "{}", err.reason);
    }
}
