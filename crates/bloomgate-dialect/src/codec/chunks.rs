//! How a dump body is cut into SCANDUMP chunks: pieces of at most [`CHUNK_BYTES`], each
//! returned with the byte offset just past it plus one as its iterator (RedisBloom's
//! convention), never crossing a part of the body (a Bloom link, a cuckoo sub-filter). A flat
//! body (Count-Min counters, Top-K buckets) is one part.

/// The largest chunk SCANDUMP returns.
pub(crate) const CHUNK_BYTES: u64 = 16 * 1024 * 1024;

/// `(iterator, length)` of each chunk of a body made of parts of these lengths, in order.
pub(crate) fn plan_parts(parts: impl IntoIterator<Item = u64>) -> Vec<(i64, u64)> {
    let mut plan = Vec::new();
    let mut end = 1i64;
    for mut left in parts {
        while left > 0 {
            let len = left.min(CHUNK_BYTES);
            end += len as i64;
            plan.push((end, len));
            left -= len;
        }
    }
    plan
}

/// `(iterator, length)` of each chunk of a flat `total`-byte body.
pub(crate) fn plan(total: u64) -> Vec<(i64, u64)> {
    plan_parts([total])
}

/// The body offset where a chunk of `len` bytes returned with `iter` starts, if `iter` can be
/// one of [`plan`]'s iterators for that length.
pub(crate) fn start(iter: i64, len: usize) -> Option<u64> {
    u64::try_from(iter).ok()?.checked_sub(1 + len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_and_start_agree() {
        assert!(plan(0).is_empty());
        let total = 2 * CHUNK_BYTES + 5;
        let chunks = plan(total);
        assert_eq!(chunks.iter().map(|c| c.1).sum::<u64>(), total);
        let mut at = 0;
        for (iter, len) in chunks {
            assert_eq!(start(iter, len as usize), Some(at));
            at += len;
        }
        assert_eq!(start(0, 0), None);
        assert_eq!(start(-5, 1), None);
    }
}
