//! Redis' glob patterns (KEYS, SCAN MATCH, CONFIG GET, ACL key patterns).

/// Redis glob matching (`*`, `?`, `[...]` with ranges and `^`, `\` escapes).
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut t) = (0, 0);
    let (mut star_p, mut star_t) = (None, 0);
    while t < text.len() {
        let mut matched = false;
        let mut next_p = p;
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star_p = Some(p);
                    star_t = t;
                    p += 1;
                    continue;
                }
                b'?' => {
                    matched = true;
                    next_p = p + 1;
                }
                b'[' => {
                    let mut i = p + 1;
                    let negate = pattern.get(i) == Some(&b'^');
                    if negate {
                        i += 1;
                    }
                    let mut hit = false;
                    while i < pattern.len() && pattern[i] != b']' {
                        if pattern[i] == b'\\' && i + 1 < pattern.len() {
                            hit |= eq(pattern[i + 1], text[t]);
                            i += 2;
                        } else if i + 2 < pattern.len()
                            && pattern[i + 1] == b'-'
                            && pattern[i + 2] != b']'
                        {
                            let (lo, hi) = (
                                pattern[i].min(pattern[i + 2]),
                                pattern[i].max(pattern[i + 2]),
                            );
                            let c = if nocase {
                                text[t].to_ascii_lowercase()
                            } else {
                                text[t]
                            };
                            hit |= (lo..=hi).contains(&c) || (lo..=hi).contains(&text[t]);
                            i += 3;
                        } else {
                            hit |= eq(pattern[i], text[t]);
                            i += 1;
                        }
                    }
                    matched = hit != negate;
                    next_p = (i + 1).min(pattern.len());
                }
                b'\\' if p + 1 < pattern.len() => {
                    matched = eq(pattern[p + 1], text[t]);
                    next_p = p + 2;
                }
                c => {
                    matched = eq(c, text[t]);
                    next_p = p + 1;
                }
            }
        }
        if matched {
            p = next_p;
            t += 1;
        } else if let Some(sp) = star_p {
            p = sp + 1;
            star_t += 1;
            t = star_t;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob() {
        assert!(glob_match(b"bf-*", b"bf-error-rate", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"*", b"", false));
        assert!(!glob_match(b"a*b", b"acbd", false));
        assert!(glob_match(b"a\\*", b"a*", false));
        assert!(glob_match(b"MAXMEM*", b"maxmemory", true));
    }
}
