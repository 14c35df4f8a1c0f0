//! The JournalWriter actor: the daemon's face of the journal (docs/protocol.md §6).
//!
//! It owns the one [`journal::JournalWriter`] (the group-commit writer thread, the only redb
//! writer) and answers reads (`journal.query`, `blob.get`, persisted transcript values) on
//! blocking threads, never on its arbiter. Session worker threads submit their exec records
//! straight onto the writer's queue through [`Services`] (they are not arbiter threads, and a
//! batched submit only queues), so the exec hot path pays no actor hop. A 1 s tick refreshes
//! the store counters shown by `daemon.status`.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use base64::Engine as _;
use serde_json::{json, Value as Json};

use crate::event_bus::{BusHandle, Payload, Publish};
use crate::health::{Registration, Supervised};
use crate::msg::Crash;
use shoal_base::sync::Locked;
use shoal_journal::event::{ExecView, Summary, EXEC_CHANNEL};
use shoal_journal::{
    self as journal, Cwd, Entry, EntryId, Finish, JournalError, NewEntry, Op, OutputData,
    OutputKind, Query, Scope, StoreStats,
};
use shoal_proto::kernel::JournalStatus;
use shoal_value::{ShoalError, Value};

type Writer = journal::JournalWriter;

/// The store counters `daemon.status` shows, refreshed by the actor (shared by its
/// incarnations, so a restart keeps them).
pub type StoreCache = Arc<Mutex<Option<StoreStats>>>;

/// What connections and sessions need of the journal and the bus (cheap to clone). The two
/// actor addresses follow the daemon's restarts of those actors.
#[derive(Clone)]
pub struct Services {
    pub journal: Supervised<JournalWriter>,
    pub bus: BusHandle,
    pub writer: Arc<Writer>,
    store_stats: StoreCache,
    /// What journaling cost the last execs (ns, newest last): encoding, submit, events.
    overhead: Arc<Mutex<VecDeque<u64>>>,
    /// Acknowledged execs whose record is not on the writer's queue yet.
    pub records: Arc<RecordsInFlight>,
    /// The token principals' worker processes (`worker/remote.rs`).
    pub workers: Arc<crate::worker::remote::Workers>,
}

/// The count of execs acknowledged (batched durability) whose journal record
/// a worker has not yet handed to the writer, and the wait for it to reach 0.
/// The daemon creates one with its writer and keeps it for shutdown, which
/// waits for the hand-offs before the final flush. Locked, with a condvar:
/// worker threads count and the daemon's main thread waits, both outside any
/// actor.
#[derive(Debug, Default)]
pub struct RecordsInFlight {
    count: Mutex<usize>,
    zero: Condvar,
}

/// One record promised to the writer; its drop (handed off, or given up)
/// takes it off the count.
pub struct RecordInFlight(Arc<RecordsInFlight>);

impl RecordsInFlight {
    /// An acknowledged record is on its way to the writer.
    pub fn begin(self: &Arc<Self>) -> RecordInFlight {
        *self.count.locked() += 1;
        RecordInFlight(self.clone())
    }

    /// Wait (at most `limit`) until every acknowledged exec's journal record
    /// has been handed to the writer. `false` when the limit passed first.
    pub fn wait_handed_off(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut n = self.count.locked();
        while *n > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            n = shoal_base::sync::wait_timeout_locked(&self.zero, n, left);
        }
        true
    }
}

impl Drop for RecordInFlight {
    fn drop(&mut self) {
        let mut n = self.0.count.locked();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.0.zero.notify_all();
        }
    }
}

/// Exec overhead samples kept for `daemon.status`.
const OVERHEAD_SAMPLES: usize = 1024;

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("store", self.writer.store())
            .finish()
    }
}

impl Services {
    pub fn new(
        journal: Supervised<JournalWriter>,
        bus: BusHandle,
        writer: Arc<Writer>,
        store_stats: StoreCache,
        records: Arc<RecordsInFlight>,
    ) -> Services {
        Services {
            journal,
            bus,
            writer,
            store_stats,
            overhead: Arc::new(Mutex::new(VecDeque::with_capacity(OVERHEAD_SAMPLES))),
            records,
            workers: Arc::default(),
        }
    }

    /// The store counters' cache (a restarted JournalWriter keeps filling the same one).
    pub fn store_cache(&self) -> StoreCache {
        self.store_stats.clone()
    }

