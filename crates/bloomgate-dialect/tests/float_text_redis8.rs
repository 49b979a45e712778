//! Redis 8.2 itself as the oracle for the text of a double reply: a Lua script returns
//! `{double = tonumber(ARGV[i])}` for each argument, which Redis replies through
//! `addReplyDouble` (the function RedisBloom's TDIGEST and ZSCORE reply with), and each text
//! must be [`format_double`]'s. The argument is Rust's shortest round-trip text, which Lua's
//! `tonumber` (C's `strtod`) reads back to the same double, so Redis formats exactly the value
//! we do. About 20,000 doubles: random bit patterns, random decimals, exact halfway cases at
//! large magnitudes, subnormals, powers of ten and their neighbours, integers around 2^53 and
//! 2^62, and values from digest- and sketch-like arithmetic; half of them over RESP2 (bulk
//! strings), half over RESP3 (`,` doubles); a sample again through ZADD and ZSCORE, to show
//! the Lua route writes what a command's double reply does. Without a Redis 8 binary
//! (`bash scripts/ci/get_redis8.sh`) it goes through `skip_or_fail` (a failure under CI). A longer run:
//! `BLOOMGATE_FLOAT_FUZZ_RANDOM=2000000` random bit patterns instead of 5,000.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use bloomgate_dialect::reply::format_double;
use bloomgate_testkit::{redis8_server_binary, redis_server_at, temp_dir};

const SCRIPT: &str =
    "local t = {} for i = 1, #ARGV do t[i] = {double = tonumber(ARGV[i])} end return t";
const BATCH: usize = 500;

/// A connection that sends commands as RESP arrays and reads flat replies.
struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    fn send(&mut self, args: &[&[u8]]) {
        let out = bloomgate_testkit::resp_command(args);
        self.reader.get_mut().write_all(&out).unwrap();
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(line.ends_with("\r\n"), "short reply line {line:?}");
        line.truncate(line.len() - 2);
        line
    }

    /// Skips one reply of any shape (HELLO's map).
    fn skip(&mut self) {
        let line = self.line();
        let count = |l: &str| l[1..].parse::<usize>().unwrap();
        match line.as_bytes()[0] {
            b'*' | b'~' | b'>' => (0..count(&line)).for_each(|_| self.skip()),
            b'%' => (0..2 * count(&line)).for_each(|_| self.skip()),
            b'$' => {
                self.line();
            }
            b'-' => panic!("error reply: {line}"),
            _ => {}
        }
    }

    /// The texts of an array of doubles: bulk strings in RESP2, `,` lines in RESP3.
    fn doubles(&mut self) -> Vec<String> {
        let head = self.line();
        let n: usize = head
            .strip_prefix('*')
            .unwrap_or_else(|| panic!("not an array: {head}"))
            .parse()
            .unwrap();
        (0..n)
            .map(|_| {
                let line = self.line();
                match line.as_bytes()[0] {
                    b',' => line[1..].to_owned(),
                    b'$' => self.line(),
                    _ => panic!("not a double: {line}"),
                }
            })
            .collect()
    }
}

/// xorshift64*: the same values on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn sign(&mut self, v: f64) -> f64 {
        if self.next() & 1 == 0 {
            v
        } else {
            -v
        }
    }
}

