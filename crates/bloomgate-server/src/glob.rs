//! Glob patterns exactly as Redis matches them (`stringmatchlen` in its `util.c`), for KEYS,
//! SCAN MATCH, CONFIG GET and ACL key patterns.
//!
//! The rules, including the corners where Redis differs from shell globs:
//! - `*` matches any run of bytes, `?` any one byte; a pattern (even `*`) never matches an
//!   empty subject unless the pattern is empty too — KEYS and SCAN answer `*` without the
//!   matcher (see [`matches_all`]), which is how Redis returns an empty key for `KEYS *`.
//! - `[...]` is one byte out of a class; `[^...]` negates it; `\x` inside a class is the
//!   literal `x` (compared case-sensitively even under `nocase`); `a-z` is a range whenever a
//!   `-` follows a byte and one more byte follows it — including `]`, so `[a-]` is the range
//!   from `]` to `a` and has no closing bracket; reversed ranges are swapped; bytes compare as
//!   C's signed `char`, so `[\x00-\xff]` is the range −1..0.
//! - An unterminated class ends with the pattern: `[abc` is the class `abc`.
//! - `\x` outside a class is the literal `x`; a trailing lone `\` matches a `\`.
//! - `nocase` folds ASCII letters only (C's `tolower` in the C locale).
//! - Past 1000 nested stars the match fails (Redis' guard against abusive patterns), and a
//!   failed tail after a star stops every enclosing star from retrying, so the work stays
//!   polynomial.

/// Whether `text` matches `pattern` (Redis' `stringmatchlen`); `nocase` as CONFIG GET uses it.
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let mut give_up = false;
    Matcher { pattern, nocase }.run(0, text, &mut give_up, 0)
}

/// Whether KEYS or SCAN MATCH with `pattern` lists every key without matching: Redis
/// short-circuits exactly the one-byte pattern `*` (so it also lists the empty key, which
/// the matcher itself would not).
pub fn matches_all(pattern: &[u8]) -> bool {
    pattern == b"*"
}

struct Matcher<'a> {
    pattern: &'a [u8],
    nocase: bool,
}

impl Matcher<'_> {
    /// The pattern byte at `i`, or 0 past its end (Redis reads the string's terminator there).
    fn at(&self, i: usize) -> u8 {
        self.pattern.get(i).copied().unwrap_or(0)
    }

    fn fold(&self, b: u8) -> u8 {
        if self.nocase {
            b.to_ascii_lowercase()
        } else {
            b
        }
    }

    /// Matches `pattern[p..]` against `text`.
    fn run(&self, mut p: usize, mut text: &[u8], give_up: &mut bool, depth: u32) -> bool {
        if depth > 1000 {
            return false;
        }
        let end = self.pattern.len();
        while p < end && !text.is_empty() {
            match self.pattern[p] {
                b'*' => {
                    while p + 1 < end && self.pattern[p + 1] == b'*' {
                        p += 1;
                    }
                    if p + 1 == end {
                        return true;
                    }
                    while !text.is_empty() {
                        if self.run(p + 1, text, give_up, depth + 1) {
                            return true;
                        }
                        if *give_up {
                            return false;
                        }
                        text = &text[1..];
                    }
                    *give_up = true;
                    return false;
                }
                b'?' => text = &text[1..],
                b'[' => {
                    p += 1;
                    let negate = self.at(p) == b'^';
                    if negate {
                        p += 1;
                    }
                    let c = text[0];
                    let mut hit = false;
                    loop {
                        let left = end.saturating_sub(p);
                        if self.at(p) == b'\\' && left >= 2 {
                            p += 1;
                            hit |= self.pattern[p] == c;
                        } else if self.at(p) == b']' {
                            break;
                        } else if left == 0 {
                            // Unterminated: the class ends with the pattern.
                            p -= 1;
                            break;
                        } else if left >= 3 && self.pattern[p + 1] == b'-' {
                            let (mut lo, mut hi) =
                                (signed(self.pattern[p]), signed(self.pattern[p + 2]));
                            if lo > hi {
                                std::mem::swap(&mut lo, &mut hi);
                            }
                            let mut x = signed(c);
                            if self.nocase {
                                lo = lower(lo);
                                hi = lower(hi);
                                x = lower(x);
                            }
                            hit |= (lo..=hi).contains(&x);
                            p += 2;
                        } else {
                            hit |= self.fold(self.pattern[p]) == self.fold(c);
                        }
                        p += 1;
                    }
                    if hit == negate {
                        return false;
                    }
                    text = &text[1..];
                }
                b => {
                    let b = if b == b'\\' && end - p >= 2 {
                        p += 1;
                        self.pattern[p]
                    } else {
                        b
                    };
                    if self.fold(b) != self.fold(text[0]) {
                        return false;
                    }
                    text = &text[1..];
                }
            }
            p += 1;
            if text.is_empty() {
                while self.at(p) == b'*' {
                    p += 1;
                }
                break;
            }
        }
        p >= end && text.is_empty()
    }
}

