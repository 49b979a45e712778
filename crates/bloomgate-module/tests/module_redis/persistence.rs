//! What Redis persists and replicates of the module's values: the AOF rewrite (the LOADCHUNK
//! sequence, counting filters included), a replica with other settings (counting filters
//! included), digests across DEBUG RELOAD, windowed filters
//! across rewrite and restart, and an RDB written by RedisBloom 8 loading with every answer
//! equal.

use super::*;

#[test]
fn aof_rewrite_replays_the_loadchunk_sequence() {
    if !have_redis("aof_rewrite_replays_the_loadchunk_sequence") {
        return;
    }
    let dir = temp_dir("aof");
    let aof = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"];
    let server = Redis::start(&dir, &[], &aof);
    let c = &mut server.conn();
    cmd(c, "BF.RESERVE bk 0.01 100 LAYOUT blocked");
    for i in 0..500 {
        cmd(c, &format!("BF.ADD bf i{i}"));
        cmd(c, &format!("CF.ADD cf i{i}"));
        cmd(c, &format!("BF.ADD bk i{i}"));
    }
    cmd(c, "CF.DEL cf i7");
    cmd(c, "CBF.RESERVE cbf 0.01 1000");
    for i in 0..300 {
        cmd(c, &format!("CBF.ADD cbf i{i}"));
    }
    cmd(c, "CBF.DEL cbf i7");
    // A t-digest with a buffer: rewritten as RESTORE of its (merged) DUMP, as RedisBloom does.
    cmd(c, "TDIGEST.CREATE td COMPRESSION 20");
    for i in 0..300 {
        cmd(c, &format!("TDIGEST.ADD td {}", (i * 37) % 101));
    }
    let td_before = cmd(c, "TDIGEST.QUANTILE td 0.1 0.5 0.9");
    let base = rewrite_aof(c, &dir);
    // Writes after the rewrite land in the new incremental file.
    cmd(c, "BF.ADD bf after");
    let before: Vec<(Value, String)> = ["bf", "cf", "cbf", "bk"]
        .iter()
        .map(|k| (debug(c, k), digest(c, k)))
        .collect();
    assert!(
        base.windows(12).any(|w| w == b"BF.LOADCHUNK")
            && base.windows(12).any(|w| w == b"CF.LOADCHUNK")
            && base.windows(13).any(|w| w == b"CBF.LOADCHUNK")
            && base.windows(7).any(|w| w == b"RESTORE"),
        "the rewrite is LOADCHUNK commands, and RESTORE for the t-digest"
    );
    server.shutdown(false);
    let server = Redis::start(&dir, &[], &aof);
    let c = &mut server.conn();
    let after: Vec<(Value, String)> = ["bf", "cf", "cbf", "bk"]
        .iter()
        .map(|k| (debug(c, k), digest(c, k)))
        .collect();
    assert_eq!(before, after);
    assert_eq!(cmd(c, "BF.EXISTS bf after"), int(1));
    assert_eq!(cmd(c, "CBF.EXISTS cbf i7"), int(0));
    assert_eq!(cmd(c, "CBF.CARD cbf"), int(299));
    assert_eq!(cmd(c, "TDIGEST.QUANTILE td 0.1 0.5 0.9"), td_before);
}

