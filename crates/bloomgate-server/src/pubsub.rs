//! Pub/sub: who listens to which channel or pattern, each subscriber's bounded [`Outbox`]
//! (Redis' `client-output-buffer-limit pubsub`: a subscriber that does not read is
//! disconnected, it never makes the server's memory grow without bound), the message frames
//! (RESP2 arrays, RESP3 push frames), and keyspace notifications (`notify-keyspace-events`,
//! [`Events`]). The registry lives in the store, under its lock; publishing encodes a frame and
//! appends it to each receiver's outbox, which its connection writes out.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::glob::glob_match;
use crate::lock::relock;

/// `client-output-buffer-limit` for pub/sub clients: disconnect at `hard` bytes pending, or
/// when more than `soft` bytes stayed pending for `soft_seconds`. 0 disables a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes.
    pub hard: u64,
    /// Bytes.
    pub soft: u64,
    /// Seconds.
    pub soft_seconds: u64,
}

impl Default for Limits {
    /// Redis' default: `pubsub 32mb 8mb 60`.
    fn default() -> Self {
        Self {
            hard: 32 << 20,
            soft: 8 << 20,
            soft_seconds: 60,
        }
    }
}

/// What a subscriber has not been sent yet.
#[derive(Debug, Default)]
struct Pending {
    /// Frames not yet taken by the connection.
    queued: Vec<u8>,
    /// Bytes queued or being written (what the limits count).
    bytes: u64,
    /// Since when more than the soft limit has been pending.
    over_soft_since: Option<Instant>,
    /// Over a limit: the connection closes and nothing more is queued.
    killed: bool,
}

/// One client's queue of frames published to it, written out by its connection.
#[derive(Debug, Default)]
pub struct Outbox {
    pending: Mutex<Pending>,
    /// Signalled when frames are queued or the client is to be disconnected.
    ready: Notify,
    /// The client's protocol version (frames are encoded for it).
    proto: AtomicU8,
}

impl Outbox {
    /// An empty outbox for a RESP2 client.
    pub fn new() -> Arc<Self> {
        let outbox = Self::default();
        outbox.proto.store(2, Ordering::Relaxed);
        Arc::new(outbox)
    }

    /// The protocol frames are encoded for.
    pub fn proto(&self) -> u8 {
        self.proto.load(Ordering::Relaxed)
    }

    /// Encodes frames for `proto` from now on.
    pub fn set_proto(&self, proto: u8) {
        self.proto.store(proto, Ordering::Relaxed);
    }

    /// Queues `frame` unless that takes the client over `limits` (then it is marked for
    /// disconnection, its queue dropped); false if the client is (now) disconnected.
    pub fn push(&self, frame: &[u8], limits: &Limits) -> bool {
        let mut p = relock(&self.pending);
        if p.killed {
            return false;
        }
        let bytes = p.bytes + frame.len() as u64;
        let over_soft = limits.soft > 0 && bytes > limits.soft;
        let since = over_soft.then(|| *p.over_soft_since.get_or_insert_with(Instant::now));
        let too_long = since.is_some_and(|s| {
            limits.soft_seconds == 0 || s.elapsed() >= Duration::from_secs(limits.soft_seconds)
        });
        if (limits.hard > 0 && bytes > limits.hard) || too_long {
            p.killed = true;
            p.queued = Vec::new();
            drop(p);
            self.ready.notify_one();
            return false;
        }
        if !over_soft {
            p.over_soft_since = None;
        }
        p.queued.extend_from_slice(frame);
        p.bytes = bytes;
        drop(p);
        self.ready.notify_one();
        true
    }

    /// Whether the client went over its limits.
    pub fn killed(&self) -> bool {
        relock(&self.pending).killed
    }

    /// Whether frames are queued.
    pub fn has_queued(&self) -> bool {
        !relock(&self.pending).queued.is_empty()
    }

