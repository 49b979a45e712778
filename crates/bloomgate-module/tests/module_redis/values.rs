//! The module's data types through DUMP/RESTORE, COPY, DEBUG DIGEST-VALUE and MEMORY USAGE:
//! corrupt and forged payloads refused, the memory budget, t-digest values, and values written
//! by older encoding versions.

use super::*;

#[test]
fn data_types_dump_restore_copy_digest_and_corrupt_payloads() {
    if !have_redis("data_types_dump_restore_copy_digest_and_corrupt_payloads") {
        return;
    }
    let server = Redis::start(&temp_dir("types"), &[], &[]);
    let c = &mut server.conn();
    // `bk`: the blocked layout, its own type, grown to several links.
    assert_eq!(cmd(c, "BF.RESERVE bk 0.01 100 LAYOUT blocked"), Value::Okay);
    for i in 0..300 {
        cmd(c, &format!("BF.ADD bf i{i}"));
        cmd(c, &format!("CF.ADD cf i{i}"));
        cmd(c, &format!("BF.ADD bk i{i}"));
    }
    assert_eq!(cmd(c, "TYPE bk"), Value::SimpleString("BGbloomBK".into()));
    assert_eq!(cmd(c, "TYPE bf"), Value::SimpleString("MBbloom--".into()));
    assert_eq!(
        cmd(c, "BF.INFO bk LAYOUT"),
        Value::Array(vec![Value::BulkString(b"blocked".to_vec())])
    );
    for key in ["bf", "cf", "bk"] {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).unwrap();
        let copy = format!("{key}-restored");
        let ok: Value = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(payload.as_slice())
            .query(c)
            .unwrap();
        assert_eq!(ok, Value::Okay);
        assert_eq!(debug(c, &copy), debug(c, key));
        assert_eq!(digest(c, &copy), digest(c, key));
        assert_eq!(cmd(c, &format!("COPY {key} {key}-copy")), int(1));
        assert_eq!(debug(c, &format!("{key}-copy")), debug(c, key));
        assert_eq!(digest(c, &format!("{key}-copy")), digest(c, key));
        // The copy is independent of its source.
        let fam = if key == "cf" { "CF" } else { "BF" };
        cmd(c, &format!("{fam}.ADD {key}-copy extra"));
        assert_ne!(digest(c, &format!("{key}-copy")), digest(c, key));
        let usage: i64 = redis::cmd("MEMORY").arg("USAGE").arg(key).query(c).unwrap();
        assert!(usage > 0);

        // Corrupt payloads (checksum checks off, so the module sees them): every single-byte
        // change and truncation either RESTOREs a valid filter or fails cleanly.
        cmd(c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1");
        let body = payload.len() - 10; // version (2) + CRC64 (8)
        let payload = &payload;
        let cases = (9..body).step_by(3).flat_map(|i| {
            [0x00u8, 0xff, 0x81].into_iter().map(move |b| {
                let mut p = payload.clone();
                p[i] = b;
                p
            })
        });
        let truncated = (9..body).step_by(17).map(|cut| {
            let mut p = payload[..cut].to_vec();
            p.extend_from_slice(&payload[body..]);
            p
        });
        for (n, p) in cases.chain(truncated).enumerate() {
            let target = format!("corrupt{n}");
            let restored = redis::cmd("RESTORE")
                .arg(&target)
                .arg(0)
                .arg(p)
                .query::<Value>(c);
            if restored.is_ok() {
                // Whatever loaded is a usable filter.
                let _ = redis::cmd(&format!("{fam}.DEBUG"))
                    .arg(&target)
                    .query::<Value>(c);
                let _ = redis::cmd(&format!("{fam}.ADD"))
                    .arg(&target)
                    .arg("x")
                    .query::<Value>(c);
                let _: Value = redis::cmd("DEL").arg(&target).query(c).unwrap();
            }
        }
        cmd(c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 0");
        assert_eq!(cmd(c, "PING"), Value::SimpleString("PONG".into()));
    }
}

#[test]
fn memory_budget_refuses_forged_headers_and_huge_filters() {
    if !have_redis("memory_budget_refuses_forged_headers_and_huge_filters") {
        return;
    }
    let server = Redis::start(&temp_dir("budget"), &[], &[]);
    let c = &mut server.conn();
    cmd(c, "BF.RESERVE big 0.01 2000000");
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
        .arg("big")
        .arg(0)
        .query(c)
        .unwrap();
    cmd(c, "DEL big");
    let used: u64 = info_field(c, "memory", "used_memory").parse().unwrap();
    cmd(c, &format!("CONFIG SET maxmemory {}", used + 1_000_000));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let e = redis::cmd("BF.LOADCHUNK")
        .arg("forged")
        .arg(1)
        .arg(header.as_slice())
        .query::<Value>(c)
        .unwrap_err();
    assert!(dialect_replies::wire_error(&e).starts_with("OOM"), "{e}");
    assert!(error_of(c, "BF.RESERVE huge 0.0001 100000000").starts_with("OOM"));
    assert!(error_of(c, "CF.RESERVE huge 1000000000").starts_with("OOM"));
    cmd(c, "CONFIG SET maxmemory 0");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        redis::cmd("BF.LOADCHUNK")
            .arg("forged")
            .arg(1)
            .arg(header.as_slice())
            .query::<Value>(c)
            .unwrap(),
        Value::Okay
    );
}