    /// Journal figures for `daemon.status` (store counters as of the last
    /// [`RefreshStats`]).
    pub fn status(&self) -> JournalStatus {
        let w = self.writer.stats();
        let s = *self.store_stats.locked();
        let (p50, p99) = {
            let mut v: Vec<u64> = self.overhead.locked().iter().copied().collect();
            v.sort_unstable();
            let pct = |p: f64| {
                (!v.is_empty()).then(|| v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1e3)
            };
            (pct(0.5), pct(0.99))
        };
        JournalStatus {
            exec_overhead_p50_us: p50,
            exec_overhead_p99_us: p99,
            path: self.writer.store().path().display().to_string(),
            durability: w.durability,
            flush_ms: self.writer.config().flush_ms,
            entries: s.map(|s| s.entries),
            bytes: s.map(|s| s.bytes),
            blobs: s.map(|s| s.blobs),
            file_bytes: s.map(|s| s.file_bytes),
            queued: w.queued,
            commits: w.commits,
            committed_ops: w.committed_ops,
            failed_commits: w.failed_commits,
            last_commit_us: w.last_commit_us,
            last_commit_ops: w.last_commit_ops,
            last_window_us: w.last_window_us,
            worst_window_us: w.worst_window_us,
            at_risk_us: w.at_risk_us,
            last_commit_at: w.last_commit_at,
            last_error: w.last_error,
            health: if w.degraded { "degraded" } else { "ok" }.into(),
            degraded_since: (w.degraded_since != 0).then_some(w.degraded_since),
            failed_ops: w.failed_ops,
            reopens: w.reopens,
            dropped_ops: w.dropped_ops,
        }
    }
}

pub struct JournalWriter {
    writer: Arc<Writer>,
    store_stats: Arc<Mutex<Option<StoreStats>>>,
    /// The writer's (commits, failed commits, reopens) at the last store read.
    refreshed: Option<(u64, u64, u64)>,
    reg: Registration,
}

impl JournalWriter {
    /// A fresh cache of the store counters, read now.
    pub fn store_cache(writer: &Writer) -> StoreCache {
        Arc::new(Mutex::new(writer.store().stats().ok()))
    }

    /// One incarnation of the actor over `writer`, filling `store_stats`.
    pub fn new(writer: Arc<Writer>, store_stats: StoreCache, reg: Registration) -> JournalWriter {
        JournalWriter {
            // Read just now (or by the previous incarnation): the first tick has nothing new.
            refreshed: {
                let ws = writer.stats();
                Some((ws.commits, ws.failed_commits, ws.reopens))
            },
            writer,
            store_stats,
            reg,
        }
    }

    /// Read the store's counters again if a commit or a reopen moved them;
    /// done when the cache holds them.
    fn refresh(&mut self) -> ResponseFuture<()> {
        // The store's counters only move with a commit or a reopen: an
        // unchanged store is not read again.
        let ws = self.writer.stats();
        if let Some(e) = ws.last_error {
            self.reg.stats.set_error(e);
        }
        let mark = (ws.commits, ws.failed_commits, ws.reopens);
        if self.refreshed == Some(mark) {
            return Box::pin(std::future::ready(()));
        }
        self.refreshed = Some(mark);
        let w = self.writer.clone();
        let cache = self.store_stats.clone();
        let stats = self.reg.stats.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || w.store().stats()).await {
                Ok(Ok(s)) => *cache.locked() = Some(s),
                Ok(Err(e)) => stats.set_error(format!("journal stats: {e}")),
                Err(e) => stats.set_error(format!("journal stats: {e}")),
            }
        })
    }

    /// Run `f` against the writer on a blocking thread.
    fn blocking<T, F>(&mut self, f: F) -> ResponseFuture<Result<T, JournalError>>
    where
        T: Send + 'static,
        F: FnOnce(&Writer) -> Result<T, JournalError> + Send + 'static,
    {
        self.reg.stats.handled();
        let w = self.writer.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || f(&w))
                .await
                .unwrap_or_else(|e| Err(JournalError::Storage(format!("journal read failed: {e}"))))
        })
    }
}

impl Actor for JournalWriter {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(256);
    }
}

/// Read the store's counters for `daemon.status` (asked by each status, so an
/// idle daemon keeps no timer for them).
#[derive(Message)]
#[rtype(result = "()")]
pub struct RefreshStats;

impl Handler<RefreshStats> for JournalWriter {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _msg: RefreshStats, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.refresh()
    }
}

impl Handler<Crash> for JournalWriter {
    type Result = ();

    /// The debug hook: panic, for the daemon to restart this actor.
    fn handle(&mut self, _msg: Crash, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        panic!("journal writer actor: crash requested by debug hook");
    }
}

