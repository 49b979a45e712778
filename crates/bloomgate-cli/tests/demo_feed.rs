//! `bloomgate demo feed` with local filters, cold and `--warm`: no mode ever shows a seen item,
//! and warming the filters before the timed requests takes the cold start's exact-path lookups
//! out of the measurement (and only that).

use std::process::Command;

fn feed(dir: &std::path::Path, warm: bool) -> serde_json::Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bloomgate"));
    command
        .args(["demo", "feed", "--users", "40", "--history", "60"])
        .args([
            "--requests",
            "400",
            "--concurrency",
            "2",
            "--json",
            "--store",
        ])
        .arg(format!(
            "sqlite:{}",
            dir.join(format!("h-{warm}.db")).display()
        ));
    if warm {
        command.arg("--warm");
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn warm_and_cold_runs_show_no_seen_item_and_warm_skips_the_cold_start() {
    let dir = bloomgate_testkit::temp_dir("demo-feed");
    let cold = feed(&dir, false);
    let warm = feed(&dir, true);
    for report in [&cold, &warm] {
        for mode in ["exact", "verify", "trust"] {
            let m = &report["modes"][mode];
            assert_eq!(m["duplicates_shown"], 0, "{mode}: {m}");
            assert_eq!(m["requests"], 400, "{mode}: {m}");
        }
    }
    let lookups = |r: &serde_json::Value| {
        r["modes"]["verify"]["exact_lookups_per_request"]
            .as_f64()
            .unwrap()
    };
    // Cold: each of the 40 users' first request(s) take all 120 candidates to the exact path.
    // Warm: only "maybe" answers do (about 3 true sightings per request).
    assert!(
        lookups(&warm) < lookups(&cold),
        "warm {} vs cold {}",
        lookups(&warm),
        lookups(&cold)
    );
    assert!(lookups(&warm) < 12.0, "warm verify: {}", lookups(&warm));
    let _ = std::fs::remove_dir_all(&dir);
}