    /// Takes the queued frames to write; they count against the limits until
    /// [`Outbox::written`].
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut relock(&self.pending).queued)
    }

    /// `n` taken bytes reached the socket.
    pub fn written(&self, n: usize) {
        let mut p = relock(&self.pending);
        p.bytes = p.bytes.saturating_sub(n as u64);
        if p.bytes == 0 {
            p.over_soft_since = None;
        }
    }

    /// Moves the queued frames to `out` (a reply batch being built): they no longer count.
    pub fn drain_into(&self, out: &mut Vec<u8>) {
        let mut p = relock(&self.pending);
        let taken = std::mem::take(&mut p.queued);
        p.bytes = p.bytes.saturating_sub(taken.len() as u64);
        drop(p);
        out.extend_from_slice(&taken);
    }

    /// Waits until frames are queued or the client is to be disconnected.
    pub async fn ready(&self) {
        self.ready.notified().await;
    }
}

/// A `message`/`pmessage`/`subscribe`… frame: a push frame in RESP3, an array in RESP2.
pub fn frame(proto: u8, parts: &[Part], out: &mut Vec<u8>) {
    out.push(if proto >= 3 { b'>' } else { b'*' });
    out.extend_from_slice(format!("{}\r\n", parts.len()).as_bytes());
    for part in parts {
        match part {
            Part::Bulk(b) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Part::Int(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
            Part::Nil if proto >= 3 => out.extend_from_slice(b"_\r\n"),
            Part::Nil => out.extend_from_slice(b"$-1\r\n"),
        }
    }
}

/// One element of a pub/sub frame.
#[derive(Clone, Copy, Debug)]
pub enum Part<'a> {
    /// A bulk string.
    Bulk(&'a [u8]),
    /// An integer.
    Int(i64),
    /// A null (UNSUBSCRIBE with no subscription left).
    Nil,
}

/// Pushes the frame of `parts` to each of `subs`, encoding it at most once per protocol;
/// returns how many took it (a subscriber over its limits is disconnected instead).
fn deliver<'a>(
    subs: impl IntoIterator<Item = &'a Subscriber>,
    parts: &[Part],
    limits: &Limits,
) -> usize {
    let mut encoded: [Option<Vec<u8>>; 2] = [None, None];
    let mut sent = 0;
    for sub in subs {
        let proto = sub.outbox.proto();
        let frame = encoded[usize::from(proto >= 3)].get_or_insert_with(|| {
            let mut out = Vec::new();
            self::frame(proto, parts, &mut out);
            out
        });
        sent += usize::from(sub.outbox.push(frame, limits));
    }
    sent
}

/// A subscriber: its client id and outbox.
#[derive(Clone, Debug)]
struct Subscriber {
    id: u64,
    outbox: Arc<Outbox>,
}

/// Every subscription of every client.
#[derive(Debug, Default)]
pub struct Registry {
    channels: HashMap<Vec<u8>, Vec<Subscriber>>,
    patterns: HashMap<Vec<u8>, Vec<Subscriber>>,
    /// The subscribers' output limits.
    pub limits: Limits,
    /// `notify-keyspace-events`.
    pub events: Events,
}

fn add(map: &mut HashMap<Vec<u8>, Vec<Subscriber>>, name: &[u8], id: u64, outbox: &Arc<Outbox>) {
    let subs = map.entry(name.to_vec()).or_default();
    if !subs.iter().any(|s| s.id == id) {
        subs.push(Subscriber {
            id,
            outbox: outbox.clone(),
        });
    }
}

fn remove(map: &mut HashMap<Vec<u8>, Vec<Subscriber>>, name: &[u8], id: u64) {
    if let Some(subs) = map.get_mut(name) {
        subs.retain(|s| s.id != id);
        if subs.is_empty() {
            map.remove(name);
        }
    }
}

impl Registry {
    /// Applies `notify-keyspace-events` and the pub/sub output limits (CONFIG SET, start).
    pub fn configure(&mut self, events: Events, limits: Limits) {
        self.events = events;
        self.limits = limits;
    }

    /// Client `id` listens to `channel`.
    pub fn subscribe(&mut self, channel: &[u8], id: u64, outbox: &Arc<Outbox>) {
        add(&mut self.channels, channel, id, outbox);
    }

    /// Client `id` stops listening to `channel`.
    pub fn unsubscribe(&mut self, channel: &[u8], id: u64) {
        remove(&mut self.channels, channel, id);
    }

    /// Client `id` listens to channels matching `pattern`.
    pub fn psubscribe(&mut self, pattern: &[u8], id: u64, outbox: &Arc<Outbox>) {
        add(&mut self.patterns, pattern, id, outbox);
    }