/// `journal.query` (read-your-writes).
#[derive(Message)]
#[rtype(result = "Result<Vec<Entry>, JournalError>")]
pub struct QueryJournal {
    pub query: Query,
    pub scope: Scope,
}

impl Handler<QueryJournal> for JournalWriter {
    type Result = ResponseFuture<Result<Vec<Entry>, JournalError>>;

    fn handle(&mut self, msg: QueryJournal, _ctx: &mut Context<Self>) -> Self::Result {
        // Both protocols refuse a query that can match nothing by construction.
        if let Err(m) = msg.query.check() {
            return Box::pin(std::future::ready(Err(JournalError::Invalid(m))));
        }
        self.blocking(move |w| w.query(&msg.query, &msg.scope))
    }
}

/// One entry by id.
#[derive(Message)]
#[rtype(result = "Result<Option<Entry>, JournalError>")]
pub struct GetEntry {
    pub id: EntryId,
}

impl Handler<GetEntry> for JournalWriter {
    type Result = ResponseFuture<Result<Option<Entry>, JournalError>>;

    fn handle(&mut self, msg: GetEntry, _ctx: &mut Context<Self>) -> Self::Result {
        self.blocking(move |w| {
            w.sync_visible()?;
            w.store().get_entry(msg.id)
        })
    }
}

/// Bytes of a content-store blob (`HEX` or `blake3:HEX`) that a reader of `scope` may
/// have: under a principal's scope only a blob one of its own entries references, `None`
/// (like an unknown hash) otherwise (`Store::blob_get_scoped`).
#[derive(Message)]
#[rtype(result = "Result<Option<Vec<u8>>, JournalError>")]
pub struct GetBlob {
    pub hash: String,
    pub scope: Scope,
}

impl Handler<GetBlob> for JournalWriter {
    type Result = ResponseFuture<Result<Option<Vec<u8>>, JournalError>>;

    fn handle(&mut self, msg: GetBlob, _ctx: &mut Context<Self>) -> Self::Result {
        self.blocking(move |w| {
            w.sync_visible()?;
            w.store().blob_get_scoped(&msg.hash, &msg.scope)
        })
    }
}

/// A persisted transcript value: `out:n` of `session` as (tagged wire JSON, full render).
#[derive(Message)]
#[rtype(result = "Result<Option<(Json, String)>, JournalError>")]
pub struct TranscriptValue {
    pub session: String,
    pub n: u64,
}

impl Handler<TranscriptValue> for JournalWriter {
    type Result = ResponseFuture<Result<Option<(Json, String)>, JournalError>>;

    fn handle(&mut self, msg: TranscriptValue, _ctx: &mut Context<Self>) -> Self::Result {
        self.blocking(move |w| {
            w.sync_visible()?;
            let store = w.store();
            let Some(row) = store.transcript_get(&msg.session, msg.n)? else {
                return Ok(None);
            };
            let Some(vref) = row.value else {
                return Ok(None);
            };
            if !vref.stored {
                return Err(JournalError::Invalid(format!(
                    "out:{} ({} bytes) exceeded the journal's size cap and was not kept",
                    msg.n, vref.len
                )));
            }
            let Some(bytes) = store.blob_get(&vref.hash)? else {
                return Ok(None);
            };
            let wire: Json = serde_json::from_slice(&bytes).map_err(|e| {
                JournalError::Corrupt(format!("stored value of out:{}: {e}", msg.n))
            })?;
            let render = match row.render {
                Some(r) => store
                    .blob_get(&r.hash)?
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default(),
                None => String::new(),
            };
            Ok(Some((wire, render)))
        })
    }
}

/// Commit everything durably (shutdown, tests).
#[derive(Message)]
#[rtype(result = "Result<(), JournalError>")]
pub struct FlushJournal;

impl Handler<FlushJournal> for JournalWriter {
    type Result = ResponseFuture<Result<(), JournalError>>;

