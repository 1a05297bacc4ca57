//! XXH64, the checksum of `.vtrace` chunks, headers and footers.
//!
//! The 64-bit xxHash of Yann Collet (the hash zstd itself uses for frame checksums), written out
//! from its specification (`xxhash_spec.md`, "XXH64 algorithm") with seed 0. It runs at several
//! GB/s, so checking every chunk costs a small fraction of decoding it.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

#[inline(always)]
fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

#[inline(always)]
fn merge(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

#[inline(always)]
fn read_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// XXH64 of `data` with seed 0.
pub fn xxh64(data: &[u8]) -> u64 {
    let len = data.len() as u64;
    let mut rest = data;
    let mut h = if data.len() >= 32 {
        let mut v = [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)];
        let mut stripes = rest.chunks_exact(32);
        for s in &mut stripes {
            v[0] = round(v[0], read_u64(&s[0..]));
            v[1] = round(v[1], read_u64(&s[8..]));
            v[2] = round(v[2], read_u64(&s[16..]));
            v[3] = round(v[3], read_u64(&s[24..]));
        }
        rest = stripes.remainder();
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge(h, lane);
        }
        h
    } else {
        P5
    };
    h = h.wrapping_add(len);
    while rest.len() >= 8 {
        h ^= round(0, read_u64(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        let k = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as u64;
        h ^= k.wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &b in rest {
        h ^= (b as u64).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    h
}

/// The low 32 bits of XXH64, for headers and footers.
pub fn xxh32_of64(data: &[u8]) -> u32 {
    xxh64(data) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_vectors() {
        assert_eq!(xxh64(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"abc"), 0x44BC_2CF5_AD77_0999);
    }

    /// zstd's frame checksum is the low 32 bits of XXH64 of the content: an independent
    /// implementation to check every length class (stripes, 8-, 4- and 1-byte tails) against.
    #[test]
    fn agrees_with_zstd_frame_checksums() {
        for len in [
            0usize, 1, 3, 4, 7, 8, 15, 31, 32, 33, 63, 64, 100, 1000, 4099,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
            let mut c = zstd::bulk::Compressor::new(1).unwrap();
            c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
                .unwrap();
            let frame = c.compress(&data).unwrap();
            let tail: [u8; 4] = frame[frame.len() - 4..].try_into().unwrap();
            assert_eq!(u32::from_le_bytes(tail), xxh64(&data) as u32, "len {len}");
        }
    }
}
