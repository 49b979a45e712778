//! The gate's remote mode against a real `bloomgate serve`: one WF.* filter per scope, probed
//! and written with the gate's own (simulated) clock, evicted beyond the memory budget — and no
//! item a scope was shown ever answers "unseen" within the retention, before or after eviction.

use bloomgate_gate::{FilterMode, Gate, GateConfig, LifecycleConfig, Policy, SqliteStore};
use bloomgate_testkit::server::Server;
use bloomgate_testkit::temp_dir;

fn gate(port: u16, dir: &std::path::Path, memory_budget_bytes: u64, policy: Policy) -> Gate {
    let store = SqliteStore::open(dir.join("seen.db")).unwrap();
    let config = GateConfig {
        policy,
        filters: FilterMode::Remote {
            url: format!("resp://127.0.0.1:{port}"),
            key_prefix: "seen:".into(),
        },
        lifecycle: LifecycleConfig {
            retention_ms: 10_000,
            generations: 3,
            fpr: 0.01,
            fpr_budget: 0.05,
            headroom: 1.5,
            min_items_per_generation: 64,
            memory_budget_bytes,
        },
        cache_capacity: 0,
        trust_sample_every: 0,
    };
    Gate::new(Box::new(store), config).unwrap()
}

#[test]
fn shown_items_stay_seen_through_eviction_and_expire_after_retention() {
    let dir = temp_dir("gate-remote");
    let server = Server::binary(
        env!("CARGO_BIN_EXE_bloomgate"),
        &dir,
        &["--appendfsync", "always"],
    );
    // A budget of a few scopes' filters: the 30 scopes below force evictions.
    let g = gate(server.port, &dir, 5_000, Policy::Trust);
    let scopes = 30u64;
    let mut now = 1_000_000u64;
    for round in 0..80u64 {
        for scope in 0..scopes {
            let items = [round * 1000 + scope, round * 1000 + scope + 500];
            g.record(scope, &items, now).unwrap();
        }
        now += 50;
    }
    g.flush().unwrap();
    let evictions = g
        .metrics()
        .evictions
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(evictions > 0, "the budget evicted nothing");
    let mut con = server.conn();
    let kind: String = redis::cmd("TYPE").arg("seen:29").query(&mut con).unwrap();
    assert_eq!(kind, "BGwindowF");
    // Every shown item still reads as seen (trust mode: the filter alone decides), whether its
    // scope's filter stayed on the server or was evicted and is reloaded from the store now.
    for scope in 0..scopes {
        let items: Vec<u64> = (0..80u64)
            .flat_map(|round| [round * 1000 + scope, round * 1000 + scope + 500])
            .collect();
        let unseen = g.unseen(scope, &items, now).unwrap();
        assert!(
            unseen.iter().all(|u| !u),
            "scope {scope}: a shown item reads unseen"
        );
    }
    // Past the retention (plus a window), the filter no longer holds them.
    let later = now + 10_000 + 5_000 + 1;
    let unseen = g.unseen(29, &[29, 529], later).unwrap();
    assert_eq!(unseen, [true, true]);
    drop(g);
    server.kill9();
    let _ = std::fs::remove_dir_all(&dir);
}