/// A t-digest's DUMP restores with the same answers; forged ones (a capacity that is not the
/// compression's, more nodes than slots, a compression whose arrays exceed the memory left,
/// a truncated value) are refused with Redis' `Bad data format`, never a crash.
#[test]
fn tdigest_dump_restore_and_forged_payloads() {
    if !have_redis("tdigest_dump_restore_and_forged_payloads") {
        return;
    }
    let server = Redis::start(&temp_dir("td-dump"), &[], &[]);
    let c = &mut server.conn();
    cmd(c, "TDIGEST.CREATE td COMPRESSION 5");
    for i in 0..200 {
        cmd(c, &format!("TDIGEST.ADD td {i}"));
    }
    let dump: Vec<u8> = redis::cmd("DUMP").arg("td").query(c).unwrap();
    let restore = |c: &mut redis::Connection, key: &str, payload: &[u8]| {
        redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(payload)
            .query::<Value>(c)
    };
    assert_eq!(restore(c, "copy", &dump).unwrap(), Value::Okay);
    let q = "TDIGEST.QUANTILE {} 0 0.1 0.5 0.9 1";
    assert_eq!(
        cmd(c, &q.replace("{}", "copy")),
        cmd(c, &q.replace("{}", "td"))
    );
    assert_eq!(cmd(c, "TDIGEST.INFO copy"), cmd(c, "TDIGEST.INFO td"));

    // The payload: type id, then fields with opcodes (4 = double, 2 = unsigned); compression 5
    // is the first double, the capacity (40) the first unsigned.
    let (body, footer) = dump.split_at(dump.len() - 10);
    let forge = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = body.to_vec();
        edit(&mut b);
        b.extend_from_slice(&footer[..2]);
        let crc = bloomgate_dialect::encoding::rdb_format::crc64(0, &b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    };
    let at_compression = body
        .windows(9)
        .position(|w| w == [&[4u8][..], &5f64.to_le_bytes()].concat())
        .unwrap();
    let at_cap = body.windows(2).position(|w| w == [2, 40]).unwrap();
    let cases: Vec<Vec<u8>> = vec![
        forge(&|b| b[at_cap + 1] = 41),
        forge(&|b| {
            b[at_compression + 1..at_compression + 9].copy_from_slice(&1e12f64.to_le_bytes())
        }),
        forge(&|b| {
            b[at_compression + 1..at_compression + 9].copy_from_slice(&f64::NAN.to_le_bytes())
        }),
        forge(&|b| b.truncate(b.len() - 20)),
    ];
    for (i, payload) in cases.iter().enumerate() {
        let e = restore(c, &format!("bad{i}"), payload).unwrap_err();
        assert_eq!(
            dialect_replies::wire_error(&e),
            "ERR Bad data format",
            "case {i}"
        );
    }
    assert_eq!(cmd(c, "PING"), Value::SimpleString("PONG".into()));
}

