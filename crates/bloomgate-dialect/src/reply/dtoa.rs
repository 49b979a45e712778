//! The digits and text Redis 8 gives a double that is not an integer (its `fpconv_dtoa`): Grisu2
//! (Loitsch, "Printing floating-point numbers quickly and accurately with integers", 2010) with
//! 64-bit significands and a table of cached powers of ten, then Redis' layout of the digits.
//!
//! Grisu2 picks digits inside the double's rounding interval (so the text reads back to the
//! same double) but not always the shortest such digits, and it ends on a digit by comparing
//! scaled integers, so where two last digits are equally close it can pick the other one than
//! a correctly rounding printer does: 206146988113828.125 is `206146988113828.12` here, where
//! Rust's `{}` writes `206146988113828.13`. Every step below keeps the same integer widths,
//! truncations and wrapping arithmetic, so the digits are Redis' for every double.

/// A value `f × 2^e` with a 64-bit significand.
#[derive(Clone, Copy, Debug)]
struct Fp {
    f: u64,
    e: i32,
}

const FRAC_MASK: u64 = 0x000F_FFFF_FFFF_FFFF;
const EXP_MASK: u64 = 0x7FF0_0000_0000_0000;
const HIDDEN_BIT: u64 = 0x0010_0000_0000_0000;
/// The exponent bias with the 52 fraction bits counted in: a double is `f × 2^(exp - BIAS)`.
const EXP_BIAS: i32 = 1023 + 52;

/// Powers of ten, `10^0` to `10^19`.
const TENS: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 19;
    while i > 0 {
        t[i - 1] = t[i] * 10;
        i -= 1;
    }
    t
};

/// The exponent of ten of `CACHED_POWERS[0]`.
const FIRST_POWER: i32 = -348;
/// The step between consecutive exponents of ten in `CACHED_POWERS`.
const POWER_STEP: i32 = 8;
/// The window the cached power is chosen to put the product's binary exponent in.
const ALPHA: i32 = -60;
const GAMMA: i32 = -32;

