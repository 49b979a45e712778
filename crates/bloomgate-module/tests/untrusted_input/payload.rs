//! The fuzzer's view of module values: a `DUMP` payload split into its type id and fields,
//! joined back and sealed with its CRC64, and whole RDB files of such payloads.

use super::*;

/// One module field of a `DUMP` payload.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Field {
    U(u64),
    D(f64),
    S(Vec<u8>),
}

/// The module type id and fields of a `DUMP` payload of a module value.
pub(crate) fn split_payload(payload: &[u8]) -> (u64, Vec<Field>) {
    let body = &payload[1..payload.len() - 10];
    let mut r = RdbReader::new(body, body.len() as u64, u64::MAX);
    let id = r.length().unwrap();
    let mut fields = Vec::new();
    loop {
        match r.length().unwrap() {
            opcode::EOF => break,
            opcode::UINT | opcode::SINT => fields.push(Field::U(r.length().unwrap())),
            opcode::DOUBLE => fields.push(Field::D(f64::from_le_bytes(r.array().unwrap()))),
            opcode::STRING => fields.push(Field::S(r.string(u64::MAX).unwrap())),
            other => panic!("unexpected opcode {other}"),
        }
    }
    (id, fields)
}

/// A module value's body (type id, fields, EOF) and a sealed `DUMP` payload of it.
pub(crate) fn module_body(id: u64, fields: &[Field]) -> Vec<u8> {
    let mut w = ModuleWriter::default();
    write_len(&mut w.out, id);
    for f in fields {
        match f {
            Field::U(v) => w.save_unsigned(*v),
            Field::D(v) => w.save_double(*v),
            Field::S(v) => w.save_string(v),
        }
    }
    write_len(&mut w.out, opcode::EOF);
    w.out
}

/// `type byte + body + RDB version 10 + CRC64`: what RESTORE takes.
pub(crate) fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = vec![7u8];
    out.extend_from_slice(body);
    out.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// An RDB file (version 10) of `(key, DUMP payload)` entries in db 0, CRC64 trailer sealed.
pub(crate) fn rdb_file(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"REDIS0010".to_vec();
    out.extend_from_slice(&[0xfe, 0x00]);
    for (key, payload) in entries {
        out.push(payload[0]);
        write_string(&mut out, key);
        out.extend_from_slice(&payload[1..payload.len() - 10]);
    }
    out.push(0xff);
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub(crate) fn dump(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

pub(crate) fn restore(
    c: &mut redis::Connection,
    key: &str,
    payload: &[u8],
) -> redis::RedisResult<Value> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .arg("REPLACE")
        .query(c)
}

/// `(next iterator, chunk)` pairs of a full SCANDUMP (the header first), as LOADCHUNK takes
/// them; `prefix` is the family (`BF`, `CF`, `WF`).
pub(crate) fn scandump(c: &mut redis::Connection, prefix: &str, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut iter = 0i64;
    for _ in 0..10_000 {
        let reply: redis::RedisResult<(i64, Vec<u8>)> = redis::cmd(&format!("{prefix}.SCANDUMP"))
            .arg(key)
            .arg(iter)
            .query(c);
        let Ok((next, data)) = reply else { break };
        if next == 0 {
            break;
        }
        out.push((next, data));
        iter = next;
    }
    out
}