#[test]
fn replica_with_other_settings_reaches_the_same_bytes() {
    if !have_redis("replica_with_other_settings_reaches_the_same_bytes") {
        return;
    }
    let master = Redis::start(&temp_dir("master"), &[], &[]);
    let m = &mut master.conn();
    // Before the replica exists: reaches it by full sync (RDB through the module types).
    for i in 0..400 {
        cmd(m, &format!("BF.ADD bf:sync i{i}"));
        cmd(m, &format!("CF.ADD cf:sync i{i}"));
    }
    let replica_settings = [
        "bf-error-rate",
        "0.2",
        "bf-initial-size",
        "7",
        "bf-expansion-factor",
        "4",
        "cf-bucket-size",
        "4",
        "cf-initial-size",
        "64",
        "cf-max-iterations",
        "5",
        "cf-expansion-factor",
        "2",
    ];
    let master_port = master.port.to_string();
    let replica = Redis::start(
        &temp_dir("replica"),
        &replica_settings,
        &["--replicaof", "127.0.0.1", &master_port],
    );
    let r = &mut replica.conn();
    // `bf.bf-initial-size` on Redis 7, `bf-initial-size` on Redis 8.
    let replica_initial: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*bf-initial-size")
        .query(r)
        .unwrap();
    assert_eq!(replica_initial[1], "7", "the replica runs other settings");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while info_field(r, "replication", "master_link_status") != "up" {
        assert!(std::time::Instant::now() < deadline, "replica did not sync");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // After: reaches it by command propagation; auto-created filters must carry the master's
    // settings, not the replica's.
    for i in 0..400 {
        cmd(m, &format!("BF.ADD bf:auto i{i}"));
        cmd(m, &format!("CF.ADD cf:auto i{i}"));
        cmd(m, &format!("BF.MADD bf:madd i{i} j{i}"));
        cmd(m, &format!("CF.ADDNX cf:addnx i{i}"));
        cmd(m, &format!("BF.ADD bf:sync more{i}"));
    }
    cmd(m, "BF.INSERT bf:insert ITEMS a b c");
    cmd(m, "BF.INSERT bf:insert2 CAPACITY 10 ERROR 0.1 ITEMS a b c");
    cmd(m, "CF.INSERT cf:insert ITEMS a b c");
    cmd(m, "CF.INSERTNX cf:insertnx ITEMS a b c");
    cmd(m, "BF.RESERVE bf:reserved 0.001 50 EXPANSION 3");
    cmd(m, "CF.RESERVE cf:reserved 100 BUCKETSIZE 3");
    for i in 0..200 {
        cmd(m, &format!("BF.ADD bf:reserved i{i}"));
        cmd(m, &format!("CF.ADD cf:reserved i{i}"));
    }
    cmd(m, "CF.DEL cf:auto i3");
    // Time-windowed filters: writes replicate with their time and explicit parameters.
    cmd(m, "WF.RESERVE wf:reserved 0.01 50 60000 3");
    for i in 0..200 {
        cmd(m, &format!("WF.ADD wf:reserved i{i}"));
        cmd(
            m,
            &format!("WF.INSERT wf:auto WINDOW 1000 GENERATIONS 4 ITEMS i{i} j{i}"),
        );
    }
    // Counting filters: an auto-created one replicates with the master's parameters.
    cmd(m, "CBF.RESERVE cbf:reserved 0.01 500 BITS 8");
    for i in 0..200 {
        if i < 80 {
            // Created with the master's bf-initial-size (100) as its capacity.
            cmd(m, &format!("CBF.ADD cbf:auto i{i}"));
        }
        cmd(m, &format!("CBF.MADD cbf:reserved i{i} j{i}"));
    }
    cmd(m, "CBF.DEL cbf:auto i3");
    cmd(m, "CBF.DEL cbf:reserved j4");
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(m).unwrap();
    assert_eq!(acked, 1);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(m).unwrap();
    assert_eq!(keys.len(), 16);
    for key in &keys {
        assert_eq!(debug(r, key), debug(m, key), "{key}");
        assert_eq!(digest(r, key), digest(m, key), "{key}");
    }
}

/// `DEBUG DIGEST-VALUE` covers what the RDB holds and nothing else: a key of every type keeps
/// its digest across `DEBUG RELOAD` (a Top-K whose decay draws moved its generator, which the
/// RDB does not save; a t-digest with unmerged values), so a replica loaded from an RDB does
/// not look diverged. The answers survive too.
#[test]
fn digests_survive_debug_reload() {
    if !have_redis("digests_survive_debug_reload") {
        return;
    }
    let server = Redis::start(&temp_dir("digest-reload"), &[], &[]);
    let c = &mut server.conn();
    cmd(c, "TOPK.RESERVE tk 3 4 2 0.9");
    cmd(c, "CMS.INITBYDIM cms 50 4");
    cmd(c, "TDIGEST.CREATE td COMPRESSION 20");
    cmd(c, "WF.RESERVE wf 0.01 100 600000 3");
    cmd(c, "CBF.RESERVE cbf 0.01 1000");
    cmd(c, "BF.RESERVE bk 0.01 50 EXPANSION 2 LAYOUT blocked");
    for i in 0..200 {
        cmd(c, &format!("BF.ADD bk i{i}"));
        cmd(c, &format!("BF.ADD bf i{i}"));
        cmd(c, &format!("CF.ADD cf i{i}"));
        cmd(c, &format!("CMS.INCRBY cms i{} 1", i % 17));
        // Few buckets, many items: increments land on others' buckets and draw decays.
        cmd(c, &format!("TOPK.ADD tk i{} i{}", i % 23, i % 5));
        cmd(c, &format!("TDIGEST.ADD td {}", (i * 37) % 101));
        cmd(c, &format!("WF.ADD wf i{i}"));
        cmd(c, &format!("CBF.ADD cbf i{}", i % 50));
    }
    let keys = ["bf", "cf", "cms", "tk", "td", "wf", "cbf", "bk"];
    let answers = |c: &mut redis::Connection| {
        [
            cmd(c, "TOPK.LIST tk WITHCOUNT"),
            cmd(c, "CMS.QUERY cms i1 i2 i16"),
            cmd(c, "TDIGEST.QUANTILE td 0.1 0.5 0.9"),
            cmd(c, "BF.EXISTS bf i7"),
            cmd(c, "CF.COUNT cf i7"),
            cmd(c, "WF.EXISTS wf i7"),
            cmd(c, "CBF.COUNT cbf i7"),
            cmd(c, "BF.MEXISTS bk i7 i199 nope"),
            cmd(c, "BF.INFO bk"),
        ]
    };
    let before: Vec<String> = keys.iter().map(|k| digest(c, k)).collect();
    let answers_before = answers(c);
    let dumps_before: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| redis::cmd("DUMP").arg(k).query(c).unwrap())
        .collect();
    assert_eq!(cmd(c, "DEBUG RELOAD"), Value::Okay);
    let after: Vec<String> = keys.iter().map(|k| digest(c, k)).collect();
    let changed: Vec<&str> = (0..keys.len())
        .filter(|&i| before[i] != after[i])
        .map(|i| keys[i])
        .collect();
    assert!(
        changed.is_empty(),
        "digests changed across DEBUG RELOAD: {changed:?}"
    );
    assert_eq!(answers(c), answers_before);
    let dumps_after: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| redis::cmd("DUMP").arg(k).query(c).unwrap())
        .collect();
    assert_eq!(dumps_after, dumps_before);
}