    fn handle(&mut self, _msg: FlushJournal, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.writer.flush_with(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        Box::pin(async move {
            sent?;
            rx.await.unwrap_or(Err(JournalError::WriterGone))
        })
    }
}

/// The principal of local same-uid connections.
pub fn local_principal() -> String {
    format!("uid:{}", shoal_base::paths::euid())
}

/// docs/protocol.md §6: the local human and principals granted `journal_read` see
/// every entry, any other principal its own.
pub fn scope_for(principal: &str) -> Scope {
    let granted = shoal_policy::runtime()
        .policy
        .get(principal)
        .is_some_and(|p| p.journal_read);
    if principal == local_principal() || granted {
        Scope::All
    } else {
        Scope::Principal(principal.to_string())
    }
}

/// `blob.get` result: `{hash, value}`, the blob parsed as JSON when it parses, else
/// `{"$":"bytes","len":N,"v":base64}`.
pub fn blob_read(hash: &str, bytes: &[u8]) -> shoal_proto::kernel::BlobRead {
    let value = serde_json::from_slice::<Json>(bytes).unwrap_or_else(|_| {
        json!({"$": "bytes", "len": bytes.len(),
               "v": base64::engine::general_purpose::STANDARD.encode(bytes)})
    });
    shoal_proto::kernel::BlobRead {
        hash: hash.strip_prefix("blake3:").unwrap_or(hash).to_string(),
        value,
    }
}

/// What a finished exec hands to the journal (the bytes and texts it keeps
/// are moved in, not copied).
pub enum Ran<'a> {
    Value {
        value: &'a Value,
        /// The tagged wire JSON, already serialized.
        wire: Vec<u8>,
        /// The full, unbounded render (stored).
        render: String,
        /// The bounded render of the response (the `render` event).
        bounded: String,
    },
    Raised {
        error: &'a ShoalError,
    },
}

/// One exec, as journaled.
pub struct ExecRecord<'a> {
    pub session: &'a str,
    pub principal: String,
    pub cwd: &'a Path,
    pub src: String,
    /// start, ns since the epoch.
    pub ts: i64,
    pub dur_ns: i64,
    /// Its `out:N`.
    pub n: u64,
    pub ran: Ran<'a>,
    /// The derived effects (Leash), when the run was planned.
    pub effects: Vec<serde_json::Value>,
    /// The caller's connection id and client name ([`ExecView`]).
    pub by: (u64, Option<Arc<str>>),
}

/// Largest stdout/stderr read back from a spill file for the journal.
const MAX_STREAM_BYTES: usize = 64 << 20;

fn cwd_of(p: &Path) -> Cwd {
    use std::os::unix::ffi::OsStrExt;
    let bytes = p.as_os_str().as_bytes();
    Cwd {
        display: p.display().to_string(),
        raw: std::str::from_utf8(bytes)
            .is_err()
            .then(|| base64::engine::general_purpose::STANDARD.encode(bytes)),
    }
}

/// What a live view shows of the exec `r` ([`EXEC_CHANNEL`]).
fn exec_view(r: &ExecRecord<'_>) -> ExecView {
    let (ok, status, code, (head, more)) = match &r.ran {
        Ran::Value { value, bounded, .. } => match value {
            Value::Outcome(o) => (o.ok, o.status, None, ExecView::head_of(bounded)),
            _ => (true, None, None, ExecView::head_of(bounded)),
        },
        Ran::Raised { error } => (
            false,
            error.status,
            Some(error.code.as_str().to_string()),
            ExecView::head_of(&error.msg),
        ),
    };
    ExecView {
        session: r.session.to_string(),
        n: r.n,
        src: ExecView::src_of(&r.src),
        principal: r.principal.clone(),
        client: r.by.1.clone(),
        conn: r.by.0,
        ok,
        status,
        code,
        head,
        more,
    }
}

/// `session.transcript` summary of a value.
fn summary(v: &Value) -> Summary {
    Summary {
        type_name: v.type_name(),
        outcome: match v {
            Value::Outcome(o) => Some((o.ok, o.cmd.to_string())),
            _ => None,
        },
        len: match v {
            Value::List(l) => Some(l.len()),
            Value::Table(t) => Some(t.len()),
            _ => None,
        },
    }
}

/// Journal one exec and publish its events (`journal` → `session.transcript` → `render`).
/// Runs on the session's worker thread (never an arbiter): in immediate mode it waits for the
/// commit, in batched mode it only queues. Returns the entry id.
/// Queue one exec's journal record on the writer; its events (`journal`,
/// `session.transcript`, `render`) go to `events`, for the caller to publish.
pub fn record_exec(
    svc: &Services,
    r: ExecRecord<'_>,
    events: &mut Vec<Publish>,
) -> Result<EntryId, JournalError> {
    let t0 = Instant::now();
    let id = record(svc, r, events);
    let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
    let mut o = svc.overhead.locked();
    if o.len() >= OVERHEAD_SAMPLES {
        o.pop_front();
    }
    o.push_back(ns);
    id
}

