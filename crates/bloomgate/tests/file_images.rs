//! File images written before the bit filters became one generic filter over layout policies
//! (commit db67f01) must load, answer and re-encode byte for byte, and building the same
//! filters today must give the same bytes: the layout policies are a refactor, not a format
//! change.

use bloomgate::any::AnyFilter;
use bloomgate::{
    BlockedBloomFilter, BloomFilter, FilterCodec, Layout, Params, ScalableBloomFilter,
};

fn keys() -> Vec<String> {
    (0..3000).map(|i| format!("golden-{i}")).collect()
}

fn golden(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Loads through the typed reader and `AnyFilter`; both re-encode to the same bytes.
fn round_trip<F: FilterCodec>(name: &str) -> F {
    let bytes = golden(name);
    let filter = F::from_bytes(&bytes).unwrap();
    assert_eq!(filter.to_bytes(), bytes, "{name}: typed re-encode");
    let any = AnyFilter::from_bytes(&bytes).unwrap();
    assert_eq!(any.to_bytes(), bytes, "{name}: AnyFilter re-encode");
    filter
}

#[test]
fn classic_and_blocked_images_load_and_rebuild_byte_for_byte() {
    let keys = keys();
    let c: BloomFilter = round_trip("classic.bgf");
    let b: BlockedBloomFilter = round_trip("blocked.bgf");
    assert!(keys[..2000].iter().all(|k| c.contains(k) && b.contains(k)));

    let mut c2 =
        BloomFilter::with_params(Params::for_items(Layout::Classic, 2000, 0.01).unwrap(), 7)
            .unwrap();
    let mut b2 =
        BlockedBloomFilter::with_params(Params::for_items(Layout::Blocked, 2000, 0.01).unwrap(), 7)
            .unwrap();
    for k in &keys[..2000] {
        c2.insert(k);
        b2.insert(k);
    }
    assert_eq!(c2.to_bytes(), golden("classic.bgf"));
    assert_eq!(b2.to_bytes(), golden("blocked.bgf"));

    // Odd k: a second (partial) round in the blocked kernel; k = 9 classic probes.
    let c9: BloomFilter = round_trip("classic-k9.bgf");
    let b11: BlockedBloomFilter = round_trip("blocked-k11.bgf");
    let mut c9b =
        BloomFilter::with_params(Params::new(Layout::Classic, 64 * 37, 9, 100).unwrap(), 3)
            .unwrap();
    let mut b11b =
        BlockedBloomFilter::with_params(Params::new(Layout::Blocked, 512 * 5, 11, 100).unwrap(), 3)
            .unwrap();
    for k in &keys[..150] {
        c9b.insert(k);
        b11b.insert(k);
    }
    assert_eq!(c9b, c9);
    assert_eq!(b11b, b11);
}

#[test]
fn scalable_image_with_classic_links_loads_and_rebuilds() {
    let keys = keys();
    let s: ScalableBloomFilter = round_trip("scalable.bgf");
    let mut s2 = ScalableBloomFilter::new(100, 0.01).unwrap();
    for k in &keys[..500] {
        s2.insert(k).unwrap();
    }
    assert_eq!(s2.to_bytes(), s.to_bytes());
}

/// The partitioned parallel build writes exactly what serial inserts write, `len` included.
#[test]
fn parallel_builds_match_serial_inserts() {
    let keys: Vec<[u8; 4]> = (0..200_000u32).map(|i| i.to_le_bytes()).collect();
    let params = Params::for_items(Layout::Blocked, 200_000, 0.01).unwrap();
    let parallel = BlockedBloomFilter::build_parallel(params, 0, &keys).unwrap();
    let mut serial = BlockedBloomFilter::with_params(params, 0).unwrap();
    serial.insert_batch(&keys);
    assert_eq!(parallel, serial);

    let params = Params::for_items(Layout::Classic, 200_000, 0.01).unwrap();
    let parallel = BloomFilter::build_parallel(params, 0, &keys).unwrap();
    let mut serial = BloomFilter::with_params(params, 0).unwrap();
    serial.insert_batch(&keys);
    assert_eq!(parallel.bits(), serial.bits());
}