    /// Client `id` drops `pattern`.
    pub fn punsubscribe(&mut self, pattern: &[u8], id: u64) {
        remove(&mut self.patterns, pattern, id);
    }

    /// Drops every subscription of a client (it disconnected) in `channels` and `patterns`.
    pub fn forget(&mut self, id: u64, channels: &BTreeSet<Vec<u8>>, patterns: &BTreeSet<Vec<u8>>) {
        channels.iter().for_each(|c| self.unsubscribe(c, id));
        patterns.iter().for_each(|p| self.punsubscribe(p, id));
    }

    /// Sends `message` to the subscribers of `channel` and of the patterns matching it;
    /// returns how many received it (a subscriber over its limits is disconnected instead).
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> usize {
        let subs = self.channels.get(channel).into_iter().flatten();
        let message_parts = [
            Part::Bulk(b"message"),
            Part::Bulk(channel),
            Part::Bulk(message),
        ];
        let mut sent = deliver(subs, &message_parts, &self.limits);
        for (pattern, subs) in &self.patterns {
            if glob_match(pattern, channel, false) {
                let parts = [
                    Part::Bulk(b"pmessage"),
                    Part::Bulk(pattern),
                    Part::Bulk(channel),
                    Part::Bulk(message),
                ];
                sent += deliver(subs, &parts, &self.limits);
            }
        }
        sent
    }

    /// Signals the keyspace event `event` of class `class` on `key` (database 0) as
    /// `notify-keyspace-events` asks: `__keyspace@0__:<key>` carrying the event (`K`), then
    /// `__keyevent@0__:<event>` carrying the key (`E`).
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        let flags = self.events.0;
        if flags & class == 0 || self.channels.is_empty() && self.patterns.is_empty() {
            return;
        }
        if flags & Events::KEYSPACE != 0 {
            let channel = [&b"__keyspace@0__:"[..], key].concat();
            self.publish(&channel, event.as_bytes());
        }
        if flags & Events::KEYEVENT != 0 {
            let channel = [b"__keyevent@0__:", event.as_bytes()].concat();
            self.publish(&channel, key);
        }
    }

    /// The channels with at least one subscriber, those matching `pattern` if given.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = self
            .channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect();
        out.sort();
        out
    }

    /// Subscribers of `channel` (patterns not counted).
    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.channels.get(channel).map_or(0, Vec::len)
    }

    /// Distinct patterns subscribed to.
    pub fn numpat(&self) -> usize {
        self.patterns.len()
    }
}

/// `notify-keyspace-events`: which classes of keyspace events are published, and on which
/// channels (Redis' flag bits and letters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events(pub u32);

impl Events {
    /// `K`: `__keyspace@<db>__:<key>` channels.
    pub const KEYSPACE: u32 = 1 << 0;
    /// `E`: `__keyevent@<db>__:<event>` channels.
    pub const KEYEVENT: u32 = 1 << 1;
    /// `g`: generic commands (DEL, EXPIRE, RENAME, …).
    pub const GENERIC: u32 = 1 << 2;
    /// `$`: string commands.
    pub const STRING: u32 = 1 << 3;
    /// `l`: list commands.
    pub const LIST: u32 = 1 << 4;
    /// `s`: set commands.
    pub const SET: u32 = 1 << 5;
    /// `h`: hash commands.
    pub const HASH: u32 = 1 << 6;
    /// `z`: sorted-set commands.
    pub const ZSET: u32 = 1 << 7;
    /// `x`: keys expired.
    pub const EXPIRED: u32 = 1 << 8;
    /// `e`: keys evicted.
    pub const EVICTED: u32 = 1 << 9;
    /// `t`: stream commands.
    pub const STREAM: u32 = 1 << 10;
    /// `m`: key misses (not part of `A`).
    pub const KEY_MISS: u32 = 1 << 11;
    /// `d`: module types' commands (every BF/CF/CMS/TOPK/TDIGEST/WF write).
    pub const MODULE: u32 = 1 << 13;
    /// `n`: new keys (not part of `A`).
    pub const NEW: u32 = 1 << 14;
    /// `A`: `g$lshzxetd`.
    pub const ALL: u32 = Self::GENERIC
        | Self::STRING
        | Self::LIST
        | Self::SET
        | Self::HASH
        | Self::ZSET
        | Self::EXPIRED
        | Self::EVICTED
        | Self::STREAM
        | Self::MODULE;