fn record(
    svc: &Services,
    r: ExecRecord<'_>,
    events: &mut Vec<Publish>,
) -> Result<EntryId, JournalError> {
    // What the events need once the record has taken the rest.
    let mut value_events = None;
    // The live view's event, only while someone watches (one atomic load otherwise).
    let mut view = svc.bus.exec_watched().then(|| exec_view(&r));
    let (ok, status, outputs) = match r.ran {
        Ran::Value {
            value,
            wire,
            render,
            bounded,
        } => {
            value_events = Some((summary(value), bounded));
            let mut outputs = vec![
                OutputData::new(OutputKind::Value, wire),
                OutputData::new(OutputKind::Render, render),
            ];
            if let Value::Outcome(o) = value {
                outputs.push(OutputData::new(
                    OutputKind::Stdout,
                    o.stdout.head(MAX_STREAM_BYTES).into_owned(),
                ));
                outputs.push(OutputData::new(
                    OutputKind::Stderr,
                    o.stderr.head(MAX_STREAM_BYTES).into_owned(),
                ));
            }
            (true, Some(0), outputs)
        }
        Ran::Raised { error } => {
            let wire = shoal_proto::wire::error(error);
            let mut outputs = vec![
                OutputData::new(
                    OutputKind::Value,
                    serde_json::to_vec(&wire).unwrap_or_default(),
                ),
                OutputData::new(OutputKind::Render, error.msg.as_bytes()),
            ];
            if let Some(e) = &error.stderr {
                outputs.push(OutputData::new(OutputKind::Stderr, e.to_vec()));
            }
            (false, Some(error.status.unwrap_or(1)), outputs)
        }
    };
    let head = journal::head_of(&r.src).to_string();
    let principal = r.principal.clone();
    let op = Op::Record {
        id: None,
        entry: NewEntry {
            session: r.session.to_string(),
            principal: r.principal,
            ts: r.ts,
            cwd: cwd_of(r.cwd),
            src: r.src,
            ast: None,
            opaque: r
                .effects
                .iter()
                .any(|e| e.get("kind").and_then(|k| k.as_str()) == Some("opaque")),
            effects: r.effects,
        },
        finish: Finish {
            dur_ns: r.dur_ns,
            status,
            ok,
            outputs,
            transcript: Some(r.n),
        },
    };
    let id = svc
        .writer
        .submit_wait(op)?
        .ok_or_else(|| JournalError::Invalid("the journal allocated no entry id".into()))?;
    // Typed payloads: no JSON is built for an exec's events (shoal_journal::event).
    events.push(Publish {
        channel: "journal".into(),
        payload: Payload::Entry {
            entry_id: id,
            head,
            ok,
            principal,
        },
    });
    if let Some(view) = view.take() {
        events.push(Publish {
            channel: EXEC_CHANNEL.into(),
            payload: Payload::Exec(Box::new(view)),
        });
    }
    if let Some((summary, bounded)) = value_events {
        events.push(Publish {
            channel: "session.transcript".into(),
            payload: Payload::Transcript { n: r.n, summary },
        });
        events.push(Publish {
            channel: "render".into(),
            payload: Payload::Render {
                n: r.n,
                render: bounded,
            },
        });
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::wire;

    #[test]
    fn stored_values_decode_back() {
        let mut r = shoal_value::Record::new();
        r.insert("a".into(), Value::Int(3));
        r.insert("b".into(), Value::Str(Arc::from("x")));
        let v = Value::List(Arc::new(vec![
            Value::Null,
            Value::Bool(true),
            Value::Float(1.5),
            Value::Size(10),
            Value::Record(Arc::new(r.clone())),
            Value::Table(Arc::new(vec![Arc::new(r)])),
        ]));
        let w = wire::encode(&v);
        assert_eq!(wire::encode(&wire::decode(&w).unwrap()), w);
        // A raised error stored as out:N comes back as an error value.
        let mut e =
            shoal_value::ShoalError::new(shoal_value::ErrorCode::DivZero, "division by zero");
        e.hint = Some("check the divisor".into());
        let w = wire::encode(&Value::Error(Arc::new(e)));
        let back = wire::decode(&w).unwrap();
        assert!(matches!(&back, Value::Error(x) if x.code == shoal_value::ErrorCode::DivZero));
        assert_eq!(wire::encode(&back), w);
    }

    #[test]
    fn blob_read_parses_or_base64s() {
        assert_eq!(blob_read("blake3:ab", b"{\"x\":1}").value["x"], json!(1));
        assert_eq!(blob_read("ab", b"\xff").value["len"], json!(1));
        assert_eq!(blob_read("blake3:ab", b"1").hash, "ab");
    }
}
