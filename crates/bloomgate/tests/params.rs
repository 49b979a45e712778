//! Sizing: formulas, the blocked model, limits and typed errors for degenerate input.

use bloomgate::params::{
    blocked_fpr, classic_fpr, estimate_items, MAX_BITS, MAX_BYTES, MAX_HASHES,
};
use bloomgate::{Error, Layout, Params};

fn invalid(r: bloomgate::Result<Params>) -> bool {
    matches!(r, Err(Error::InvalidParameter(_)))
}

#[test]
fn classic_matches_the_textbook_formulas() {
    let p = Params::for_items(Layout::Classic, 1_000_000, 0.01).unwrap();
    // m = ceil(-n ln p / ln²2) = 9_585_059, rounded up to whole words.
    assert_eq!(p.bits, 9_585_059u64.div_ceil(64) * 64);
    assert_eq!(p.hashes, 7);
    assert_eq!(p.items, 1_000_000);
    assert!((p.fpr() - 0.01).abs() < 0.0002, "{}", p.fpr());
    let p = Params::for_items(Layout::Classic, 100_000_000, 0.01).unwrap();
    assert!(
        p.bytes() <= 120_000_000,
        "100M at 1% must fit 120 MB: {}",
        p.bytes()
    );
    let p = Params::for_items(Layout::Classic, 1_000_000_000, 0.01).unwrap();
    assert!(p.bytes() <= 1_200_000_000);
}

#[test]
fn classic_fpr_known_values() {
    // (1 - e^(-kn/m))^k at m/n = 10, k = 7: 0.00819.
    let p = classic_fpr(10_000_000, 7, 1_000_000);
    assert!((p - 0.008194).abs() < 1e-5, "{p}");
    assert_eq!(classic_fpr(1024, 3, 0), 0.0);
    // Stays accurate for tiny rates (no 1 - tiny cancellation).
    let tiny = classic_fpr(1 << 40, 30, 1 << 20);
    assert!(tiny > 0.0 && tiny < 1e-100);
}

#[test]
fn blocked_model_at_ten_bits_per_key() {
    // 10 bits/key: k = 8 is best and the model is ≈1.05% (split-block 256-bit: 1.26%).
    let p = Params::for_bits(Layout::Blocked, 10_000_000, 1_000_000).unwrap();
    assert_eq!(p.hashes, 8);
    assert!((p.fpr() - 0.0105).abs() < 0.0002, "{}", p.fpr());
    // Blocked is never better than classic at equal size.
    for bpk in [4u64, 8, 12, 16, 24] {
        let blocked = (1..=MAX_HASHES)
            .map(|k| blocked_fpr(bpk * 512_000, k, 512_000))
            .fold(1.0, f64::min);
        let classic = classic_fpr(bpk * 512_000, (bpk as f64 * 0.693).round() as u32, 512_000);
        assert!(
            blocked >= classic * 0.999,
            "bpk {bpk}: {blocked} < {classic}"
        );
    }
}

#[test]
fn blocked_sizer_is_minimal_and_meets_the_target() {
    for (n, target) in [
        (1_000u64, 0.01),
        (1_000_000, 0.01),
        (1_000_000, 0.001),
        (50_000, 1e-4),
        (3, 0.5),
    ] {
        let p = Params::for_items(Layout::Blocked, n, target).unwrap();
        assert_eq!(p.bits % 512, 0);
        assert!(p.fpr() <= target, "n={n} p={target}: {}", p.fpr());
        if p.bits > 512 {
            let smaller = p.bits - 512;
            let best = (1..=MAX_HASHES)
                .map(|k| blocked_fpr(smaller, k, n))
                .fold(1.0, f64::min);
            assert!(
                best > target,
                "n={n} p={target}: one block fewer also works"
            );
        }
    }
    // 1% needs ≈ 10.1 bits/key blocked vs 9.59 classic.
    let p = Params::for_items(Layout::Blocked, 10_000_000, 0.01).unwrap();
    assert!(
        (10.0..10.3).contains(&p.bits_per_item()),
        "{}",
        p.bits_per_item()
    );
}

#[test]
fn headroom_and_max_hashes() {
    let plain = Params::for_items(Layout::Classic, 1000, 0.01).unwrap();
    let roomy = Params::builder(Layout::Classic, 1000, 0.01)
        .headroom(0.5)
        .build()
        .unwrap();
    assert_eq!(roomy.items, 1500);
    assert!(roomy.bits > plain.bits);
    assert!(roomy.fpr_at(1000) < 0.01);
    assert!(roomy.fpr() <= 0.0101);

    let capped = Params::builder(Layout::Classic, 1000, 1e-6)
        .max_hashes(4)
        .build()
        .unwrap();
    assert_eq!(capped.hashes, 4);
    assert!(
        capped.fpr() > 1e-6,
        "clamping k costs accuracy, and the FPR says so"
    );

    let blocked = Params::builder(Layout::Blocked, 100_000, 0.01)
        .max_hashes(4)
        .build()
        .unwrap();
    assert!(blocked.hashes <= 4);
    assert!(blocked.fpr() <= 0.01, "blocked grows the array instead");
}

