//! One client connection: read, parse every complete command, execute them under the store lock,
//! queue their log records, wait for durability when `appendfsync always`, then write all
//! replies (pipelining). Protocol errors get `-ERR Protocol error: ...` and the connection closes.

use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::commands::{execute, Action, Session};
use crate::resp::{Encode, Reply, RequestParser};
use crate::server::Shared;

/// Reply bytes buffered before they are written out mid-pipeline.
const FLUSH_AT: usize = 1 << 20;

pub async fn handle(shared: Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let id = shared
        .next_client_id
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut session = {
        let mut store = shared.store.lock().expect("store lock");
        store.stats.connected_clients += 1;
        store.stats.connections_received += 1;
        Session::new(id, store.config.requirepass.is_some())
    };
    let _ = serve_client(&shared, stream, &mut session).await;
    let mut store = shared.store.lock().expect("store lock");
    session.unwatch_all(&mut store.db);
    store.stats.connected_clients -= 1;
}

async fn serve_client(
    shared: &Arc<Shared>,
    stream: TcpStream,
    session: &mut Session,
) -> std::io::Result<()> {
    let (mut reader, mut writer) = stream.into_split();
    let mut parser = RequestParser::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        parser.extend(&buf[..n]);
        let mut out = Vec::new();
        let mut wait_for = 0;
        let mut close = false;
        loop {
            let mut pending_action = None;
            let mut more = false;
            {
                let mut store = shared.store.lock().expect("store lock");
                loop {
                    let args = match parser.next_command() {
                        Ok(Some(args)) => args,
                        Ok(None) => break,
                        Err(e) => {
                            e.reply().encode(session.proto, &mut out);
                            close = true;
                            break;
                        }
                    };
                    let started = Instant::now();
                    let outcome = execute(&mut store, session, &args, false);
                    shared.latency.observe(started.elapsed());
                    if !outcome.log.is_empty() {
                        if let Some(aof) = shared.aof.get() {
                            wait_for = aof.append(&outcome.log);
                        }
                    }
                    close |= outcome.close;
                    if let Some(action) = outcome.action {
                        pending_action = Some((action, outcome.reply));
                        break;
                    }
                    outcome.reply.encode(session.proto, &mut out);
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
                if let Some(reply) = perform(shared, action, reply).await {
                    reply.encode(session.proto, &mut out);
                }
                if !close {
                    continue;
                }
            }
            if more {
                durable(shared, wait_for).await;
                writer.write_all(&out).await?;
                out.clear();
                continue;
            }
            break;
        }
        durable(shared, wait_for).await;
        if !out.is_empty() {
            writer.write_all(&out).await?;
        }
        if close {
            writer.shutdown().await?;
            return Ok(());
        }
    }
}

/// Under `appendfsync always`, holds replies until the writes they acknowledge are on disk.
async fn durable(shared: &Shared, seq: u64) {
    if seq == 0 {
        return;
    }
    if let Some(aof) = shared.aof.get() {
        if aof.is_always() {
            aof.wait_durable(seq).await;
        }
    }
}

/// Runs a persistence action; returns the reply to send (none for a successful SHUTDOWN, which
/// closes the connection without a reply, as Redis does).
async fn perform(shared: &Arc<Shared>, action: Action, reply: Reply) -> Option<Reply> {
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
    }
}