/// `10^(FIRST_POWER + POWER_STEP × i)` as `(f, e)`: `f × 2^e` with `2^63 ≤ f < 2^64`, `f`
/// rounded to the nearest (the test `cached_powers_are_the_nearest_64_bit_values` checks each).
const CACHED_POWERS: [(u64, i32); 87] = [
    (0xfa8fd5a0081c0288, -1220),
    (0xbaaee17fa23ebf76, -1193),
    (0x8b16fb203055ac76, -1166),
    (0xcf42894a5dce35ea, -1140),
    (0x9a6bb0aa55653b2d, -1113),
    (0xe61acf033d1a45df, -1087),
    (0xab70fe17c79ac6ca, -1060),
    (0xff77b1fcbebcdc4f, -1034),
    (0xbe5691ef416bd60c, -1007),
    (0x8dd01fad907ffc3c, -980),
    (0xd3515c2831559a83, -954),
    (0x9d71ac8fada6c9b5, -927),
    (0xea9c227723ee8bcb, -901),
    (0xaecc49914078536d, -874),
    (0x823c12795db6ce57, -847),
    (0xc21094364dfb5637, -821),
    (0x9096ea6f3848984f, -794),
    (0xd77485cb25823ac7, -768),
    (0xa086cfcd97bf97f4, -741),
    (0xef340a98172aace5, -715),
    (0xb23867fb2a35b28e, -688),
    (0x84c8d4dfd2c63f3b, -661),
    (0xc5dd44271ad3cdba, -635),
    (0x936b9fcebb25c996, -608),
    (0xdbac6c247d62a584, -582),
    (0xa3ab66580d5fdaf6, -555),
    (0xf3e2f893dec3f126, -529),
    (0xb5b5ada8aaff80b8, -502),
    (0x87625f056c7c4a8b, -475),
    (0xc9bcff6034c13053, -449),
    (0x964e858c91ba2655, -422),
    (0xdff9772470297ebd, -396),
    (0xa6dfbd9fb8e5b88f, -369),
    (0xf8a95fcf88747d94, -343),
    (0xb94470938fa89bcf, -316),
    (0x8a08f0f8bf0f156b, -289),
    (0xcdb02555653131b6, -263),
    (0x993fe2c6d07b7fac, -236),
    (0xe45c10c42a2b3b06, -210),
    (0xaa242499697392d3, -183),
    (0xfd87b5f28300ca0e, -157),
    (0xbce5086492111aeb, -130),
    (0x8cbccc096f5088cc, -103),
    (0xd1b71758e219652c, -77),
    (0x9c40000000000000, -50),
    (0xe8d4a51000000000, -24),
    (0xad78ebc5ac620000, 3),
    (0x813f3978f8940984, 30),
    (0xc097ce7bc90715b3, 56),
    (0x8f7e32ce7bea5c70, 83),
    (0xd5d238a4abe98068, 109),
    (0x9f4f2726179a2245, 136),
    (0xed63a231d4c4fb27, 162),
    (0xb0de65388cc8ada8, 189),
    (0x83c7088e1aab65db, 216),
    (0xc45d1df942711d9a, 242),
    (0x924d692ca61be758, 269),
    (0xda01ee641a708dea, 295),
    (0xa26da3999aef774a, 322),
    (0xf209787bb47d6b85, 348),
    (0xb454e4a179dd1877, 375),
    (0x865b86925b9bc5c2, 402),
    (0xc83553c5c8965d3d, 428),
    (0x952ab45cfa97a0b3, 455),
    (0xde469fbd99a05fe3, 481),
    (0xa59bc234db398c25, 508),
    (0xf6c69a72a3989f5c, 534),
    (0xb7dcbf5354e9bece, 561),
    (0x88fcf317f22241e2, 588),
    (0xcc20ce9bd35c78a5, 614),
    (0x98165af37b2153df, 641),
    (0xe2a0b5dc971f303a, 667),
    (0xa8d9d1535ce3b396, 694),
    (0xfb9b7cd9a4a7443c, 720),
    (0xbb764c4ca7a44410, 747),
    (0x8bab8eefb6409c1a, 774),
    (0xd01fef10a657842c, 800),
    (0x9b10a4e5e9913129, 827),
    (0xe7109bfba19c0c9d, 853),
    (0xac2820d9623bf429, 880),
    (0x80444b5e7aa7cf85, 907),
    (0xbf21e44003acdd2d, 933),
    (0x8e679c2f5e44ff8f, 960),
    (0xd433179d9c8cb841, 986),
    (0x9e19db92b4e31ba9, 1013),
    (0xeb96bf6ebadf77d9, 1039),
    (0xaf87023b9bf0ee6b, 1066),
];

/// Appends a finite, non-zero double's text as Redis 8's `fpconv_dtoa` writes it: its sign, then
/// its Grisu2 digits laid out plain (`123.456`, `0.00001`, `123456789012345680000`) or in
/// scientific notation (`1.2345e-4`, `1e+22`).
pub(super) fn write(v: f64, out: &mut String) {
    debug_assert!(v.is_finite() && v != 0.0);
    let negative = v.is_sign_negative();
    if negative {
        out.push('-');
    }
    let mut digits = [0u8; 24];
    let (n, k) = grisu2(v, &mut digits);
    emit(&digits[..n], k, negative, out);
}

/// The significand and exponent of a finite double, subnormals with the smallest exponent.
fn decompose(v: f64) -> Fp {
    let bits = v.to_bits();
    let frac = bits & FRAC_MASK;
    let exp = ((bits & EXP_MASK) >> 52) as i32;
    if exp != 0 {
        Fp {
            f: frac + HIDDEN_BIT,
            e: exp - EXP_BIAS,
        }
    } else {
        Fp {
            f: frac,
            e: 1 - EXP_BIAS,
        }
    }
}

/// Shifts `w` left until its top bit is set.
fn normalize(mut w: Fp) -> Fp {
    while w.f & HIDDEN_BIT == 0 {
        w.f <<= 1;
        w.e -= 1;
    }
    w.f <<= 11;
    w.e -= 11;
    w
}

