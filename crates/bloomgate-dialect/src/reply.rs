//! The reply values commands produce, independent of how a host sends them: the server encodes
//! them as RESP2/RESP3 bytes, the module through Redis' reply API. Shapes that differ between
//! protocol versions (booleans, maps, nulls) are kept distinct so each host can render them.

/// One reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// A status line such as `OK`.
    Simple(String),
    /// Full error line without the leading `-` (e.g. `ERR not found`).
    Error(String),
    /// An integer.
    Int(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// Null bulk (`$-1` in RESP2, `_` in RESP3).
    Nil,
    /// Null array (`*-1` in RESP2, `_` in RESP3): an aborted EXEC.
    NilArray,
    /// An array of replies.
    Array(Vec<Reply>),
    /// Key/value pairs: a map in RESP3, a flat array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A boolean in RESP3, integer 0/1 in RESP2.
    Bool(bool),
    /// A double in RESP3, a bulk string in RESP2 (both as [`format_double`] writes it).
    Double(f64),
}

/// A double as Redis (7.2 and later) writes it in replies: `nan`, `inf`, `-inf`, `0`, `-0`;
/// otherwise the shortest digits that read back as the same value, written as a plain
/// integer while the exponent is below the digit count plus 7, as a plain decimal for
/// exponents from -7 (or up to 3 below the point), and otherwise in scientific notation
/// with at least one exponent digit (`1.5e+19`, `1.2345e-6`).
///
/// Redis finds the digits with Grisu2, which for a few values emits more digits than the
/// shortest (`1e16` comes out as `10000000000000000`); those values are written differently
/// here. Inside Redis (the module) Redis formats the double itself.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    let sign = if d.is_sign_negative() { "-" } else { "" };
    if d.is_infinite() {
        return format!("{sign}inf");
    }
    if d == 0.0 {
        return format!("{sign}0");
    }
    // `{:e}` gives the shortest round-trip digits: d.ddde[-]x.
    let sci = format!("{:e}", d.abs());
    let (mantissa, exponent) = sci.split_once('e').expect("scientific notation");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i32 = exponent.parse().expect("an exponent");
    let n = digits.len() as i32;
    // The value is digits × 10^k.
    let k = exponent - (n - 1);
    let magnitude = exponent.abs();
    let body = if k >= 0 && magnitude < n + 7 {
        format!("{digits}{}", "0".repeat(k as usize))
    } else if k < 0 && (k > -7 || magnitude < 4) {
        let point = n + k;
        if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        }
    } else {
        let rest = if n > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{}{rest}e{exp_sign}{magnitude}", &digits[..1])
    };
    format!("{sign}{body}")
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Self {
        Reply::Simple("OK".into())
    }

    /// An error reply with the full text (prefix included).
    pub fn error(msg: impl Into<String>) -> Self {
        Reply::Error(msg.into())
    }

    /// A bulk string.
    pub fn bulk(data: impl Into<Vec<u8>>) -> Self {
        Reply::Bulk(data.into())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

#[cfg(test)]
mod tests {
    use super::format_double;

    /// What Redis 8.2 answers for `ZSCORE` of these values in RESP2.
    #[test]
    fn doubles_format_as_redis_writes_them() {
        for (value, text) in [
            (0.9, "0.9"),
            (1.0, "1"),
            (0.001, "0.001"),
            (1e-5, "0.00001"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.2345e-6, "1.2345e-6"),
            (-2.5e-7, "-2.5e-7"),
            (1e20, "1e+20"),
            (1.5e19, "1.5e+19"),
            (1.5e300, "1.5e+300"),
            (2.71, "2.71"),
            (123.456, "123.456"),
            (1234567.125, "1234567.125"),
            (0.12345678901234567, "0.12345678901234566"),
            (5e-324, "5e-324"),
            (100.0, "100"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(format_double(value), text, "{value:e}");
        }
    }
}
