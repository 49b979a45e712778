//! Criterion micro-benchmarks of bloomgate's hot paths (1M keys, 10 bits/key, in cache), so a
//! regression shows up as a change here: hashing, classic and blocked queries (present/absent
//! keys), blocked batched queries, and inserts. `cargo bench -p bloomgate-bench`.

#![forbid(unsafe_code)]

use bloomgate::{BlockedBloomFilter, BloomFilter, KeyHash, Layout, Params};
use bloomgate_bench::keys::{keys, Stream};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;

const ITEMS: u64 = 1_000_000;
const QUERIES: usize = 4096;

fn hot_paths(c: &mut Criterion) {
    let present = keys(Stream::Present, 0, ITEMS as usize);
    let absent = keys(Stream::Absent, 0, QUERIES);
    let hits = &present[..QUERIES];
    let classic_params = Params::for_bits(Layout::Classic, ITEMS * 10, ITEMS).expect("params");
    let blocked_params = Params::for_bits(Layout::Blocked, ITEMS * 10, ITEMS).expect("params");
    let mut classic = BloomFilter::with_params(classic_params, 0).expect("classic");
    let mut blocked = BlockedBloomFilter::with_params(blocked_params, 0).expect("blocked");
    for key in &present {
        classic.insert(key);
        blocked.insert(key);
    }

    let mut group = c.benchmark_group("1M_keys_10_bits");
    group.throughput(Throughput::Elements(QUERIES as u64));
    group.bench_function("hash_xxh3_128", |b| {
        b.iter(|| {
            absent
                .iter()
                .fold(0u64, |acc, k| acc ^ KeyHash::of(black_box(k), 0).lo)
        })
    });
    group.bench_function("classic_query_miss", |b| {
        b.iter(|| {
            absent
                .iter()
                .filter(|k| classic.contains(black_box(k)))
                .count()
        })
    });
    group.bench_function("classic_query_hit", |b| {
        b.iter(|| {
            hits.iter()
                .filter(|k| classic.contains(black_box(k)))
                .count()
        })
    });
    group.bench_function("blocked_query_miss", |b| {
        b.iter(|| {
            absent
                .iter()
                .filter(|k| blocked.contains(black_box(k)))
                .count()
        })
    });
    group.bench_function("blocked_query_hit", |b| {
        b.iter(|| {
            hits.iter()
                .filter(|k| blocked.contains(black_box(k)))
                .count()
        })
    });
    let mut out = Vec::with_capacity(QUERIES);
    group.bench_function("blocked_query_miss_batch", |b| {
        b.iter(|| {
            out.clear();
            blocked.contains_batch(black_box(&absent), &mut out);
            out.iter().filter(|&&x| x).count()
        })
    });
    group.bench_function("classic_insert", |b| {
        b.iter_batched_ref(
            || BloomFilter::with_params(classic_params, 0).expect("classic"),
            |f| absent.iter().filter(|k| f.insert(k)).count(),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("blocked_insert", |b| {
        b.iter_batched_ref(
            || BlockedBloomFilter::with_params(blocked_params, 0).expect("blocked"),
            |f| absent.iter().filter(|k| f.insert(k)).count(),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, hot_paths);
criterion_main!(benches);
