//! Bit-exactness against RedisBloom: random TDIGEST.* sequences (CREATE with several
//! compressions, ADD of ties, spreads and extremes, every read, MERGE with its options, RESET,
//! DUMP, DEL) replayed against the dialect, every reply compared with the one a live
//! RedisBloom 8 gave, recorded once in `tests/fixtures/tdigest/redisbloom8-replies.txt` (by
//! `record.py` beside it). The sequences come from a seed through splitmix64 and integer-only
//! formatting, written the same way in `gen.py` there and here.

use bloomgate_dialect::commands::testing::Harness;
use bloomgate_dialect::encoding::rdb_format::{crc64, dump_payload};
use bloomgate_dialect::reply::{format_double, Reply};

/// splitmix64, as `gen.py` has it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }
}

const KEYS: [&str; 3] = ["a", "b", "c"];

/// `n / 10^scale` in decimal.
fn dec(n: i64, scale: u32) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let n = n.unsigned_abs();
    if scale == 0 {
        return format!("{sign}{n}");
    }
    let p = 10u64.pow(scale);
    format!("{sign}{}.{:0w$}", n / p, n % p, w = scale as usize)
}

fn value(r: &mut Rng, mode: u64) -> String {
    match mode {
        0 => r.below(21).to_string(),
        1 => dec(r.below(2_000_001) as i64 - 1_000_000, 3),
        2 => dec((0..4).map(|_| r.below(10_001) as i64).sum(), 2),
        3 => {
            let x = r.below(100_000) as i64;
            dec(x * x, 6)
        }
        4 => r
            .pick(&[
                "0", "1", "1", "2", "3", "5", "8", "13", "1e15", "-1e15", "0.5", "-0.25",
            ])
            .to_string(),
        _ => dec(r.below(1_000_000) as i64, 6),
    }
}

fn fraction(r: &mut Rng) -> String {
    if r.below(10) == 0 {
        return r.pick(&["0", "1", "0.5", "0.99", "0.01"]).to_string();
    }
    dec(r.below(1_000_001) as i64, 6)
}

const COMPRESSIONS: [&str; 9] = ["", "", "1", "2", "5", "10", "50", "100", "500"];

fn create(r: &mut Rng, key: &str) -> Vec<String> {
    let mut cmd = vec!["TDIGEST.CREATE".to_string(), key.to_string()];
    let c = r.pick(&COMPRESSIONS);
    if !c.is_empty() {
        cmd.extend(["COMPRESSION".to_string(), c.to_string()]);
    }
    cmd
}

/// The command sequence of `seed`, as `gen.py`'s `gen(seed, n)`.
fn generate(seed: u64, n: usize) -> Vec<Vec<String>> {
    let mut r = Rng(seed);
    let modes: Vec<u64> = KEYS.iter().map(|_| r.below(6)).collect();
    let mut cmds: Vec<Vec<String>> = KEYS.iter().map(|k| create(&mut r, k)).collect();
    let s = |x: &str| x.to_string();
    for _ in 0..n {
        let ki = r.below(3) as usize;
        let k = KEYS[ki];
        let x = r.below(100);
        let mut cmd = Vec::new();
        if x < 6 {
            cmd = create(&mut r, k);
        } else if x < 45 {
            let m = [1, 1, 2, 5, 10, 30, 100][r.below(7) as usize];
            cmd.extend([s("TDIGEST.ADD"), s(k)]);
            cmd.extend((0..m).map(|_| value(&mut r, modes[ki])));
        } else if x < 53 {
            cmd.extend([s("TDIGEST.QUANTILE"), s(k)]);
            let m = 1 + r.below(6);
            cmd.extend((0..m).map(|_| fraction(&mut r)));
        } else if x < 60 {
            cmd.extend([s("TDIGEST.CDF"), s(k)]);
            let m = 1 + r.below(5);
            cmd.extend((0..m).map(|_| value(&mut r, modes[ki])));
        } else if x < 66 {
            cmd.extend([s(r.pick(&["TDIGEST.RANK", "TDIGEST.REVRANK"])), s(k)]);
            let m = 1 + r.below(5);
            cmd.extend((0..m).map(|_| value(&mut r, modes[ki])));
        } else if x < 72 {
            cmd.extend([s(r.pick(&["TDIGEST.BYRANK", "TDIGEST.BYREVRANK"])), s(k)]);
            let m = 1 + r.below(5);
            cmd.extend((0..m).map(|_| r.below(400).to_string()));
        } else if x < 76 {
            let lo = fraction(&mut r);
            let hi = fraction(&mut r);
            cmd.extend([s("TDIGEST.TRIMMED_MEAN"), s(k), lo, hi]);
        } else if x < 80 {
            cmd.extend([s(r.pick(&["TDIGEST.MIN", "TDIGEST.MAX"])), s(k)]);
        } else if x < 86 {
            cmd.extend([s("TDIGEST.INFO"), s(k)]);
        } else if x < 92 {
            let m = 1 + r.below(3);
            let sources: Vec<String> = (0..m).map(|_| s(KEYS[r.below(3) as usize])).collect();
            cmd.extend([s("TDIGEST.MERGE"), s(k), m.to_string()]);
            cmd.extend(sources);
            if r.below(10) < 3 {
                cmd.extend([s("COMPRESSION"), s(r.pick(&["3", "20", "100", "300"]))]);
            }
            if r.below(10) < 3 {
                cmd.push(s("OVERRIDE"));
            }
        } else if x < 94 {
            cmd.extend([s("TDIGEST.RESET"), s(k)]);
        } else if x < 98 {
            cmd.extend([s("DUMP"), s(k)]);
        } else {
            cmd.extend([s("DEL"), s(k)]);
        }
        cmds.push(cmd);
    }
    cmds
}