/// WF.* inside Redis with the real clock: items answer 1 within the retention and age out after
/// it, an AOF rewrite (the WF.LOADCHUNK sequence) and a restart keep the bytes, and replaying the
/// log after the windows have passed rebuilds them too (writes are logged with their time).
#[test]
fn windowed_filters_age_out_and_survive_rewrite_and_restart() {
    if !have_redis("windowed_filters_age_out_and_survive_rewrite_and_restart") {
        return;
    }
    let dir = temp_dir("wf");
    let aof = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"];
    let server = Redis::start(&dir, &[], &aof);
    let c = &mut server.conn();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    // Windows of 400 ms, 2 generations; start just after a slot boundary.
    std::thread::sleep(std::time::Duration::from_millis(405 - now() % 400));
    assert_eq!(cmd(c, "WF.RESERVE wf 0.01 1000 400 2"), Value::Okay);
    assert_eq!(
        cmd(c, "WF.MADD wf a b c"),
        Value::Array(vec![int(1), int(1), int(1)])
    );
    let added_at = now();
    assert_eq!(
        cmd(c, "WF.MEXISTS wf a b zz"),
        Value::Array(vec![int(1), int(1), int(0)])
    );
    let dump = |c: &mut redis::Connection| (cmd(c, "WF.SCANDUMP wf 0"), digest(c, "wf"));
    let before = dump(c);
    cmd(c, "BGREWRITEAOF");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let gone_at = added_at - added_at % 400 + 2 * 400 + 20;
    std::thread::sleep(std::time::Duration::from_millis(
        gone_at.saturating_sub(now()),
    ));
    assert_eq!(
        cmd(c, "WF.MEXISTS wf a b"),
        Value::Array(vec![int(0), int(0)])
    );
    assert_eq!(cmd(c, "WF.CARD wf"), int(0));
    assert_eq!(dump(c), before, "reads change nothing");
    server.shutdown(false);
    let server = Redis::start(&dir, &[], &aof);
    let c = &mut server.conn();
    assert_eq!(dump(c), before, "replayed after the windows passed");
}