/// The boundaries of `w`'s rounding interval (halfway to its neighbours, the lower one nearer
/// when `w` is a power of two), normalized to the upper one's exponent: `(lower, upper)`.
fn boundaries(w: Fp) -> (Fp, Fp) {
    let mut upper = Fp {
        f: (w.f << 1) + 1,
        e: w.e - 1,
    };
    while upper.f & (HIDDEN_BIT << 1) == 0 {
        upper.f <<= 1;
        upper.e -= 1;
    }
    upper.f <<= 10;
    upper.e -= 10;
    let shift = if w.f == HIDDEN_BIT { 2 } else { 1 };
    let lower = Fp {
        f: ((w.f << shift) - 1) << (w.e - shift - upper.e),
        e: upper.e,
    };
    (lower, upper)
}

/// The cached power of ten that brings a value with binary exponent `e` into the
/// `ALPHA..=GAMMA` window, and its decimal exponent. The first guess comes from a double
/// estimate of `log10(2)`, truncated as C truncates; which of two fitting entries is taken
/// depends on it, so it is kept as it is.
fn cached_power(e: i32) -> (Fp, i32) {
    const LOG10_2: f64 = 0.301_029_995_663_981_14;
    let approx = (f64::from(-(e + CACHED_POWERS.len() as i32)) * LOG10_2) as i32;
    let mut idx = (approx - FIRST_POWER) / POWER_STEP;
    loop {
        let clamped = idx.clamp(0, CACHED_POWERS.len() as i32 - 1);
        let (f, pe) = CACHED_POWERS[clamped as usize];
        let current = e + pe + 64;
        if current < ALPHA && clamped < CACHED_POWERS.len() as i32 - 1 {
            idx = clamped + 1;
        } else if current > GAMMA && clamped > 0 {
            idx = clamped - 1;
        } else {
            return (Fp { f, e: pe }, FIRST_POWER + clamped * POWER_STEP);
        }
    }
}

/// `a × b` rounded to the upper 64 bits of the product (halves up).
fn multiply(a: Fp, b: Fp) -> Fp {
    const LO: u64 = 0xFFFF_FFFF;
    let ah_bl = (a.f >> 32) * (b.f & LO);
    let al_bh = (a.f & LO) * (b.f >> 32);
    let al_bl = (a.f & LO) * (b.f & LO);
    let ah_bh = (a.f >> 32) * (b.f >> 32);
    let tmp = (ah_bl & LO) + (al_bh & LO) + (al_bl >> 32) + (1 << 31);
    Fp {
        f: ah_bh + (ah_bl >> 32) + (al_bh >> 32) + (tmp >> 32),
        e: a.e + b.e + 64,
    }
}

/// Grisu2's digits of a finite, non-zero double into `digits`: how many, and the decimal
/// exponent of the last one (the value is `digits × 10^k`).
fn grisu2(v: f64, digits: &mut [u8; 24]) -> (usize, i32) {
    let w = decompose(v);
    let (lower, upper) = boundaries(w);
    let w = normalize(w);
    let (power, k) = cached_power(upper.e);
    let w = multiply(w, power);
    let mut upper = multiply(upper, power);
    let mut lower = multiply(lower, power);
    lower.f = lower.f.wrapping_add(1);
    upper.f = upper.f.wrapping_sub(1);
    generate_digits(w, upper, lower, digits, -k)
}

