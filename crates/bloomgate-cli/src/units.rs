//! Parsing of human-friendly numbers on the command line: probabilities as `0.01`, `1%` or
//! `1/1000`; counts as `1000000`, `1e6` or `1_000_000`; bit sizes as `8388608`, `64MiB` or `1GB`
//! (byte suffixes are converted to bits). Byte counts are printed with the core's
//! `bloomgate::memory::human_bytes`.

use anyhow::{bail, Context, Result};

/// A false-positive probability: `0.01`, `1%`, `1/1000`.
pub fn parse_probability(text: &str) -> Result<f64> {
    let t = text.trim();
    let p = if let Some((num, den)) = t.split_once('/') {
        let num: f64 = num
            .trim()
            .parse()
            .with_context(|| format!("bad probability {text:?}"))?;
        let den: f64 = den
            .trim()
            .parse()
            .with_context(|| format!("bad probability {text:?}"))?;
        num / den
    } else if let Some(pct) = t.strip_suffix('%') {
        pct.trim()
            .parse::<f64>()
            .with_context(|| format!("bad probability {text:?}"))?
            / 100.0
    } else {
        t.parse()
            .with_context(|| format!("bad probability {text:?}"))?
    };
    if !(p > 0.0 && p < 1.0) {
        bail!("probability {text:?} must be strictly between 0 and 1");
    }
    Ok(p)
}

/// A whole count: `1000000`, `1_000_000`, `1e6`, `10M` (decimal K/M/G/T suffixes).
pub fn parse_count(text: &str) -> Result<u64> {
    let t = text.trim().replace('_', "");
    let (digits, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G' | 'b' | 'B') => (&t[..t.len() - 1], 1e9),
        Some('t' | 'T') => (&t[..t.len() - 1], 1e12),
        _ => (t.as_str(), 1.0),
    };
    if let Ok(n) = digits.parse::<u64>() {
        return n
            .checked_mul(scale as u64)
            .with_context(|| format!("count {text:?} is too large"));
    }
    let value: f64 = digits
        .parse()
        .with_context(|| format!("bad count {text:?}"))?;
    let value = value * scale;
    if !(value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= u64::MAX as f64) {
        bail!("count {text:?} must be a whole, non-negative number");
    }
    Ok(value as u64)
}

/// A size in bits: a plain number is bits; a byte suffix (`B`, `KB`, `KiB`, `MB`, `MiB`, ...)
/// means bytes and is converted to bits.
pub fn parse_bits(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number
        .trim()
        .replace('_', "")
        .parse()
        .with_context(|| format!("bad size {text:?}"))?;
    let bytes_per_unit: Option<f64> = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "bit" | "bits" => None,
        "b" => Some(1.0),
        "kb" => Some(1e3),
        "mb" => Some(1e6),
        "gb" => Some(1e9),
        "tb" => Some(1e12),
        "kib" | "k" => Some(1024.0),
        "mib" | "m" => Some(1024.0 * 1024.0),
        "gib" | "g" => Some(1024.0 * 1024.0 * 1024.0),
        "tib" | "t" => Some(1024f64.powi(4)),
        other => bail!(
            "unknown size unit {other:?} in {text:?} (use bits, B, KiB, MiB, GiB, KB, MB, GB)"
        ),
    };
    let bits = match bytes_per_unit {
        Some(b) => number * b * 8.0,
        None => number,
    };
    if !(bits.is_finite() && bits >= 1.0 && bits <= u64::MAX as f64) {
        bail!("size {text:?} is out of range");
    }
    Ok(bits.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("0.01").unwrap(), 0.01);
        assert_eq!(parse_probability("1/1000").unwrap(), 0.001);
        assert_eq!(parse_probability("1%").unwrap(), 0.01);
        for bad in ["0", "1", "-0.1", "NaN", "x", "1/0", "2/1"] {
            assert!(parse_probability(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("1000000").unwrap(), 1_000_000);
        assert_eq!(parse_count("1_000").unwrap(), 1000);
        assert_eq!(parse_count("1e6").unwrap(), 1_000_000);
        assert_eq!(parse_count("10M").unwrap(), 10_000_000);
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("-3").is_err());
        assert!(parse_count("1e30").is_err());
    }

    #[test]
    fn bit_sizes() {
        assert_eq!(parse_bits("1024").unwrap(), 1024);
        assert_eq!(parse_bits("64MiB").unwrap(), 64 * 1024 * 1024 * 8);
        assert_eq!(parse_bits("1KB").unwrap(), 8000);
        assert!(parse_bits("12 furlongs").is_err());
        assert!(parse_bits("0").is_err());
    }
}
