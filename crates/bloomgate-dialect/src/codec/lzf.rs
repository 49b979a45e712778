//! LZF, the compression Redis applies to strings longer than 20 bytes in RDB files and `DUMP`
//! payloads (so RedisBloom's sparse bit arrays and cuckoo buckets arrive compressed).
//!
//! Decompression follows the format (literal runs `000LLLLL` + L+1 bytes; back references
//! `LLLooooo oooooooo` or `111ooooo LLLLLLLL oooooooo` copying L+2 bytes from offset+1 back),
//! with every read and write bounds-checked. Compression reproduces the byte stream of liblzf
//! 3.6 as Redis builds it (16-bit hash table, "very fast" mode, table starting empty), so a
//! `DUMP` from bloomgate equals Redis' byte for byte.
//! The crates.io `lzf` crate is deprecated, hence this small implementation.

/// The most output bytes one input byte can produce (a 3-byte back reference copies 264).
pub const MAX_EXPANSION: u64 = 88;

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// Decompresses `input` into exactly `out_len` bytes; `None` if the stream is malformed or
/// does not produce exactly `out_len` bytes.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 1 << 5 {
            let run = ctrl + 1;
            let literal = input.get(ip..ip + run)?;
            if out.len() + run > out_len {
                return None;
            }
            out.extend_from_slice(literal);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip)?);
                ip += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(ip)?) + 1;
            ip += 1;
            let len = len + 2;
            if out.len() + len > out_len {
                return None;
            }
            let from = out.len().checked_sub(back)?;
            // Byte by byte: the source may overlap what is being written (runs).
            for i in 0..len {
                let b = out[from + i];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

fn hash_index(h: u32) -> usize {
    ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// Copies one literal byte to `out[op]`, then, when the run reaches [`MAX_LIT`], writes its
/// length byte before it and starts the next run; `None` if `out` has no room.
#[inline(always)]
fn push_literal(out: &mut [u8], op: &mut usize, lit: &mut usize, byte: u8) -> Option<()> {
    *lit += 1;
    *out.get_mut(*op)? = byte;
    *op += 1;
    if *lit == MAX_LIT {
        out[*op - *lit - 1] = (*lit - 1) as u8;
        *lit = 0;
        *op += 1;
    }
    Some(())
}

/// Compresses `input` into at most `max_out` bytes as liblzf does; `None` if it does not fit
/// (Redis then stores the string raw).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let in_len = input.len();
    if in_len < 2 || max_out == 0 {
        return None;
    }
    // Positions (0 = none: liblzf never matches at the input's first byte).
    let mut table = vec![0u32; HSIZE];
    let mut out = vec![0u8; max_out];
    let mut op = 1;
    let mut lit = 0usize;
    let mut ip = 0usize;
    let mut hval = (u32::from(input[0]) << 8) | u32::from(input[1]);
    while ip + 2 < in_len {
        hval = (hval << 8) | u32::from(input[ip + 2]);
        let slot = hash_index(hval);
        let reference = table[slot] as usize;
        table[slot] = ip as u32;
        if reference > 0
            && reference < ip
            && ip - reference - 1 < MAX_OFF
            && input[reference + 2] == input[ip + 2]
            && input[reference] == input[ip]
            && input[reference + 1] == input[ip + 1]
        {
            let off = ip - reference - 1;
            let mut len = 2;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            if op + 3 + 1 >= max_out && op - usize::from(lit == 0) + 3 + 1 >= max_out {
                return None;
            }
            out[op - lit - 1] = (lit as u8).wrapping_sub(1);
            op -= usize::from(lit == 0);
            // liblzf first compares up to 16 bytes unconditionally when maxlen > 16, then
            // continues while below maxlen: the same match lengths, reproduced exactly.
            let mut done = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[reference + len] != input[ip + len] {
                        done = true;
                        break;
                    }
                }
            }
            if !done {
                loop {
                    len += 1;
                    if !(len < maxlen && input[reference + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                *out.get_mut(op)? = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                *out.get_mut(op)? = ((off >> 8) + (7 << 5)) as u8;
                *out.get_mut(op + 1)? = (len - 7) as u8;
                op += 2;
            }
            *out.get_mut(op)? = off as u8;
            op += 1;
            lit = 0;
            op += 1;
            ip += len + 1;
            if ip + 2 >= in_len {
                break;
            }
            ip -= 2;
            hval = (u32::from(input[ip]) << 8) | u32::from(input[ip + 1]);
            for _ in 0..2 {
                hval = (hval << 8) | u32::from(input[ip + 2]);
                table[hash_index(hval)] = ip as u32;
                ip += 1;
            }
        } else {
            if op >= max_out {
                return None;
            }
            push_literal(&mut out, &mut op, &mut lit, input[ip])?;
            ip += 1;
        }
    }
    if op + 3 > max_out {
        return None;
    }
    while ip < in_len {
        push_literal(&mut out, &mut op, &mut lit, input[ip])?;
        ip += 1;
    }
    *out.get_mut(op - lit - 1)? = (lit as u8).wrapping_sub(1);
    op -= usize::from(lit == 0);
    out.truncate(op);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn runs_compress_and_come_back() {
        let data = vec![0u8; 10_000];
        let c = compress(&data, data.len() - 4).unwrap();
        assert!(c.len() < 200);
        assert_eq!(decompress(&c, data.len()).unwrap(), data);
    }

    #[test]
    fn malformed_streams_are_refused() {
        // Back reference before the start, literal past the end, wrong total length.
        assert_eq!(decompress(&[0x20, 0x00], 3), None);
        assert_eq!(decompress(&[0x05, b'a'], 6), None);
        assert_eq!(decompress(&[0x00, b'a'], 2), None);
        assert_eq!(decompress(&[0x00, b'a', 0xe0], 300), None);
        assert_eq!(decompress(&[0x00, b'a', 0xe0, 0xff, 0x00], 10), None);
        assert_eq!(
            decompress(&[0x00, b'a', 0xe0, 0xff, 0x00], 265),
            Some(vec![b'a'; 265])
        );
    }

    proptest! {
        #[test]
        fn round_trip(data in proptest::collection::vec(0u8..4, 0..3000)) {
            if let Some(c) = compress(&data, data.len().saturating_sub(4)) {
                prop_assert!(c.len() + 4 <= data.len());
                prop_assert_eq!(decompress(&c, data.len()).unwrap(), data);
            }
        }

        #[test]
        fn arbitrary_input_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), n in 0usize..2000) {
            let _ = decompress(&data, n);
        }
    }
}