/// The doubles to compare, each category's share of about 20,000.
fn cases() -> Vec<f64> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut v = Vec::new();
    // Random bit patterns of finite doubles (more with BLOOMGATE_FLOAT_FUZZ_RANDOM=N).
    let random: usize = std::env::var("BLOOMGATE_FLOAT_FUZZ_RANDOM")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5000);
    while v.len() < random {
        let x = f64::from_bits(rng.next());
        if x.is_finite() {
            v.push(x);
        }
    }
    // Random decimals: up to 17 significant digits, exponents from -30 to 30.
    for _ in 0..4000 {
        let digits = 1 + rng.below(17) as u32;
        let mantissa = rng.below(10u64.pow(digits));
        let exp = rng.below(61) as i64 - 30;
        v.push(rng.sign(format!("{mantissa}e{exp}").parse().unwrap()));
    }
    // Exact halfway cases (.5, .25, .125, .0625, .375, ...) at large magnitudes, where the last
    // kept digit is a tie: n + m / 2^b with n as large as the 53 bits allow.
    for _ in 0..3000 {
        let b = 1 + rng.below(6) as u32;
        let odd = 2 * rng.below(1 << (b - 1)) + 1;
        let top = 53 - b - rng.below(12) as u32;
        let n = (1 << (top - 1)) | rng.below(1 << (top - 1));
        v.push(rng.sign(n as f64 + odd as f64 / f64::from(1u32 << b)));
    }
    v.push(206_146_988_113_828.0 + 0.125);
    // Subnormals, the smallest normals, and their neighbours.
    for _ in 0..1000 {
        v.push(f64::from_bits(1 + rng.below((1 << 52) - 1)));
    }
    for bits in (0..64).map(|s| 1u64 << s).filter(|b| *b < (1 << 53)) {
        v.extend(
            [bits, bits + 1, bits - 1]
                .map(f64::from_bits)
                .iter()
                .filter(|x| **x != 0.0),
        );
    }
    // Powers of ten, written exactly and computed, and the doubles beside them.
    for e in -323..=308 {
        let p: f64 = format!("1e{e}").parse().unwrap();
        let computed = 10f64.powi(e);
        for x in [p, computed, next_up(p), next_down(p), 5.0 * p, 2.5 * p] {
            if x.is_finite() && x != 0.0 {
                v.push(x);
            }
        }
    }
    // Integers near 2^53, 2^62 (where Redis stops writing integers) and 2^63, 2^64.
    for base in [53, 62, 63, 64] {
        let p = 2f64.powi(base);
        let mut x = p;
        for _ in 0..100 {
            v.extend([x, -x]);
            x = next_up(x);
        }
        x = p;
        for _ in 0..100 {
            x = next_down(x);
            v.extend([x, -x]);
        }
    }
    // Digest- and sketch-like arithmetic: means, ratios, interpolated quantiles, rates.
    for _ in 0..3000 {
        let a = rng.unit() * 10f64.powi(rng.below(13) as i32 - 3);
        let b = a + rng.unit() * 10f64.powi(rng.below(10) as i32);
        let n = 1 + rng.below(100_000);
        let x = match rng.below(6) {
            0 => (a + b) / 2.0,
            1 => rng.below(n) as f64 / n as f64,
            2 => a + (b - a) * rng.unit(),
            3 => (a * n as f64 + b) / (n + 1) as f64,
            4 => (-(rng.unit().max(1e-300)).ln() / (n as f64)).sqrt(),
            _ => (b - a) / 3.0 * 1e-7,
        };
        v.push(rng.sign(x));
    }
    v.extend([
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
        0.1,
        0.2 + 0.1,
        1.0 / 3.0,
        2.0 / 3.0,
        -0.0,
        0.0,
    ]);
    v
}

fn next_up(x: f64) -> f64 {
    if x >= 0.0 {
        f64::from_bits(x.to_bits() + 1)
    } else {
        f64::from_bits(x.to_bits() - 1)
    }
}

fn next_down(x: f64) -> f64 {
    -next_up(-x)
}

#[test]
fn double_replies_are_redis_8_text() {
    let Some(binary) = redis8_server_binary("double_replies_are_redis_8_text") else {
        return;
    };
    let server = redis_server_at(&binary, &temp_dir("float-text"), |_| {})
        .unwrap_or_else(|log| panic!("Redis 8 did not start: {log}"));
    let mut resp2 = Conn::open(server.port);
    let mut resp3 = Conn::open(server.port);
    resp3.send(&[b"HELLO", b"3"]);
    resp3.skip();
    let cases = cases();
    assert!(cases.len() >= 20_000, "{} cases", cases.len());
    let mut differ = Vec::new();
    for (i, batch) in cases.chunks(BATCH).enumerate() {
        let args: Vec<String> = batch.iter().map(|x| format!("{x:e}")).collect();
        let mut command: Vec<&[u8]> = vec![b"EVAL", SCRIPT.as_bytes(), b"0"];
        command.extend(args.iter().map(|a| a.as_bytes()));
        let conn = if i % 2 == 0 { &mut resp2 } else { &mut resp3 };
        conn.send(&command);
        let texts = conn.doubles();
        assert_eq!(texts.len(), batch.len());
        for (x, text) in batch.iter().zip(texts) {
            let ours = format_double(*x);
            if ours != text {
                differ.push(format!("{x:e}: Redis 8 {text}, ours {ours}"));
            }
        }
    }
    // The route itself: ZSCORE, another addReplyDouble reply, agrees on a sample.
    let sample: Vec<f64> = cases
        .iter()
        .copied()
        .step_by(40)
        .filter(|x| *x != 0.0)
        .collect();
    let pairs: Vec<(String, String)> = sample
        .iter()
        .enumerate()
        .map(|(i, x)| (format!("{x:e}"), format!("m{i}")))
        .collect();
    let mut zadd: Vec<&[u8]> = vec![b"ZADD", b"z"];
    for (score, member) in &pairs {
        zadd.extend([score.as_bytes(), member.as_bytes()]);
    }
    resp2.send(&zadd);
    resp2.skip();
    for (_, member) in &pairs {
        resp2.send(&[b"ZSCORE", b"z", member.as_bytes()]);
    }
    for x in &sample {
        let head = resp2.line();
        assert!(head.starts_with('$'), "ZSCORE answered {head}");
        let text = resp2.line();
        let ours = format_double(*x);
        if ours != text {
            differ.push(format!("{x:e}: Redis 8 ZSCORE {text}, ours {ours}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} doubles differ, e.g.\n{}",
        differ.len(),
        cases.len(),
        differ[..differ.len().min(20)].join("\n")
    );
}
