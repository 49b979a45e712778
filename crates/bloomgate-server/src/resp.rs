//! RESP2/RESP3 wire format: the encoding of the dialect's reply values for either protocol
//! version, and an incremental request parser with Redis' limits (multibulk and inline forms).

use std::fmt::Write as _;

pub use bloomgate_dialect::num::parse_i64;
pub use bloomgate_dialect::Reply;

/// RESP encoding of a [`Reply`].
pub trait Encode {
    /// Appends the encoding of `self` for protocol `proto` (2 or 3).
    fn encode(&self, proto: u8, out: &mut Vec<u8>);
}

impl Encode for Reply {
    fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => line(out, b'+', s),
            Reply::Error(s) => line(out, b'-', s),
            Reply::Int(n) => number(out, b':', *n),
            Reply::Bulk(data) => bulk(out, data),
            Reply::Nil if proto >= 3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if proto >= 3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                number(out, b'*', items.len() as i64);
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if proto >= 3 {
                    number(out, b'%', pairs.len() as i64);
                } else {
                    number(out, b'*', pairs.len() as i64 * 2);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Bool(b) if proto >= 3 => {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" })
            }
            Reply::Bool(b) => line(out, b':', if *b { "1" } else { "0" }),
            Reply::Double(d) if proto >= 3 => {
                line(out, b',', &bloomgate_dialect::reply::format_double(*d))
            }
            Reply::Double(d) => bulk(out, bloomgate_dialect::reply::format_double(*d).as_bytes()),
        }
    }
}

/// A command as RESP (a multibulk of bulk strings), as clients send it and the log stores it.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A], out: &mut Vec<u8>) {
    number(out, b'*', args.len() as i64);
    for arg in args {
        bulk(out, arg.as_ref());
    }
}

