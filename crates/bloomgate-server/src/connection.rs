//! One client connection, run on the server's single event-loop thread: read, parse every
//! complete command (with Redis' tighter limits before AUTH), execute them under one store lock
//! acquisition, queue their log records, write the log (one `write(2)` for every connection
//! served in this turn of the event loop; waiting for the fsync too under `appendfsync always`),
//! then write all replies with one more (pipelining). A GATE.* call's reply is awaited from the
//! gate's workers without holding the store lock, so other clients go on meanwhile; a
//! `GATE.RECORD`'s rows are then logged like a write's, and its reply waits for the log too.
//! Writes are refused with `-MISCONF` while the data cannot be persisted, and every
//! command with an error once shutdown has started. Protocol errors get
//! `-ERR Protocol error: ...` and the connection closes.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use bloomgate_dialect::commands::{flags, Outcome, Propagate};

use crate::commands::{execute, lookup, Action, Session, Store};
use crate::lock::relock;
use crate::pubsub::Outbox;
use crate::resp::{Encode, Reply, RequestParser};
use crate::shared::Shared;

/// Reply bytes buffered before they are written out mid-pipeline.
const FLUSH_AT: usize = 1 << 20;

/// Serves one client until it disconnects (or is disconnected); `local`: it connected from a
/// loopback address.
pub async fn handle(shared: Arc<Shared>, stream: TcpStream, local: bool) {
    let _ = stream.set_nodelay(true);
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let mut session = {
        let mut store = relock(&shared.store);
        store.stats.connected_clients += 1;
        store.stats.connections_received += 1;
        Session::new(id, store.config.requirepass.is_some())
    };
    session.local = local;
    let _ = serve_client(&shared, stream, &mut session).await;
    let mut store = relock(&shared.store);
    session.unwatch_all(&mut store.db);
    store
        .pubsub
        .forget(session.id, &session.channels, &session.patterns);
    store.stats.connected_clients -= 1;
}

/// Runs one command, turning a panic into an error reply (`None` for the outcome's second
/// half: the connection must close; see the lock-poisoning policy at [`crate::lock::relock`]): the
/// store lock is released normally, so later clients are unaffected.
pub fn guarded(run: impl FnOnce() -> Outcome) -> Result<Outcome, Reply> {
    catch_unwind(AssertUnwindSafe(run)).map_err(|_| {
        Reply::error("ERR internal error while running the command (see the server log)")
    })
}

/// `-MISCONF` for a write (or an EXEC of queued writes) while the data cannot be persisted.
fn refuse_write(
    shared: &Shared,
    store: &mut Store,
    session: &mut Session,
    args: &[Vec<u8>],
) -> Option<Reply> {
    let spec = lookup(args.first()?)?;
    let writes = |name: &[u8]| lookup(name).is_some_and(|s| s.flags.contains(flags::WRITE));
    let exec = spec.flags.contains(flags::RUNS_QUEUED);
    let queued_writes = exec
        && session
            .multi
            .as_ref()
            .is_some_and(|q| q.iter().any(|c| writes(&c[0])));
    if !spec.flags.contains(flags::WRITE) && !queued_writes {
        return None;
    }
    let error = shared.misconf()?;
    if exec {
        session.multi = None;
        session.multi_failed = false;
        session.unwatch_all(&mut store.db);
    } else if session.multi.is_some() {
        session.multi_failed = true;
    }
    Some(Reply::Error(error))
}

async fn serve_client(
    shared: &Arc<Shared>,
    stream: TcpStream,
    session: &mut Session,
) -> std::io::Result<()> {
    let mut stream = stream;
    let mut parser = RequestParser::default();
    let mut buf = vec![0u8; 16 * 1024];
    // Reply bytes for one read batch, kept across batches (no allocation per request).
    let mut out = Vec::new();
    let outbox = session.outbox.clone();
    loop {
        // Messages published to this client (a subscriber) go out between its own batches.
        let n = loop {
            if outbox.killed() {
                return Ok(());
            }
            if outbox.has_queued() {
                let batch = outbox.take();
                write_watched(&mut stream, &batch, &outbox).await?;
                outbox.written(batch.len());
                continue;
            }
            tokio::select! {
                read = stream.read(&mut buf) => break read?,
                () = outbox.ready() => {}
            }
        };
        if n == 0 {
            return Ok(());
        }
        parser.extend(&buf[..n]);
        out.clear();
        let mut wait_for = 0;
        let mut close = false;
        loop {
            let mut pending_action = None;
            let mut more = false;
            {
                let mut store = relock(&shared.store);
                loop {
                    parser.set_unauthenticated(!session.authenticated);
                    let args = match parser.next_command() {
                        Ok(Some(args)) => args,
                        Ok(None) => break,
                        Err(e) => {
                            e.reply().encode(session.proto, &mut out);
                            close = true;
                            break;
                        }
                    };
                    if shared.stopping.load(Ordering::SeqCst) {
                        Reply::error("ERR server is shutting down").encode(session.proto, &mut out);
                        close = true;
                        break;
                    }
                    if let Some(refusal) = refuse_write(shared, &mut store, session, &args) {
                        refusal.encode(session.proto, &mut out);
                        parser.recycle(args);
                        continue;
                    }
                    let started = Instant::now();
                    let outcome = guarded(|| execute(&mut store, session, &args, false));
                    shared.latency.observe(started.elapsed());
                    let reply = match outcome {
                        Ok(Outcome {
                            reply, propagate, ..
                        }) => {
                            if propagate != Propagate::Nothing {
                                if let Some(aof) = shared.aof.get() {
                                    wait_for = aof.append(&propagate.into_commands(&args));
                                }
                            }
                            reply
                        }
                        Err(reply) => {
                            session.close = true;
                            reply
                        }
                    };
                    parser.recycle(args);
                    close |= std::mem::take(&mut session.close);
                    if let Some(action) = session.action.take() {
                        pending_action = Some((action, reply));
                        break;
                    }
                    if session.subscriptions() > 0 || session.frames.is_some() {
                        // What was published to it before (or by) this command comes first.
                        session.outbox.set_proto(session.proto);
                        session.outbox.drain_into(&mut out);
                    }
                    match session.frames.take() {
                        Some(frames) => out.extend_from_slice(&frames),
                        None => reply.encode(session.proto, &mut out),
                    }
                    if close {
                        break;
                    }
                    if out.len() >= FLUSH_AT {
                        more = true;
                        break;
                    }
                }
            }
            if let Some((action, reply)) = pending_action {
                if let Some(reply) = perform(shared, action, reply, &mut wait_for).await {
                    reply.encode(session.proto, &mut out);
                }
                if !close {
                    continue;
                }
            }
            if more {
                logged(shared, wait_for).await;
                write_watched(&mut stream, &out, &outbox).await?;
                out.clear();
                continue;
            }
            break;
        }
        logged(shared, wait_for).await;
        if !out.is_empty() {
            write_watched(&mut stream, &out, &outbox).await?;
        }
        if out.capacity() > FLUSH_AT {
            out = Vec::new();
        }
        if close {
            stream.shutdown().await?;
            return Ok(());
        }
    }
}