/// Cuts digits from the (scaled) upper boundary until what is left is within the interval,
/// then moves the last digit down towards `w` while that stays inside and gets closer.
fn generate_digits(w: Fp, upper: Fp, lower: Fp, digits: &mut [u8; 24], mut k: i32) -> (usize, i32) {
    let wfrac = upper.f.wrapping_sub(w.f);
    let mut delta = upper.f.wrapping_sub(lower.f);
    let shift = (-upper.e) as u32;
    let one = 1u64 << shift;
    let mut part1 = upper.f >> shift;
    let mut part2 = upper.f & (one - 1);
    let mut n = 0;
    let mut kappa = 10;
    // The integral part, from the 10^9 digit down.
    for &div in &TENS[10..] {
        let digit = part1 / div;
        if digit != 0 || n != 0 {
            digits[n] = b'0' + digit as u8;
            n += 1;
        }
        part1 -= digit * div;
        kappa -= 1;
        let rest = (part1 << shift).wrapping_add(part2);
        if rest <= delta {
            k += kappa;
            round_digit(&mut digits[..n], delta, rest, div << shift, wfrac);
            return (n, k);
        }
    }
    // The fraction, one digit at a time; the interval's width grows tenfold with each.
    for unit in TENS[..19].iter().rev() {
        part2 = part2.wrapping_mul(10);
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let digit = part2 >> shift;
        if (digit != 0 || n != 0) && n < digits.len() {
            digits[n] = b'0' + digit as u8;
            n += 1;
        }
        part2 &= one - 1;
        if part2 < delta {
            k += kappa;
            round_digit(
                &mut digits[..n],
                delta,
                part2,
                one,
                wfrac.wrapping_mul(*unit),
            );
            return (n, k);
        }
    }
    // Not reached: the interval is wider than one unit of the 17th significant digit.
    (n, k + kappa)
}

/// Lowers the last digit while the result stays inside the interval (`rem + step ≤ delta`)
/// and gets closer to the value (`frac` is the distance from the upper boundary to it).
fn round_digit(digits: &mut [u8], delta: u64, mut rem: u64, step: u64, frac: u64) {
    let Some(last) = digits.last_mut() else {
        return;
    };
    while rem < frac
        && delta.wrapping_sub(rem) >= step
        && (rem.wrapping_add(step) < frac
            || frac.wrapping_sub(rem) > rem.wrapping_add(step).wrapping_sub(frac))
    {
        *last = last.wrapping_sub(1);
        rem = rem.wrapping_add(step);
    }
}

/// Redis' layout of `digits × 10^k`: plain digits and zeros when the exponent is small, a
/// decimal point inside or after `0.` when it is negative and small, else scientific notation
/// (`d.ddde+X`, at most 18 digits, 17 after a minus sign).
fn emit(digits: &[u8], k: i32, negative: bool, out: &mut String) {
    let n = digits.len() as i32;
    let exp = (k + n - 1).abs();
    if k >= 0 && exp < n + 7 {
        push_digits(out, digits);
        out.extend(std::iter::repeat_n('0', k as usize));
    } else if k < 0 && (k > -7 || exp < 4) {
        let point = n + k;
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            push_digits(out, digits);
        } else {
            push_digits(out, &digits[..point as usize]);
            out.push('.');
            push_digits(out, &digits[point as usize..]);
        }
    } else {
        let kept = n.min(18 - i32::from(negative));
        push_digits(out, &digits[..1]);
        if kept > 1 {
            out.push('.');
            push_digits(out, &digits[1..kept as usize]);
        }
        out.push('e');
        // The sign is taken with the kept digits, the magnitude with all of them (as Redis).
        out.push(if k + kept - 1 < 0 { '-' } else { '+' });
        out.push_str(&exp.to_string());
    }
}

/// Appends ASCII digits.
fn push_digits(out: &mut String, digits: &[u8]) {
    out.extend(digits.iter().map(|&d| char::from(d)));
}

#[cfg(test)]
mod tests {
    use super::{grisu2, CACHED_POWERS, FIRST_POWER, POWER_STEP};

    /// A little-endian unsigned big integer, enough to check the table exactly.
    #[derive(Clone)]
    struct Big(Vec<u32>);