fn bulk(out: &mut Vec<u8>, data: &[u8]) {
    number(out, b'$', data.len() as i64);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// `prefix`, the decimal digits of `n`, CRLF, formatted without allocating.
fn number(out: &mut Vec<u8>, prefix: u8, n: i64) {
    out.push(prefix);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn line(out: &mut Vec<u8>, prefix: u8, body: &str) {
    out.push(prefix);
    // Error and status lines must not contain CR/LF (Redis replaces them with spaces).
    out.extend(
        body.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Redis' `proto-max-bulk-len` default.
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Redis' limit on a multibulk count (`INT_MAX`); far above the 1,048,576 clients rely on.
pub const MAX_MULTIBULK_LEN: i64 = i32::MAX as i64;
/// An inline command or a `*`/`$` header line without CRLF beyond this is refused
/// (Redis' PROTO_INLINE_MAX_SIZE).
pub const MAX_INLINE_LEN: usize = 64 * 1024;
/// Redis' `client-query-buffer-limit` default: one command may not buffer more than 1 GiB.
pub const MAX_QUERY_BUFFER: usize = 1024 * 1024 * 1024;
/// Before AUTH a command may have at most this many arguments (Redis 7)...
pub const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
/// ...each at most this long, so a client without the password cannot make the server buffer
/// more than about 160 KiB.
pub const UNAUTHENTICATED_MAX_BULK: usize = 16 * 1024;

/// A protocol violation: reply `-ERR Protocol error: <msg>` and close the connection.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    /// The `-ERR Protocol error: …` reply sent before closing the connection.
    pub fn reply(&self) -> Reply {
        Reply::Error(format!("ERR Protocol error: {}", self.0))
    }
}

/// Incremental request parser. Feed bytes in with [`Self::extend`], then call
/// [`Self::next_command`] until it returns `Ok(None)`. Parsed bulk arguments are moved out as
/// they complete, so a command split across many reads is never re-parsed from the start.
/// A command handed back with [`Self::recycle`] lends its buffers to the next one, so a
/// connection sending small commands parses them without allocating (as Redis reuses argv).
#[derive(Default)]
pub struct RequestParser {
    buf: Vec<u8>,
    pos: usize,
    /// Multibulk in progress: (declared count, arguments so far, pending bulk length).
    pending: Option<(usize, Vec<Vec<u8>>, Option<usize>)>,
    /// Bytes held by completed arguments of the pending command (query buffer limit).
    pending_bytes: usize,
    /// The client has not authenticated: Redis' pre-AUTH limits apply.
    unauthenticated: bool,
    /// Buffers of recycled commands: an argument list, and emptied small arguments.
    spare_args: Vec<Vec<u8>>,
    spare_bytes: Vec<Vec<u8>>,
}

/// Recycled argument buffers kept per connection: at most this many...
const SPARE_ARGS: usize = 16;
/// ...of at most this capacity each (4 KiB per connection at most).
const SPARE_ARG_CAPACITY: usize = 256;

impl RequestParser {
    /// Appends received bytes.
    pub fn extend(&mut self, data: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Takes back a command returned by [`Self::next_command`] once it has run, to reuse its
    /// buffers for the next one.
    pub fn recycle(&mut self, mut args: Vec<Vec<u8>>) {
        for mut arg in args.drain(..) {
            if self.spare_bytes.len() < SPARE_ARGS && arg.capacity() <= SPARE_ARG_CAPACITY {
                arg.clear();
                self.spare_bytes.push(arg);
            }
        }
        if args.capacity() <= SPARE_ARGS {
            self.spare_args = args;
        }
    }

    /// Whether the pre-AUTH limits apply to the commands parsed from now on.
    pub fn set_unauthenticated(&mut self, unauthenticated: bool) {
        self.unauthenticated = unauthenticated;
    }

    /// Number of bytes a next read should at least try to fill (to read big bulks efficiently).
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Next complete command, `Ok(None)` if more bytes are needed. Empty inline lines are skipped.
    pub fn next_command(&mut self) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        loop {
            let result = if self.pending.is_some() {
                self.continue_multibulk()
            } else {
                match self.buf.get(self.pos) {
                    None => Ok(None),
                    Some(b'*') => self.start_multibulk(),
                    Some(_) => self.inline(),
                }
            };
            self.compact();
            match result {
                Ok(Some(args)) if args.is_empty() => continue,
                other => return other,
            }
        }
    }

    fn compact(&mut self) {
        if self.pos > 0 && (self.pos == self.buf.len() || self.pos > 1 << 20) {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// Reads a CRLF-terminated line starting at `pos`; `None` if incomplete. A line is refused
    /// when more than `MAX_INLINE_LEN` bytes precede its `\n`, whether or not the `\n` has
    /// arrived yet, so the same bytes parse the same however they are split across reads (the
    /// `resp_parser` fuzz target checks this). Only that much is ever scanned.
    fn read_line(&mut self, too_long: &str) -> Result<Option<&[u8]>, ProtocolError> {
        let rest = &self.buf[self.pos..];
        let window = &rest[..rest.len().min(MAX_INLINE_LEN + 1)];
        match window.iter().position(|&b| b == b'\n') {
            Some(nl) => {
                let line_end = if nl > 0 && rest[nl - 1] == b'\r' {
                    nl - 1
                } else {
                    nl
                };
                let start = self.pos;
                self.pos += nl + 1;
                Ok(Some(&self.buf[start..start + line_end]))
            }
            None if rest.len() > MAX_INLINE_LEN => Err(ProtocolError(too_long.into())),
            None => Ok(None),
        }
    }

    fn inline(&mut self) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        let Some(line) = self.read_line("too big inline request")? else {
            return Ok(None);
        };
        crate::inline::split_args(line)
            .map(Some)
            .ok_or_else(|| ProtocolError("unbalanced quotes in request".into()))
    }

    fn start_multibulk(&mut self) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        let save = self.pos;
        let Some(line) = self.read_line("too big mbulk count string")? else {
            return Ok(None);
        };
        let count = parse_i64(&line[1..]).filter(|&n| n <= MAX_MULTIBULK_LEN);
        let Some(count) = count else {
            self.pos = save;
            return Err(ProtocolError("invalid multibulk length".into()));
        };
        if self.unauthenticated && count > UNAUTHENTICATED_MAX_ARGS {
            return Err(ProtocolError("unauthenticated multibulk length".into()));
        }
        if count <= 0 {
            return Ok(Some(Vec::new()));
        }
        let count = count as usize;
        // Never trust the declared count for allocation.
        let mut args = std::mem::take(&mut self.spare_args);
        args.reserve(count.min(1024));
        self.pending = Some((count, args, None));
        self.pending_bytes = 0;
        self.continue_multibulk()
    }

    fn continue_multibulk(&mut self) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        loop {
            let (count, args, bulk_len) = self.pending.as_mut().expect("pending multibulk");
            if args.len() == *count {
                let (_, args, _) = self.pending.take().expect("pending multibulk");
                return Ok(Some(args));
            }
            match *bulk_len {
                None => {
                    let Some(&first) = self.buf.get(self.pos) else {
                        return Ok(None);
                    };
                    if first != b'$' {
                        return Err(ProtocolError(format!(
                            "expected '$', got '{}'",
                            char::from(first)
                        )));
                    }
                    let Some(line) = self.read_line("too big bulk count string")? else {
                        return Ok(None);
                    };
                    let len = parse_i64(&line[1..])
                        .filter(|&n| n >= 0 && n as usize <= MAX_BULK_LEN)
                        .ok_or_else(|| ProtocolError("invalid bulk length".into()))?;
                    let len = len as usize;
                    if self.unauthenticated && len > UNAUTHENTICATED_MAX_BULK {
                        return Err(ProtocolError("unauthenticated bulk length".into()));
                    }
                    if self.pending_bytes + len > MAX_QUERY_BUFFER {
                        return Err(ProtocolError("query buffer limit exceeded".into()));
                    }
                    self.pending.as_mut().expect("pending").2 = Some(len);
                }
                Some(len) => {
                    if self.buf.len() - self.pos < len + 2 {
                        // Grow towards the declared size in steps: a client that declares
                        // 512 MiB and sends nothing must not reserve it.
                        let missing = len + 2 - (self.buf.len() - self.pos);
                        self.buf.reserve(missing.min(1 << 20));
                        return Ok(None);
                    }
                    if &self.buf[self.pos + len..self.pos + len + 2] != b"\r\n" {
                        return Err(ProtocolError("expected CRLF after bulk string".into()));
                    }
                    let bytes = &self.buf[self.pos..self.pos + len];
                    let data = match self.spare_bytes.pop() {
                        Some(mut spare) => {
                            spare.extend_from_slice(bytes);
                            spare
                        }
                        None => bytes.to_vec(),
                    };
                    self.pos += len + 2;
                    self.pending_bytes += len + 32;
                    if self.pending_bytes > MAX_QUERY_BUFFER {
                        return Err(ProtocolError("query buffer limit exceeded".into()));
                    }
                    let (_, args, bulk_len) = self.pending.as_mut().expect("pending");
                    args.push(data);
                    *bulk_len = None;
                }
            }
        }
    }
}

/// Renders a reply as redis-cli-like text (used in tests and logs).
pub fn describe(reply: &Reply) -> String {
    let mut s = String::new();
    match reply {
        Reply::Simple(v) => s.push_str(v),
        Reply::Error(v) => {
            let _ = write!(s, "(error) {v}");
        }
        Reply::Int(n) => {
            let _ = write!(s, "(integer) {n}");
        }
        Reply::Bulk(b) => s.push_str(&String::from_utf8_lossy(b)),
        Reply::Nil | Reply::NilArray => s.push_str("(nil)"),
        Reply::Bool(b) => s.push_str(if *b { "(true)" } else { "(false)" }),
        Reply::Double(d) => {
            let _ = write!(
                s,
                "(double) {}",
                bloomgate_dialect::reply::format_double(*d)
            );
        }
        Reply::Array(items) => {
            let parts: Vec<String> = items.iter().map(describe).collect();
            let _ = write!(s, "[{}]", parts.join(", "));
        }
        Reply::Map(pairs) => {
            let parts: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}: {}", describe(k), describe(v)))
                .collect();
            let _ = write!(s, "{{{}}}", parts.join(", "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut p = RequestParser::default();
        p.extend(input);
        let mut out = Vec::new();
        while let Some(cmd) = p.next_command()? {
            out.push(cmd);
        }
        Ok(out)
    }

    /// Integers are formatted without `to_string`: the extremes and signs still come out right,
    /// and a command encodes exactly as the equivalent array of bulk strings.
    #[test]
    fn numbers_and_commands_encode_as_resp() {
        for n in [0, 7, -7, 10, 1_000_000, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            Reply::Int(n).encode(2, &mut out);
            assert_eq!(out, format!(":{n}\r\n").into_bytes());
        }
        let args = vec![b"BF.ADD".to_vec(), Vec::new(), vec![b'x'; 300]];
        let mut direct = Vec::new();
        encode_command(&args, &mut direct);
        let mut via_reply = Vec::new();
        Reply::Array(args.iter().cloned().map(Reply::Bulk).collect()).encode(2, &mut via_reply);
        assert_eq!(direct, via_reply);
        assert_eq!(parse_all(&direct).unwrap(), vec![args]);
    }

    /// Recycled buffers never leak into the next command, and big ones are not kept.
    #[test]
    fn recycled_commands_parse_the_same() {
        let mut p = RequestParser::default();
        let big = vec![b'b'; 10_000];
        let mut input = b"*3\r\n$6\r\nBF.ADD\r\n$3\r\nkey\r\n$5\r\nhello\r\n".to_vec();
        encode_command(&[b"SET".to_vec(), b"k".to_vec(), big.clone()], &mut input);
        input.extend_from_slice(b"*2\r\n$4\r\nECHO\r\n$1\r\nx\r\nPING\r\n");
        p.extend(&input);
        let mut seen = Vec::new();
        while let Some(cmd) = p.next_command().unwrap() {
            seen.push(cmd.clone());
            p.recycle(cmd);
        }
        assert_eq!(
            seen,
            vec![
                vec![b"BF.ADD".to_vec(), b"key".to_vec(), b"hello".to_vec()],
                vec![b"SET".to_vec(), b"k".to_vec(), big],
                vec![b"ECHO".to_vec(), b"x".to_vec()],
                vec![b"PING".to_vec()],
            ]
        );
        assert!(p.spare_bytes.len() <= SPARE_ARGS);
        assert!(p
            .spare_bytes
            .iter()
            .all(|b| b.is_empty() && b.capacity() <= SPARE_ARG_CAPACITY));
    }

    #[test]
    fn multibulk_split_across_reads() {
        let input = b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n";
        let mut p = RequestParser::default();
        let mut cmds = Vec::new();
        for byte in input {
            p.extend(&[*byte]);
            while let Some(cmd) = p.next_command().unwrap() {
                cmds.push(cmd);
            }
        }
        assert_eq!(
            cmds,
            vec![
                vec![b"BF.ADD".to_vec(), b"k".to_vec(), b"hello".to_vec()],
                vec![b"PING".to_vec()]
            ]
        );
    }

    #[test]
    fn inline_commands_with_quotes() {
        let cmds = parse_all(b"PING\r\n\r\nset \"a b\\x41\" 'c\\'d'\n").unwrap();
        assert_eq!(
            cmds,
            vec![
                vec![b"PING".to_vec()],
                vec![b"set".to_vec(), b"a bA".to_vec(), b"c'd".to_vec()]
            ]
        );
        assert_eq!(
            parse_all(b"ECHO \"abc\r\n").unwrap_err().reply(),
            Reply::error("ERR Protocol error: unbalanced quotes in request")
        );
    }

    #[test]
    fn limits_are_protocol_errors() {
        let too_big = format!("*1\r\n${}\r\n", MAX_BULK_LEN + 1);
        assert_eq!(
            parse_all(too_big.as_bytes()).unwrap_err().0,
            "invalid bulk length"
        );
        assert_eq!(
            parse_all(b"*1\r\n$-5\r\n").unwrap_err().0,
            "invalid bulk length"
        );
        assert_eq!(
            parse_all(b"*abc\r\n").unwrap_err().0,
            "invalid multibulk length"
        );
        assert_eq!(
            parse_all(b"*1\r\n:5\r\n").unwrap_err().0,
            "expected '$', got ':'"
        );
        let long_inline = vec![b'a'; MAX_INLINE_LEN + 1];
        assert_eq!(
            parse_all(&long_inline).unwrap_err().0,
            "too big inline request"
        );
        // A declared 512 MiB bulk is accepted (and waits for data) without allocating it.
        let mut p = RequestParser::default();
        p.extend(format!("*2\r\n$4\r\nECHO\r\n${MAX_BULK_LEN}\r\n").as_bytes());
        assert_eq!(p.next_command().unwrap(), None);
    }

    #[test]
    fn bulk_must_end_with_crlf() {
        assert_eq!(
            parse_all(b"*1\r\n$4\r\nPINGxx").unwrap_err().0,
            "expected CRLF after bulk string"
        );
        assert_eq!(parse_all(b"*1\r\n$4\r\nPING\r\n").unwrap().len(), 1);
    }

    #[test]
    fn limits_before_auth() {
        let mut p = RequestParser::default();
        p.set_unauthenticated(true);
        p.extend(b"*11\r\n");
        assert_eq!(
            p.next_command().unwrap_err().0,
            "unauthenticated multibulk length"
        );
        let mut p = RequestParser::default();
        p.set_unauthenticated(true);
        p.extend(format!("*2\r\n$4\r\nAUTH\r\n${}\r\n", 16 * 1024 + 1).as_bytes());
        assert_eq!(
            p.next_command().unwrap_err().0,
            "unauthenticated bulk length"
        );
        // The same command is fine once authenticated, and 10 short arguments are fine before.
        let mut p = RequestParser::default();
        p.extend(format!("*2\r\n$4\r\nECHO\r\n${}\r\n", 16 * 1024 + 1).as_bytes());
        assert_eq!(p.next_command().unwrap(), None);
        let mut p = RequestParser::default();
        p.set_unauthenticated(true);
        p.extend(b"*10\r\n");
        for _ in 0..10 {
            p.extend(b"$1\r\nx\r\n");
        }
        assert_eq!(p.next_command().unwrap().unwrap().len(), 10);
    }

    #[test]
    fn million_arguments() {
        let n = 1_048_576;
        let mut input = format!("*{}\r\n$7\r\nBF.MADD\r\n", n + 1).into_bytes();
        input.extend_from_slice(b"$1\r\nk\r\n");
        for _ in 0..n - 1 {
            input.extend_from_slice(b"$1\r\nx\r\n");
        }
        let cmds = parse_all(&input).unwrap();
        assert_eq!(cmds[0].len(), n + 1);
    }

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        for bad in [
            &b"+1"[..],
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"",
            b"-",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn encodes_both_protocols() {
        let reply = Reply::Array(vec![
            Reply::Bool(true),
            Reply::Nil,
            Reply::Map(vec![(Reply::Simple("Size".into()), Reply::Int(240))]),
        ]);
        let mut v2 = Vec::new();
        reply.encode(2, &mut v2);
        assert_eq!(v2, b"*3\r\n:1\r\n$-1\r\n*2\r\n+Size\r\n:240\r\n");
        let mut v3 = Vec::new();
        reply.encode(3, &mut v3);
        assert_eq!(v3, b"*3\r\n#t\r\n_\r\n%1\r\n+Size\r\n:240\r\n");
    }
}
