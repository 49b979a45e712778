//! One Prometheus exposition path for every bloomgate process: the server (`bloomgate serve`)
//! and the gate (and its demo) render their metrics with [`Exposition`] and answer scrapes with
//! [`spawn`], instead of each hand-writing the text format and an HTTP responder.
//!
//! Std only, no async runtime: a scrape is a small, rare request, so the listener is one
//! background thread answering connections in turn, each bounded by read/write timeouts.
//! Where to bind (loopback, protected mode) is the caller's decision.
#![deny(missing_docs)]

use std::fmt::{Display, Write as _};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one scrape connection may take to send its request head or receive the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The content type of text exposition format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only ever goes up (restarts aside).
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Observations in buckets, with their count and sum.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Builds one exposition text (format 0.0.4).
#[derive(Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// An empty text.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a family: its `# HELP` line (every family has one: `promtool check metrics` in CI
    /// refuses a family without) and its `# TYPE` line.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        debug_assert!(!help.is_empty(), "metric family {name} has no HELP text");
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
    }

    /// One sample line, with label values escaped as the format requires.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, text)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"");
                for c in text.chars() {
                    match c {
                        '\\' => self.out.push_str("\\\\"),
                        '"' => self.out.push_str("\\\""),
                        '\n' => self.out.push_str("\\n"),
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A family of one unlabelled counter.
    pub fn counter(&mut self, name: &str, help: &str, value: impl Display) {
        self.family(name, Kind::Counter, help);
        self.sample(name, &[], value);
    }

    /// A family of one unlabelled gauge.
    pub fn gauge(&mut self, name: &str, help: &str, value: impl Display) {
        self.family(name, Kind::Gauge, help);
        self.sample(name, &[], value);
    }

    /// Cumulative `le` samples of `name`: `counts[i]` observations fell in bucket `bounds[i]`
    /// (not cumulative), and the `+Inf` bucket reads `total`.
    pub fn le_buckets(&mut self, name: &str, bounds: &[f64], counts: &[u64], total: u64) {
        let mut cumulative = 0;
        for (bound, count) in bounds.iter().zip(counts) {
            cumulative += count;
            self.sample(name, &[("le", &bound.to_string())], cumulative);
        }
        self.sample(name, &[("le", "+Inf")], total);
    }

    /// A histogram family: per-bucket `counts` for `bounds` (observations above the last
    /// bound are in `count` only), the observation `count` and their `sum`.
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        bounds: &[f64],
        counts: &[u64],
        count: u64,
        sum: f64,
    ) {
        self.family(name, Kind::Histogram, help);
        self.le_buckets(&format!("{name}_bucket"), bounds, counts, count);
        self.sample(&format!("{name}_sum"), &[], sum);
        self.sample(&format!("{name}_count"), &[], count);
    }

    /// The text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// Answers `GET /metrics` on `listener` from a background thread for as long as the process
/// lives: 200 with `render()`'s text, 503 while `render` returns `None` (nothing to report
/// yet), 404 for anything else.
pub fn spawn(
    listener: TcpListener,
    render: impl Fn() -> Option<String> + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            // A failed accept (e.g. out of descriptors) skips that connection only.
            for stream in listener.incoming().flatten() {
                answer(stream, &render);
            }
        })
}

fn answer(mut stream: TcpStream, render: &impl Fn() -> Option<String>) {
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    // Read the request head (bounded); the content does not depend on it.
    let mut request = [0u8; 4096];
    let n = stream.read(&mut request).unwrap_or(0);
    let head = &request[..n];
    let wanted = head.starts_with(b"GET /metrics ") || head.starts_with(b"GET /metrics?");
    let (status, body) = match wanted.then(render) {
        Some(Some(text)) => ("200 OK", text),
        Some(None) => (
            "503 Service Unavailable",
            "nothing to report yet\n".to_owned(),
        ),
        None => ("404 Not Found", "try /metrics\n".to_owned()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families_histograms_and_escaped_labels() {
        let mut e = Exposition::new();
        e.counter("a_total", "Things.", 3u64);
        e.gauge("b", "Level.", 0.5);
        e.family("c_total", Kind::Counter, "Calls \\ lines\nnext.");
        e.sample("c_total", &[("cmd", "x\"y\\z\n")], 1u64);
        e.histogram("d_seconds", "Time.", &[0.1, 1.0], &[2, 1], 4, 2.5);
        assert_eq!(
            e.finish(),
            "# HELP a_total Things.\n# TYPE a_total counter\na_total 3\n\
             # HELP b Level.\n# TYPE b gauge\nb 0.5\n\
             # HELP c_total Calls \\\\ lines\\nnext.\n# TYPE c_total counter\nc_total{cmd=\"x\\\"y\\\\z\\n\"} 1\n\
             # HELP d_seconds Time.\n# TYPE d_seconds histogram\n\
             d_seconds_bucket{le=\"0.1\"} 2\nd_seconds_bucket{le=\"1\"} 3\n\
             d_seconds_bucket{le=\"+Inf\"} 4\nd_seconds_sum 2.5\nd_seconds_count 4\n"
        );
    }

    fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        reply
    }

    #[test]
    fn listener_answers_metrics_404_and_503() {
        let ready = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let flag = ready.clone();
        spawn(listener, move || {
            flag.load(std::sync::atomic::Ordering::SeqCst)
                .then(|| "x 1\n".to_owned())
        })
        .unwrap();
        let reply = get(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(reply.starts_with("HTTP/1.1 503 "), "{reply}");
        ready.store(true, std::sync::atomic::Ordering::SeqCst);
        let reply = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(reply.contains("Content-Type: text/plain; version=0.0.4\r\n"));
        assert!(reply.ends_with("\r\n\r\nx 1\n"), "{reply}");
        let reply = get(addr, "GET /other HTTP/1.0\r\n\r\n");
        assert!(reply.starts_with("HTTP/1.1 404 "), "{reply}");
        let reply = get(addr, "GET /metricsx HTTP/1.0\r\n\r\n");
        assert!(reply.starts_with("HTTP/1.1 404 "), "{reply}");
    }
}