    impl Big {
        fn from(v: u64) -> Big {
            Big(vec![v as u32, (v >> 32) as u32]).trimmed()
        }
        fn trimmed(mut self) -> Big {
            while self.0.last() == Some(&0) {
                self.0.pop();
            }
            self
        }
        fn mul_small(&self, m: u32) -> Big {
            let mut carry = 0u64;
            let mut out = Vec::with_capacity(self.0.len() + 1);
            for &limb in &self.0 {
                let x = u64::from(limb) * u64::from(m) + carry;
                out.push(x as u32);
                carry = x >> 32;
            }
            out.push(carry as u32);
            Big(out).trimmed()
        }
        fn pow10(p: u32) -> Big {
            (0..p).fold(Big::from(1), |b, _| b.mul_small(10))
        }
        fn shl(&self, bits: u32) -> Big {
            (0..bits).fold(self.clone(), |b, _| b.mul_small(2))
        }
        /// `|self - other|`.
        fn diff(&self, other: &Big) -> Big {
            let (a, b) = if self.cmp_value(other).is_ge() {
                (self, other)
            } else {
                (other, self)
            };
            let mut out = Vec::with_capacity(a.0.len());
            let mut borrow = 0i64;
            for i in 0..a.0.len() {
                let x = i64::from(a.0[i]) - i64::from(*b.0.get(i).unwrap_or(&0)) - borrow;
                borrow = i64::from(x < 0);
                out.push((x + (borrow << 32)) as u32);
            }
            Big(out).trimmed()
        }

        fn cmp_value(&self, other: &Big) -> std::cmp::Ordering {
            self.0
                .len()
                .cmp(&other.0.len())
                .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
        }
    }

    /// Each cached power `f × 2^e` of `10^k` has its top bit set and is within half a unit of
    /// `f`'s last place of `10^k`: `|f·2^e − 10^k| < 2^(e−1)`, checked in integers after
    /// multiplying by `10^max(0,−k) · 2^S`.
    #[test]
    fn cached_powers_are_the_nearest_64_bit_values() {
        const S: i32 = 1300;
        for (i, &(f, e)) in CACHED_POWERS.iter().enumerate() {
            let k = FIRST_POWER + POWER_STEP * i as i32;
            assert!(f >> 63 == 1, "10^{k} is not normalized");
            let m = Big::pow10((-k).max(0) as u32);
            let scaled = {
                let mut x = Big::from(f);
                for _ in 0..(-k).max(0) {
                    x = x.mul_small(10);
                }
                x.shl((e + S) as u32)
            };
            let exact = Big::pow10(k.max(0) as u32).shl(S as u32);
            let half_unit = m.shl((e - 1 + S) as u32);
            let error = scaled.diff(&exact);
            assert_eq!(
                error.cmp_value(&half_unit),
                std::cmp::Ordering::Less,
                "10^{k} is not the nearest"
            );
        }
        assert_eq!(
            FIRST_POWER + POWER_STEP * (CACHED_POWERS.len() as i32 - 1),
            340
        );
    }

    fn digits_of(v: f64) -> (String, i32) {
        let mut d = [0u8; 24];
        let (n, k) = grisu2(v, &mut d);
        (String::from_utf8(d[..n].to_vec()).unwrap(), k)
    }

    /// Grisu2's digits where they are known to differ from the shortest correctly rounded ones.
    #[test]
    fn grisu2_digits_of_known_cases() {
        assert_eq!(
            digits_of(206_146_988_113_828.0 + 0.125),
            ("20614698811382812".into(), -2)
        );
        assert_eq!(digits_of(0.1), ("1".into(), -1));
        assert_eq!(digits_of(5e-324), ("5".into(), -324));
        assert_eq!(digits_of(f64::MAX), ("17976931348623157".into(), 292));
    }

    /// Every binary exponent (subnormals included) finds a cached power and gives at most 17
    /// digits that read back to the same double.
    #[test]
    fn every_exponent_reads_back() {
        let mut bits = 1u64;
        while bits < 0x7FF0_0000_0000_0000 {
            for v in [
                bits,
                bits | 1,
                bits | 0x000F_FFFF_FFFF_FFFF,
                bits + 0x0008_0000_0000_0000,
            ] {
                let x = f64::from_bits(v);
                if !x.is_finite() {
                    continue;
                }
                let (digits, k) = digits_of(x);
                assert!(digits.len() <= 17, "{x:e}: {digits}");
                let back: f64 = format!("{digits}e{k}").parse().unwrap();
                assert_eq!(back, x, "{x:e}: {digits}e{k}");
            }
            bits = if bits < (1 << 52) {
                bits << 1
            } else {
                bits + (1 << 52)
            };
        }
    }
}
