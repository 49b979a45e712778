//! Number parsing as Redis and RedisBloom read command arguments, so edge cases (signs, leading
//! zeros, spaces, NaN, hex floats, overflow) are accepted or refused exactly as they are there.

/// Redis' `string2ll`: optional `-`, digits, no `+`, no leading zeros, no spaces, in range.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(s).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || (digits == "0" && text.starts_with('-'))
    {
        return None;
    }
    text.parse().ok()
}

/// Redis' module double parsing (C `strtod` over the whole argument): no leading space, no
/// trailing garbage, no NaN, and a result that overflowed to ±infinity or underflowed to zero
/// is refused (`1e400`, `1e-400`), while `inf`, signs and C99 hex floats (`0x0.04p0`) are
/// accepted.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let (negative, unsigned) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let magnitude = if unsigned.len() > 2 && unsigned[..2].eq_ignore_ascii_case("0x") {
        parse_hex_float(&unsigned[2..])?
    } else {
        parse_decimal(unsigned)?
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// A decimal or `inf`/`infinity` magnitude (no sign), refusing what `strtod` reports as out of
/// range.
fn parse_decimal(s: &str) -> Option<f64> {
    if s.eq_ignore_ascii_case("inf") || s.eq_ignore_ascii_case("infinity") {
        return Some(f64::INFINITY);
    }
    // Rust also reads "nan" and "inf" spellings; only digits, '.', and an exponent reach here.
    if !s.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || b"eE.+-".contains(&b))
    {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    let mantissa = s.split(['e', 'E']).next().unwrap_or("");
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    if v.is_infinite() || (v == 0.0 && nonzero) {
        return None; // ERANGE
    }
    Some(v)
}

/// The part of a C99 hex float after `0x`: hex digits with an optional point, then an optional
/// binary exponent `p[+-]digits`.
fn parse_hex_float(s: &str) -> Option<f64> {
    let (body, exp) = match s.find(['p', 'P']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let digit = |c: char| c.to_digit(16);
    let mut mantissa = 0f64;
    for c in int.chars() {
        mantissa = mantissa * 16.0 + f64::from(digit(c)?);
    }
    let mut scale = 1f64;
    for c in frac.chars() {
        scale /= 16.0;
        mantissa += f64::from(digit(c)?) * scale;
    }
    let exponent: i32 = match exp {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            e.parse::<i64>().ok()?.clamp(-100_000, 100_000) as i32
        }
    };
    let v = mantissa * 2f64.powi(exponent);
    if v.is_infinite() || (v == 0.0 && mantissa != 0.0) {
        return None; // ERANGE
    }
    Some(v)
}

/// Case-insensitive ASCII comparison of an argument with an option name.
pub fn is(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}

/// Parses Redis memory sizes: plain bytes or with b/k/kb/m/mb/g/gb (k = 1000, kb = 1024).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1024 * 1024,
        "g" => 1_000_000_000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_parse_as_strtod_does() {
        let p = |s: &str| parse_f64(s.as_bytes());
        assert_eq!(p("0.01"), Some(0.01));
        assert_eq!(p("+0.5"), Some(0.5));
        assert_eq!(p(".5"), Some(0.5));
        assert_eq!(p("1e-3"), Some(0.001));
        assert_eq!(p("0x1"), Some(1.0));
        assert_eq!(p("0x0.04p0"), Some(0.015625));
        assert_eq!(p("0X.8"), Some(0.5));
        assert_eq!(p("0x1p-3"), Some(0.125));
        assert_eq!(p("-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(
            p("1e-310").map(|v| v > 0.0),
            Some(true),
            "subnormal is kept"
        );
        for bad in [
            "",
            " 1",
            "1 ",
            "nan",
            "NaN",
            "1e400",
            "1e-400",
            "0x",
            "0xg",
            "1e",
            "abc",
            "0x1p",
            "0x1p99999",
            "+-1",
            "--1",
        ] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
    }
}