    /// The classes in Redis' display order, with their letters (`A` aside).
    const LETTERS: [(char, u32); 11] = [
        ('g', Self::GENERIC),
        ('$', Self::STRING),
        ('l', Self::LIST),
        ('s', Self::SET),
        ('h', Self::HASH),
        ('z', Self::ZSET),
        ('x', Self::EXPIRED),
        ('e', Self::EVICTED),
        ('t', Self::STREAM),
        ('d', Self::MODULE),
        ('n', Self::NEW),
    ];

    /// Parses Redis' letters; `None` for an unknown one.
    pub fn parse(text: &str) -> Option<Events> {
        let mut flags = 0;
        for c in text.chars() {
            flags |= match c {
                'A' => Self::ALL,
                'K' => Self::KEYSPACE,
                'E' => Self::KEYEVENT,
                'm' => Self::KEY_MISS,
                _ => Self::LETTERS.iter().find(|(l, _)| *l == c)?.1,
            };
        }
        Some(Events(flags))
    }
}

impl std::fmt::Display for Events {
    /// Redis' rendering: `A` when every class of `A` is on (`n` is then not shown, as Redis 7
    /// shows it), else each class's letter, then `K`, `E` and `m`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flags = self.0;
        let mut out = String::new();
        if flags & Self::ALL == Self::ALL {
            out.push('A');
        } else {
            for (letter, bit) in Self::LETTERS {
                if flags & bit != 0 {
                    out.push(letter);
                }
            }
        }
        for (letter, bit) in [
            ('K', Self::KEYSPACE),
            ('E', Self::KEYEVENT),
            ('m', Self::KEY_MISS),
        ] {
            if flags & bit != 0 {
                out.push(letter);
            }
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_flags_parse_and_render_as_redis() {
        for (given, shown) in [
            ("", ""),
            ("Ed", "dE"),
            ("KEA", "AKE"),
            ("gxK", "gxK"),
            ("KA", "AK"),
            ("AnE", "AE"),
            ("Em$", "$Em"),
        ] {
            assert_eq!(Events::parse(given).unwrap().to_string(), shown, "{given}");
        }
        assert_eq!(Events::parse("Q"), None);
        assert_ne!(Events::parse("A").unwrap().0 & Events::MODULE, 0);
    }

    #[test]
    fn frames_in_both_protocols() {
        let mut out = Vec::new();
        frame(
            2,
            &[Part::Bulk(b"message"), Part::Bulk(b"c"), Part::Bulk(b"m")],
            &mut out,
        );
        assert_eq!(out, b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n");
        out.clear();
        frame(
            3,
            &[Part::Bulk(b"unsubscribe"), Part::Nil, Part::Int(0)],
            &mut out,
        );
        assert_eq!(out, b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
    }

    /// Publishing reaches channel and pattern subscribers; a subscriber that reads nothing is
    /// disconnected at the hard limit and its queue is dropped, so memory stays bounded.
    #[test]
    fn publish_and_the_hard_limit() {
        let mut r = Registry {
            limits: Limits {
                hard: 1000,
                soft: 0,
                soft_seconds: 0,
            },
            ..Registry::default()
        };
        let (a, b) = (Outbox::new(), Outbox::new());
        r.subscribe(b"news", 1, &a);
        r.psubscribe(b"n*", 2, &b);
        assert_eq!(r.publish(b"news", b"hi"), 2);
        assert_eq!(r.publish(b"other", b"hi"), 0);
        assert_eq!(r.numsub(b"news"), 1);
        assert_eq!(r.numpat(), 1);
        let mut out = Vec::new();
        a.drain_into(&mut out);
        assert_eq!(out, b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
        let mut sent = 0;
        for _ in 0..100 {
            sent += r.publish(b"news", &[b'x'; 100]);
        }
        assert!(a.killed() && b.killed());
        assert!(sent < 30, "{sent}");
        assert!(!a.has_queued());
        r.forget(1, &BTreeSet::from([b"news".to_vec()]), &BTreeSet::new());
        assert_eq!(r.channels(None), Vec::<Vec<u8>>::new());
    }
}
