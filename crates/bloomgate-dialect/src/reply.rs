//! The reply values commands produce, independent of how a host sends them: the server encodes
//! them as RESP2/RESP3 bytes, the module through Redis' reply API. Shapes that differ between
//! protocol versions (booleans, maps, nulls) are kept distinct so each host can render them.

mod dtoa;

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
    /// A double: `,` in RESP3, a bulk string in RESP2, written as [`format_double`] does.
    Double(f64),
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

/// A double as Redis 8 writes it in a reply (`d2string`): `nan`, `inf`, `-inf`, `0` / `-0`,
/// integral values within ±2^62 as integers, else the digits Redis' `fpconv_dtoa` (Grisu2)
/// gives, which read back to the same double but are not always the shortest or the nearest
/// (`206146988113828.12` for 206146988113828.125), in plain notation when the exponent is small
/// (`0.00001`, `123.456`, `123456789012345680000`) and scientific otherwise (`1.2345e-4`,
/// `1e+22`).
pub fn format_double(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    const HALF: f64 = (i64::MAX / 2) as f64;
    if (-HALF..=HALF).contains(&v) && v.fract() == 0.0 {
        return (v as i64).to_string();
    }
    let mut out = String::with_capacity(24);
    dtoa::write(v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::format_double;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Grisu2's digits lie inside the double's rounding interval, so every finite double's
        /// text reads back to the same double, with at most 17 significant digits (integers
        /// within ±2^62 are written whole).
        #[test]
        fn every_finite_double_reads_back(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            let text = format_double(v);
            let back: f64 = text.parse().unwrap();
            prop_assert_eq!(back.to_bits(), v.to_bits(), "{} -> {}", v, text);
            prop_assume!(v.fract() != 0.0 || v.abs() > 2f64.powi(62));
            let mantissa = text.split('e').next().unwrap();
            let significant = mantissa.trim_start_matches(['-', '0', '.']).replace('.', "");
            prop_assert!(significant.trim_end_matches('0').len() <= 17, "{}", text);
        }
    }

    /// Each value as Redis 8.2 replies with it (RedisBloom's TDIGEST.MIN of a one-value digest).
    #[test]
    fn doubles_are_written_as_redis_8_writes_them() {
        for (v, text) in [
            (1e16, "10000000000000000"),
            (1e17, "100000000000000000"),
            (12345678901234567.0, "12345678901234568"),
            (1e-5, "0.00001"),
            (0.0001, "0.0001"),
            (0.00012345, "1.2345e-4"),
            (1e21, "1e+21"),
            (1e22, "1e+22"),
            (123.456, "123.456"),
            (-0.0, "-0"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (100.0, "100"),
            (1e15, "1000000000000000"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e300, "1e+300"),
            (0.1, "0.1"),
            (-3.0, "-3"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-f64::NAN, "nan"),
            // Redis 8.2's ZSCORE of these values.
            (0.9, "0.9"),
            (1.0, "1"),
            (0.001, "0.001"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.2345e-6, "1.2345e-6"),
            (-2.5e-7, "-2.5e-7"),
            (1e20, "1e+20"),
            (1.5e19, "1.5e+19"),
            (1.5e300, "1.5e+300"),
            (2.71, "2.71"),
            (1234567.125, "1234567.125"),
            (0.12345678901234567, "0.12345678901234566"),
            // Grisu2: a 17th digit where 16 suffice, a long plain integer where the shortest
            // digits would be one, an exact halfway case ended on the lower digit.
            (161.3018901404687, "161.30189014046871"),
            (1e23, "99999999999999990000000"),
            (8e23, "7.999999999999999e+23"),
            (206_146_988_113_828.0 + 0.125, "206146988113828.12"),
            (-206_146_988_113_828.0 - 0.125, "-206146988113828.12"),
        ] {
            assert_eq!(format_double(v), text, "{v:e}");
        }
    }
}