/// A byte as C's (signed) `char` on the platforms Redis ships for.
fn signed(b: u8) -> i32 {
    i32::from(b as i8)
}

/// C's `tolower` in the C locale: ASCII letters only.
fn lower(c: i32) -> i32 {
    if (i32::from(b'A')..=i32::from(b'Z')).contains(&c) {
        c + 32
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;

    #[test]
    fn documented_forms() {
        // Redis' KEYS documentation.
        for (p, yes, no) in [
            ("h?llo", &["hello", "hallo", "hxllo"][..], &["hllo"][..]),
            ("h*llo", &["hllo", "heeeello"], &["hllx"]),
            ("h[ae]llo", &["hello", "hallo"], &["hillo"]),
            ("h[^e]llo", &["hallo", "hbllo"], &["hello"]),
            ("h[a-b]llo", &["hallo", "hbllo"], &["hcllo"]),
            ("h\\*llo", &["h*llo"], &["hello"]),
        ] {
            for y in yes {
                assert!(m(p.as_bytes(), y.as_bytes(), false), "{p} {y}");
            }
            for n in no {
                assert!(!m(p.as_bytes(), n.as_bytes(), false), "{p} {n}");
            }
        }
    }

    #[test]
    fn corners() {
        assert!(
            !m(b"*", b"", false),
            "only KEYS' short-circuit lists the empty key"
        );
        assert!(m(b"", b"", false));
        assert!(m(b"a*", b"a", false));
        // `[a-]` is the range `]`..`a`, unterminated.
        assert!(m(b"[a-]", b"_", false));
        assert!(!m(b"[a-]", b"-", false));
        assert!(m(b"h[a-]llo", b"h^", false) && m(b"h[a-]llo", b"hl", false));
        assert!(!m(b"h[a-]llo", b"hallo", false));
        assert!(m(b"[abc", b"b", false));
        assert!(m(b"[^", b"x", false));
        assert!(m(b"\\", b"\\", false));
        assert!(m(b"[\\]]", b"]", false));
        assert!(m(b"[z-a]", b"q", false));
        assert!(
            !m(b"[\x00-\xff]", b"\x80", false),
            "signed char range -1..0"
        );
        assert!(m(b"BF-[A-Z]*", b"bf-error-rate", true));
        assert!(!m(b"BF-[A-Z]*", b"bf-error-rate", false));
        assert!(
            !m(b"[\\A]", b"a", true),
            "escapes in a class are case-sensitive"
        );
        let long = [b'a'; 64];
        let mut pat = b"a*".repeat(30);
        pat.push(b'b');
        assert!(!m(&pat, &long, false), "polynomial, and no match");
        let deep = b"*a".repeat(1100);
        assert!(
            !m(&deep, &[b'a'; 1100], false),
            "past 1000 nested stars: no match"
        );
    }
}