/// A WF key loaded half-way (a dump header, no chunks) is a valid value: SAVE writes it, Redis
/// restarts on that RDB, and DUMP/RESTORE of it works. A write time a full retention ahead of
/// the clock is refused, so later writes keep landing.
#[test]
fn half_loaded_windowed_keys_save_and_future_times_are_refused() {
    if !have_redis("half_loaded_windowed_keys_save_and_future_times_are_refused") {
        return;
    }
    let dir = temp_dir("wf-half");
    let server = Redis::start(&dir, &[], &[]);
    let c = &mut server.conn();
    assert_eq!(cmd(c, "WF.RESERVE src 0.01 100 60000 3"), Value::Okay);
    cmd(c, "WF.MADD src a b c");
    let Value::Array(first) = cmd(c, "WF.SCANDUMP src 0") else {
        panic!("no dump")
    };
    let Value::BulkString(header) = &first[1] else {
        panic!("no header")
    };
    let loaded: Value = redis::cmd("WF.LOADCHUNK")
        .arg("dst")
        .arg(1)
        .arg(header.as_slice())
        .query(c)
        .unwrap();
    assert_eq!(loaded, Value::Okay);
    assert_eq!(cmd(c, "WF.EXISTS dst a"), int(0), "awaiting its chunk");
    assert_eq!(cmd(c, "SAVE"), Value::Okay);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("dst").query(c).unwrap();
    let restored: Value = redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(payload)
        .query(c)
        .unwrap();
    assert_eq!(restored, Value::Okay);

    let future = "WF.INSERT w WINDOW 1000 GENERATIONS 3 AT 9223372036854775807 ITEMS future";
    assert!(error_of(c, future).contains("ahead of the server's clock"));
    cmd(c, "WF.INSERT w WINDOW 1000 GENERATIONS 3 ITEMS now");
    let existing = future.replace("WINDOW 1000 GENERATIONS 3 ", "");
    assert!(error_of(c, &existing).contains("ahead of the server's clock"));
    assert_eq!(cmd(c, "WF.ADD w later"), int(1));
    assert_eq!(cmd(c, "WF.EXISTS w later"), int(1));
    assert_eq!(cmd(c, "SAVE"), Value::Okay);
    server.shutdown(false);

    let server = Redis::try_start(&dir, &[], &[]).expect("Redis restarts on its own RDB");
    let c = &mut server.conn();
    assert_eq!(cmd(c, "EXISTS dst copy"), int(2));
    assert_eq!(cmd(c, "WF.EXISTS src a"), int(1));
    assert_eq!(cmd(c, "WF.EXISTS w later"), int(1));
    server.shutdown(false);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reply as `tests/fixtures/redisbloom8-rdb/expected.json` writes it (raw RESP2: strings,
/// integers, arrays, null, errors as `"error: …"`).
fn reply_json(reply: redis::RedisResult<Value>) -> serde_json::Value {
    fn of(v: &Value) -> serde_json::Value {
        match v {
            Value::SimpleString(s) => serde_json::Value::from(s.as_str()),
            Value::Okay => serde_json::Value::from("OK"),
            Value::BulkString(b) => serde_json::Value::from(String::from_utf8_lossy(b)),
            Value::Int(n) => serde_json::Value::from(*n),
            Value::Nil => serde_json::Value::Null,
            Value::Array(items) => serde_json::Value::Array(items.iter().map(of).collect()),
            other => panic!("unexpected RESP2 reply {other:?}"),
        }
    }
    match reply {
        Ok(v) => of(&v),
        Err(e) => serde_json::Value::from(format!(
            "error: {}",
            e.detail()
                .map(|d| format!("{} {d}", e.code().unwrap_or("")))
                .unwrap_or_else(|| e.to_string())
                .trim()
        )),
    }
}

/// Every recorded answer of the fixture equals the server's.
fn check_redisbloom8_answers(c: &mut redis::Connection, answers: &serde_json::Value) {
    let answers = answers.as_object().unwrap();
    assert!(answers.len() > 40);
    for (line, want) in answers {
        let mut q = redis::cmd(line.split(' ').next().unwrap());
        for word in line.split(' ').skip(1) {
            q.arg(word);
        }
        assert_eq!(&reply_json(q.query::<Value>(c)), want, "{line}");
    }
}

/// An RDB written by Redis 8.2 + RedisBloom 8 holding all five of its types (BF, CF, CMS, TopK,
/// t-digest; tests/fixtures/redisbloom8-rdb) loads with every recorded answer equal, and again
/// after our own SAVE and a restart. Always inside Redis 8 (`redis8_server_binary`), whichever
/// server the other tests run in: the file is RDB version 12, which Redis 7 cannot read.
#[test]
fn redisbloom8_rdb_loads_with_every_answer_equal() {
    let test = "redisbloom8_rdb_loads_with_every_answer_equal";
    let Some(redis8) = bloomgate_testkit::redis8_server_binary(test) else {
        return;
    };
    let start = |dir: &std::path::Path| {
        Redis::try_start_at(&redis8, dir, &[], &[])
            .unwrap_or_else(|log| panic!("Redis 8 with the module did not start: {log}"))
    };
    let dir = temp_dir("rb8-rdb");
    let fixture = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/redisbloom8-rdb"
    ));
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture.join("expected.json")).unwrap()).unwrap();
    std::fs::copy(fixture.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let server = start(&dir);
    check_redisbloom8_answers(&mut server.conn(), &expected["answers"]);
    let _: () = redis::cmd("SAVE").query(&mut server.conn()).unwrap();
    server.shutdown(false);
    let server = start(&dir);
    check_redisbloom8_answers(&mut server.conn(), &expected["answers"]);
}