/// A reply as `resp.py` renders RESP2 (doubles are bulk strings there).
fn render(reply: &Reply) -> String {
    match reply {
        Reply::Simple(s) => format!("+{s}"),
        Reply::Error(e) => format!("-{e}"),
        Reply::Int(n) => format!("i:{n}"),
        Reply::Bool(b) => format!("i:{}", u8::from(*b)),
        Reply::Bulk(b) => format!("s:{}", String::from_utf8_lossy(b)),
        Reply::Double(v) => format!("s:{}", format_double(*v)),
        Reply::Nil => "nil".into(),
        Reply::NilArray => "nilarr".into(),
        Reply::Array(items) => {
            let parts: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", parts.join(","))
        }
        Reply::Map(pairs) => {
            let parts: Vec<String> = pairs
                .iter()
                .flat_map(|(k, v)| [render(k), render(v)])
                .collect();
            format!("[{}]", parts.join(","))
        }
    }
}

/// Runs one command: a dialect command through the harness; DUMP and DEL as Redis does them
/// (DUMP changes a t-digest as RedisBloom's save does, then is compared by length and the
/// CRC64 of its value).
fn run(h: &mut Harness, cmd: &[String]) -> String {
    let key = cmd[1].as_bytes();
    match cmd[0].as_str() {
        "DUMP" => match h.keys.get_mut(key) {
            None => "nil".into(),
            Some(value) => {
                value.prepare_save();
                let p = dump_payload(value);
                // The value's bytes: the footer's RDB version is the host's.
                let body = crc64(0, &p[..p.len() - 10]);
                format!("dump:{}:{body:016x}", p.len())
            }
        },
        "DEL" => format!("i:{}", u8::from(h.keys.remove(key).is_some())),
        _ => {
            let args: Vec<Vec<u8>> = cmd.iter().map(|a| a.as_bytes().to_vec()).collect();
            render(&h.run_args(&args))
        }
    }
}

#[test]
fn random_sequences_answer_as_redisbloom_8_bit_for_bit() {
    let fixture = include_str!("../../../tests/fixtures/tdigest/redisbloom8-replies.txt");
    let mut expected = fixture.lines().filter(|l| !l.starts_with('#')).peekable();
    let mut seeds = 0;
    let mut compared = 0;
    while expected.peek().is_some() {
        let seed = seeds;
        let mut h = Harness::new();
        for cmd in generate(seed, 150) {
            let line = expected.next().expect("a recorded reply per command");
            let mut fields = line.splitn(3, '\t');
            let (s, what, want) = (
                fields.next().unwrap(),
                fields.next().unwrap(),
                fields.next().unwrap(),
            );
            assert_eq!(s, seed.to_string(), "fixture out of step at {line}");
            assert_eq!(
                what,
                format!("{} {} {}", cmd[0], cmd[1], cmd.len()),
                "generator out of step with gen.py"
            );
            let got = run(&mut h, &cmd);
            // Doubles too, digit for digit: format_double writes Redis 8's Grisu2 digits.
            assert_eq!(got, want, "seed {seed}: {}", cmd.join(" "));
            compared += 1;
        }
        seeds += 1;
    }
    assert!(compared >= 1500, "{compared} replies compared");
}