/// A Top-K's DUMP with its decay (the fourth field) forged outside `(0, 1]`, NaN included, is
/// refused with Redis' `Bad data format`; 1 and 0.9 restore.
#[test]
fn topk_forged_decay_is_refused() {
    if !have_redis("topk_forged_decay_is_refused") {
        return;
    }
    let server = Redis::start(&temp_dir("tk-decay"), &[], &[]);
    let c = &mut server.conn();
    cmd(c, "TOPK.RESERVE tk 3 8 2 0.9");
    cmd(c, "TOPK.ADD tk a b c a");
    let payload: Vec<u8> = redis::cmd("DUMP").arg("tk").query(c).unwrap();
    let (id, mut fields, trailer) = split_payload(&payload);
    assert_eq!(fields[3], (4, 0.9f64.to_le_bytes().to_vec()), "decay");
    cmd(c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1");
    for (i, decay) in [0.0, 1.5, -0.1, f64::NAN, 1.0, 0.9].into_iter().enumerate() {
        fields[3].1 = decay.to_le_bytes().to_vec();
        let forged = join_payload(id, &fields, &trailer);
        let restored = redis::cmd("RESTORE")
            .arg(format!("tk{i}"))
            .arg(0)
            .arg(forged)
            .query::<Value>(c);
        if decay > 0.0 && decay <= 1.0 {
            assert_eq!(restored.unwrap(), Value::Okay, "decay {decay}");
            assert_eq!(
                cmd(c, &format!("TOPK.LIST tk{i} WITHCOUNT")),
                cmd(c, "TOPK.LIST tk WITHCOUNT")
            );
        } else {
            let e = restored.unwrap_err();
            assert_eq!(
                dialect_replies::wire_error(&e),
                "ERR Bad data format",
                "decay {decay}"
            );
        }
    }
    cmd(c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 0");
    assert_eq!(cmd(c, "PING"), Value::SimpleString("PONG".into()));
}

/// One field of a module value in an RDB payload: its opcode and its encoded bytes.
type Field = (u8, Vec<u8>);

/// Length of an RDB length/integer encoding at `p[0..]`, and whether it is a special
/// (integer or LZF) string encoding with its format bits.
fn rdb_len(p: &[u8]) -> (usize, u64, Option<u8>) {
    match p[0] >> 6 {
        0 => (1, u64::from(p[0] & 0x3f), None),
        1 => (2, u64::from(p[0] & 0x3f) << 8 | u64::from(p[1]), None),
        3 => (1, 0, Some(p[0] & 0x3f)),
        _ if p[0] == 0x80 => (
            5,
            u64::from(u32::from_be_bytes(p[1..5].try_into().unwrap())),
            None,
        ),
        _ => (9, u64::from_be_bytes(p[1..9].try_into().unwrap()), None),
    }
}

/// Splits a module-value DUMP payload (type 7 = module v2) into the module id, its fields and
/// the trailer (RDB version + CRC).
fn split_payload(payload: &[u8]) -> (u64, Vec<Field>, Vec<u8>) {
    assert_eq!(payload[0], 7, "module type v2");
    let (n, id, _) = rdb_len(&payload[1..]);
    let mut at = 1 + n;
    let mut fields = Vec::new();
    loop {
        let op = payload[at];
        at += 1;
        let start = at;
        match op {
            0 => break,
            2 => at += rdb_len(&payload[at..]).0,
            4 => at += 8,
            5 => {
                let (n, len, special) = rdb_len(&payload[at..]);
                at += n;
                at += match special {
                    None => len as usize,
                    Some(0) => 1,
                    Some(1) => 2,
                    Some(2) => 4,
                    Some(_) => {
                        // LZF: compressed length, plain length, then the compressed bytes.
                        let (n1, clen, _) = rdb_len(&payload[at..]);
                        let (n2, _, _) = rdb_len(&payload[at + n1..]);
                        n1 + n2 + clen as usize
                    }
                };
            }
            other => panic!("unexpected module opcode {other}"),
        }
        fields.push((op, payload[start..at].to_vec()));
    }
    (id, fields, payload[at..].to_vec())
}

fn join_payload(id: u64, fields: &[Field], trailer: &[u8]) -> Vec<u8> {
    let mut p = vec![7, 0x81];
    p.extend_from_slice(&id.to_be_bytes());
    for (op, bytes) in fields {
        p.push(*op);
        p.extend_from_slice(bytes);
    }
    p.push(0);
    p.extend_from_slice(trailer);
    p
}

#[test]
fn older_encoding_versions_restore() {
    if !have_redis("older_encoding_versions_restore") {
        return;
    }
    let server = Redis::start(&temp_dir("encver"), &[], &[]);
    let c = &mut server.conn();
    for i in 0..50 {
        cmd(c, &format!("BF.ADD bf i{i}"));
        cmd(c, &format!("CF.ADD cf i{i}"));
    }
    cmd(c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1");
    let older = |c: &mut redis::Connection, key: &str, encver: u64, drop: &[usize]| {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).unwrap();
        let (id, fields, trailer) = split_payload(&payload);
        assert_eq!(id & 1023, 4, "written with encoding version 4");
        let fields: Vec<Field> = fields
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !drop.contains(i))
            .map(|(_, f)| f)
            .collect();
        let old = join_payload(id & !1023 | encver, &fields, &trailer);
        let copy = format!("{key}-v{encver}");
        let ok: Value = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(old)
            .query(c)
            .unwrap();
        assert_eq!(ok, Value::Okay);
        assert_eq!(debug(c, &copy), debug(c, key), "{key} at encoding {encver}");
    };
    // MBbloom-- v3: no growth field (index 3), taken as 2.
    older(c, "bf", 3, &[3]);
    // v2: no growth either (options still there).
    older(c, "bf", 2, &[3]);
    // MBbloomCF v3: no deletes, bucket size, max iterations, expansion (indices 3..=6) nor the
    // per-filter bucket count (index 7): defaults and the top-level count are used.
    older(c, "cf", 3, &[3, 4, 5, 6, 7]);
}
