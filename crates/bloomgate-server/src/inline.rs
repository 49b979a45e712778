//! Splitting an inline command line into arguments exactly as Redis does (`sdssplitargs` in its
//! `sds.c`, which `processInlineBuffer` calls on the line without its `\r\n`).
//!
//! The rules, including the corners where Redis differs from a shell:
//! - Words are separated by runs of C `isspace` bytes (space, `\t`, `\n`, `\v`, `\f`, `\r`),
//!   but inside an unquoted word only space, `\t`, `\n` and `\r` end it: `a\x0cb` is one word
//!   (the form feed is part of it), while a `\v` or `\f` *between* words is skipped.
//! - A quote may start anywhere in a word and the quoted part joins the word: `a"b c"` is the
//!   one word `ab c`. A closing quote must be followed by an `isspace` byte or the end of the
//!   line (`"a"\x0bb` is two words), else the line is refused.
//! - In "double quotes": `\xHH` (two hex digits) is that byte; `\n \r \t \b \a` are the
//!   control bytes; `\` before any other byte is that byte.
//! - In 'single quotes' only `\'` is an escape.
//! - A NUL byte ends the line as C sees it: outside quotes the rest is ignored, inside quotes
//!   the line is refused. (Redis itself never gets this far with a NUL: it looks for the
//!   `\n` with `strchr`, which stops at the NUL, and waits for more bytes.)

/// The line's words, or `None` when Redis answers "unbalanced quotes in request".
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Bytes past the end read as the C string's terminator.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    // A closing quote must be followed by a space or the end of the line.
    let closes = |next: u8| (next == 0 || is_space(next)).then_some(());
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while at(i) != 0 && is_space(at(i)) {
            i += 1;
        }
        if at(i) == 0 {
            return Some(args);
        }
        let mut word = Vec::new();
        let mut quote = None;
        let mut done = false;
        while !done {
            let c = at(i);
            match quote {
                Some(b'"') => match c {
                    b'\\'
                        if at(i + 1) == b'x'
                            && hex(at(i + 2)).is_some()
                            && hex(at(i + 3)).is_some() =>
                    {
                        word.push(hex(at(i + 2))? * 16 + hex(at(i + 3))?);
                        i += 3;
                    }
                    b'\\' if at(i + 1) != 0 => {
                        i += 1;
                        word.push(match at(i) {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    b'"' => {
                        closes(at(i + 1))?;
                        done = true;
                    }
                    0 => return None,
                    _ => word.push(c),
                },
                Some(_) => match c {
                    b'\\' if at(i + 1) == b'\'' => {
                        i += 1;
                        word.push(b'\'');
                    }
                    b'\'' => {
                        closes(at(i + 1))?;
                        done = true;
                    }
                    0 => return None,
                    _ => word.push(c),
                },
                None => match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' | b'\'' => quote = Some(c),
                    _ => word.push(c),
                },
            }
            if c != 0 {
                i += 1;
            }
        }
        args.push(word);
    }
}

/// C's `isspace` in the C locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::split_args;

    fn words(line: &[u8]) -> Option<Vec<String>> {
        split_args(line).map(|w| {
            w.into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect()
        })
    }

    #[test]
    fn redis_corners() {
        assert_eq!(words(b"a\x0cb").unwrap(), ["a\x0cb"]);
        assert_eq!(words(b"\"a\"\x0bb").unwrap(), ["a", "b"]);
        assert_eq!(words(b"a\"b c\"").unwrap(), ["ab c"]);
        assert_eq!(words(b"\x0b a \x0c b\x0b").unwrap(), ["a", "b\x0b"]);
        assert_eq!(words(b"\"a\"b"), None);
        assert_eq!(words(b"'a'b"), None);
        assert_eq!(words(b"\"abc"), None);
        assert_eq!(words(b"\"\\x41\\x4g\\n\\q\""), Some(vec!["Ax4g\nq".into()]));
        assert_eq!(
            words(b"'it\\'s' \"\""),
            Some(vec!["it's".into(), "".into()])
        );
        assert_eq!(words(b"a\0b c").unwrap(), ["a"]);
        assert_eq!(words(b"\"a\0\""), None);
        assert_eq!(words(b"   ").unwrap(), Vec::<String>::new());
    }
}