#[test]
fn from_bits_memory_and_explicit() {
    let p = Params::for_bits(Layout::Classic, 1000, 100).unwrap();
    assert_eq!(p.bits, 1024);
    assert_eq!(p.hashes, 7); // round(10.24 · ln 2)
    let p = Params::for_memory(Layout::Blocked, 1 << 20, 100_000).unwrap();
    assert_eq!(p.bytes(), 1 << 20);
    let p = Params::for_memory(Layout::Classic, 1001, 100).unwrap();
    assert_eq!(p.bits, 8000u64 / 64 * 64);
    assert!(invalid(Params::for_memory(Layout::Blocked, 63, 10)));
    let p = Params::new(Layout::Blocked, 1000, 5, 10).unwrap();
    assert_eq!((p.bits, p.hashes), (1024, 5));
    assert_eq!(p.fpr(), blocked_fpr(1024, 5, 10));
}

#[test]
fn degenerate_input_is_a_typed_error() {
    for layout in [Layout::Classic, Layout::Blocked] {
        assert!(invalid(Params::for_items(layout, 0, 0.01)));
        for p in [
            0.0,
            1.0,
            -0.1,
            1.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert!(invalid(Params::for_items(layout, 100, p)), "p = {p}");
        }
        for h in [-0.1, f64::NAN, f64::INFINITY] {
            assert!(invalid(
                Params::builder(layout, 100, 0.01).headroom(h).build()
            ));
        }
        assert!(invalid(
            Params::builder(layout, 100, 0.01).max_hashes(0).build()
        ));
        assert!(invalid(Params::new(layout, 1024, 0, 10)));
        assert!(invalid(Params::new(layout, 1024, MAX_HASHES + 1, 10)));
        assert!(invalid(Params::new(layout, 0, 3, 10)));
        assert!(invalid(Params::new(layout, 1024, 3, 0)));
        assert!(invalid(Params::for_bits(layout, 1024, 0)));
        assert!(matches!(
            Params::new(layout, MAX_BITS + 1, 3, 10),
            Err(Error::TooLarge(_))
        ));
        assert!(matches!(
            Params::new(layout, u64::MAX, 3, 10),
            Err(Error::TooLarge(_))
        ));
        assert!(matches!(
            Params::for_items(layout, u64::MAX, 1e-300),
            Err(Error::TooLarge(_))
        ));
        assert!(matches!(
            Params::for_items(layout, 1 << 43, 0.01),
            Err(Error::TooLarge(_))
        ));
        assert!(matches!(
            Params::for_memory(layout, u64::MAX, 10),
            Err(Error::TooLarge(_))
        ));
        assert!(matches!(
            Params::builder(layout, u64::MAX, 0.5).headroom(1.0).build(),
            Err(Error::TooLarge(_))
        ));
        // The limit itself is accepted by the sizer (no allocation happens here).
        assert!(Params::new(layout, MAX_BITS, 8, 1 << 40).is_ok());
    }
    assert_eq!(MAX_BYTES, 1 << 40);
    // Not a multiple of the granule: validate refuses (decoders rely on this).
    let odd = Params {
        layout: Layout::Blocked,
        bits: 640,
        hashes: 8,
        items: 10,
    };
    assert!(odd.validate().is_err());
}

#[test]
fn extreme_but_valid_requests_are_fast_and_finite() {
    let start = std::time::Instant::now();
    let p = Params::for_items(Layout::Blocked, 1, 0.999).unwrap();
    assert_eq!(p.bits, 512);
    let p = Params::for_items(Layout::Blocked, 100_000_000_000, 1e-9).unwrap();
    assert!(p.fpr() <= 1e-9);
    let p = Params::for_items(Layout::Classic, 10, 1e-15).unwrap();
    assert!((50..=54).contains(&p.hashes), "{}", p.hashes); // m is rounded up to whole words
    assert!(p.fpr() < 1.1e-15);
    // The optimal k (100) exceeds MAX_HASHES: k is clamped and the FPR reported honestly.
    let p = Params::for_items(Layout::Classic, 10, 1e-30).unwrap();
    assert_eq!(p.hashes, MAX_HASHES);
    assert!(p.fpr() > 1e-30 && p.fpr() < 1e-25);
    // Overfull: billions of keys per block still terminates.
    assert!((blocked_fpr(512, 8, u64::MAX) - 1.0).abs() < 1e-12);
    assert!(start.elapsed().as_secs() < 10);
}

#[test]
fn swamidass_baldi_inverts_the_fill() {
    // Expected fill after n keys: X = m(1 - e^(-kn/m)); the estimate recovers n.
    let (m, k, n) = (1_000_000u64, 7u32, 100_000u64);
    let ones = (m as f64 * (1.0 - (-(k as f64) * n as f64 / m as f64).exp())).round() as u64;
    assert!((estimate_items(m, k, ones) - n as f64).abs() < 20.0);
    assert!(estimate_items(m, k, m).is_finite());
}