/// Writes `bytes`, unless the client goes over its pub/sub output limits meanwhile (a
/// subscriber that stopped reading): then the connection is dropped.
async fn write_watched(
    stream: &mut TcpStream,
    bytes: &[u8],
    outbox: &Outbox,
) -> std::io::Result<()> {
    let killed = async {
        loop {
            outbox.ready().await;
            if outbox.killed() {
                return;
            }
        }
    };
    tokio::select! {
        written = stream.write_all(bytes) => written,
        () = killed => Err(std::io::Error::other("client-output-buffer-limit pubsub reached")),
    }
}

/// Holds replies until the writes they acknowledge are in the log: written to the OS under
/// every policy (so a crash of the process loses nothing acknowledged; this thread writes them
/// itself unless the log is failing or switching files), fsynced under `always`.
async fn logged(shared: &Shared, seq: u64) {
    if seq == 0 {
        return;
    }
    if let Some(aof) = shared.aof.get() {
        if !aof.written_up_to(seq) {
            // Let the other connections ready in this turn of the event loop run their batches
            // first: the first to resume then writes all their records with one write(2), as
            // Redis writes its log buffer once per turn of its event loop.
            tokio::task::yield_now().await;
        }
        if !aof.write_through(seq) {
            aof.wait_acknowledgeable(seq).await;
        }
    }
}

/// Runs a persistence action; returns the reply to send (none for a successful SHUTDOWN, which
/// closes the connection without a reply, as Redis does). A gate call whose rows the log must
/// hold queues their record and sets `wait_for` to it: the reply waits for the log, as a
/// write's does.
async fn perform(
    shared: &Arc<Shared>,
    action: Action,
    reply: Reply,
    wait_for: &mut u64,
) -> Option<Reply> {
    match action {
        Action::Save => Some(match shared.snapshot().await {
            Ok(()) => reply,
            Err(e) => {
                eprintln!("bloomgate: SAVE failed: {e:#}");
                Reply::error("ERR")
            }
        }),
        Action::Bgsave => {
            let shared = shared.clone();
            tokio::spawn(async move {
                if let Err(e) = shared.snapshot().await {
                    eprintln!("bloomgate: BGSAVE failed: {e:#}");
                }
            });
            Some(reply)
        }
        Action::DebugReload => Some(match shared.reload().await {
            Ok(()) => reply,
            Err(e) => Reply::error(format!("ERR Error trying to load the RDB dump: {e:#}")),
        }),
        Action::Shutdown { save } => {
            shared.request_shutdown(save);
            None
        }
        Action::Gate(call) => {
            let gate = relock(&shared.store).gate.clone();
            let Some(gate) = gate else {
                return Some(reply);
            };
            let answer = gate.run(call).await;
            let Some(rows) = answer.log else {
                return Some(answer.reply);
            };
            // Queued under the store lock, as every write's record is, so a shutdown that has
            // begun (it syncs what was queued before it) either has this record or refuses it.
            let mut store = relock(&shared.store);
            if shared.stopping.load(Ordering::SeqCst) {
                return Some(Reply::error(
                    "ERR server is shutting down (the items may be recorded or not: recording \
                     them again is safe)",
                ));
            }
            if let Some(aof) = shared.aof.get() {
                store.changed(rows.items.len() as u64);
                *wait_for = aof.append(&[rows.command()]);
            }
            Some(answer.reply)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panicking command is answered with an error and closes only its own connection; the
    /// lock it ran under stays usable.
    #[test]
    fn a_panicking_command_is_contained() {
        let store = std::sync::Mutex::new(0u64);
        let mut guard = relock(&store);
        let outcome = guarded(|| {
            *guard += 1;
            panic!("deliberate panic in a command");
        });
        drop(guard);
        assert!(outcome.is_err_and(|reply| reply.is_error()));
        assert!(!store.is_poisoned());
        assert_eq!(*relock(&store), 1);
    }
}
