//! The mutations: a seedable generator, edge values for integers and doubles, and byte, field
//! and payload mutations.

use super::*;

/// SplitMix64: a small, seedable generator (the fuzzer must replay exactly from its seed).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub(crate) fn chance(&mut self, one_in: u64) -> bool {
        self.next().is_multiple_of(one_in)
    }
}

/// Integers that sit on the edges of what the formats and the commands allow.
pub(crate) fn interesting_u64(rng: &mut Rng, was: u64) -> u64 {
    const EDGES: [u64; 26] = [
        0,
        1,
        2,
        3,
        7,
        8,
        255,
        256,
        1023,
        1024,
        32767,
        32768,
        32769,
        65535,
        65536,
        65537,
        1 << 30,
        (1 << 30) + 1,
        1 << 31,
        u32::MAX as u64,
        1 << 32,
        1 << 40,
        1 << 48,
        1 << 62,
        i64::MAX as u64,
        u64::MAX,
    ];
    match rng.below(6) {
        0 => was.wrapping_add(1),
        1 => was.wrapping_sub(1),
        2 => was.wrapping_mul(2 + rng.below(1000) as u64),
        3 => was ^ (1 << rng.below(64)),
        _ => EDGES[rng.below(EDGES.len())],
    }
}

pub(crate) fn interesting_f64(rng: &mut Rng, was: f64) -> f64 {
    const EDGES: [f64; 12] = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        1e-300,
        1e300,
        f64::MIN_POSITIVE,
        5e-324,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    match rng.below(3) {
        0 => was * 2.0,
        1 => was / 1e6,
        _ => EDGES[rng.below(EDGES.len())],
    }
}

/// Writes an interesting integer of 1, 2, 4 or 8 bytes into `bytes` at a random offset
/// (aligned to its width half the time: header fields usually are), or flips, cuts or extends.
pub(crate) fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    match rng.below(6) {
        0..=2 if !bytes.is_empty() => {
            let width = [1usize, 2, 4, 8][rng.below(4)];
            if bytes.len() < width {
                return;
            }
            let mut at = rng.below(bytes.len() - width + 1);
            if rng.chance(2) {
                at -= at % width;
            }
            let mut was = [0u8; 8];
            was[..width].copy_from_slice(&bytes[at..at + width]);
            let v = interesting_u64(rng, u64::from_le_bytes(was)).to_le_bytes();
            bytes[at..at + width].copy_from_slice(&v[..width]);
        }
        3 if !bytes.is_empty() => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                bytes[at] ^= 1 << rng.below(8);
            }
        }
        4 => {
            let keep = rng.below(bytes.len() + 1);
            bytes.truncate(keep);
        }
        _ => {
            for _ in 0..1 + rng.below(16) {
                bytes.push(rng.next() as u8);
            }
        }
    }
}

/// One to three mutations of a payload's fields (values, types, order, count), its type id,
/// or its raw bytes; the CRC64 is re-sealed so the payload reaches the module.
pub(crate) fn mutate_payload(rng: &mut Rng, payload: &[u8]) -> Vec<u8> {
    let (mut id, mut fields) = split_payload(payload);
    let mut raw_flips = false;
    for _ in 0..1 + rng.below(3) {
        let i = rng.below(fields.len());
        match rng.below(12) {
            0..=4 => match &mut fields[i] {
                Field::U(v) => *v = interesting_u64(rng, *v),
                Field::D(v) => *v = interesting_f64(rng, *v),
                Field::S(s) => mutate_bytes(rng, s),
            },
            5 => {
                fields.remove(i);
            }
            6 => {
                let f = fields[i].clone();
                fields.insert(i, f);
            }
            7 => {
                let j = rng.below(fields.len());
                fields.swap(i, j);
            }
            8 => {
                fields[i] = match &fields[i] {
                    Field::U(v) => Field::D(*v as f64),
                    Field::D(v) => Field::S(v.to_le_bytes().to_vec()),
                    Field::S(s) => Field::U(s.len() as u64),
                }
            }
            9 => fields.truncate(i),
            10 => id = (id & !1023) | [0, 1, 2, 3, 5, 1023][rng.below(6)],
            _ => raw_flips = true,
        }
        if fields.is_empty() {
            fields.push(Field::U(0));
        }
    }
    let mut body = module_body(id, &fields);
    if raw_flips {
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(body.len());
            body[at] ^= 1 << rng.below(8);
        }
    }
    seal(&body)
}
