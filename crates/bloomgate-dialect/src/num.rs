//! Number parsing as Redis and RedisBloom read command arguments, so edge cases (signs, leading
//! zeros, spaces, NaN) are accepted or refused exactly as they are there.

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

/// Redis' `string2d`-like double parsing: no surrounding spaces, no NaN.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| !v.is_nan())
}

/// Case-insensitive ASCII comparison of an argument with an option name.
pub fn is(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}
