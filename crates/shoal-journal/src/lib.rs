//! The journal: a durable, queryable record of every exec, plus the content store that keeps
//! values addressable (`out:N` transcript refs, `val:blake3:HEX`) across daemon restarts, and the
//! durable tail of the `journal` / `session.transcript` event channels.
//!
//! Pure library: no actors, no sockets, no stdout. One redb file (`journal.redb` in the state
//! dir) holds everything. Layout:
//! - [`schema`]: table definitions, the versioned meta table, open/validate (a foreign, newer or
//!   corrupt file is an error and is never overwritten).
//! - [`store`]: [`Store`], the read side (safe from any thread, MVCC snapshots) and the single
//!   batch-apply write path used by the writer (its transaction logic lives in `apply`).
//! - [`cas`]: the content-addressed blob store (blake3 of the uncompressed bytes, lz4 above a
//!   threshold, refcounted).
//! - [`scope`]: [`Scope`], whose entries a reader sees (a leaf the store and the planner share).
//! - [`query`]: `journal.query` filters and the index-driven planner.
//! - [`writer`]: [`JournalWriter`], the group-commit writer thread (the only writer).
//!
//! Wiring (daemon side), in short:
//! ```text
//! let store = Arc::new(Store::open(state_dir.join("journal.redb"), StoreOptions { retention, ..Default::default() })?);
//! let writer = JournalWriter::start(store.clone(), WriterConfig { durability, flush_ms, ..Default::default() })?;
//! // exec start: id now, ack per durability mode through the callback (e.g. a oneshot sender)
//! let id = writer.submit(Op::Append { id: None, entry }, Some(Box::new(move |r| { let _ = tx.send(r); })))?.entry_id;
//! // exec end: outputs as bytes (value = tagged JSON), transcript row for out:N
//! writer.submit(Op::Finish { id, finish: Finish { dur_ns, status, ok, outputs, transcript: Some(n) } }, done)?;
//! writer.submit(Op::Event { channel: "journal".into(), seq, ts, payload }, None)?;
//! // reads, from any thread (MVCC): writer.query(&q, &scope) (read-your-writes), store.blob_get(h),
//! // store.transcript_get(session, n), store.events_read(ch, since, limit), store.max_seq(ch)
//! // status: writer.stats(), store.stats(); shutdown: writer.shutdown() (also on drop)
//! ```
//!
//! Invariants: every index row, blob refcount and meta counter is written in the same write
//! transaction as the entry it belongs to, so a crash never tears them apart; stored values are
//! our own versioned encoding (a version byte + JSON, or fixed-width big-endian integers), never
//! redb tuple/Option encodings.

pub mod cas;
pub mod event;
pub mod query;
pub mod reserve;
pub mod schema;
pub mod scope;
pub mod store;
pub mod writer;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use query::Query;
pub use scope::Scope;
pub use store::{
    BlobInfo, Op, Retention, Store, StoreOptions, StoreStats, StoredEvent, TranscriptRow,
};
pub use writer::{
    Done, Durability, FlushDone, JournalWriter, Submitted, WriterConfig, WriterStats,
};

/// Journal entry id: dense, increasing from 1.
pub type EntryId = u64;

/// The journal's error type. `Clone` so one commit failure can be reported to every waiter.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum JournalError {
    /// The file at the store path is not a redb database at all; it was left untouched.
    #[error("{path}: not a shoal journal (unrecognised file format); refusing to touch it")]
    NotAJournal { path: String },
    /// A redb database, but not ours (no shoal meta table); it was left untouched.
    #[error("{path}: a redb database that is not a shoal journal; refusing to touch it")]
    Foreign { path: String },
    /// Written by a newer shoal.
    #[error("{path}: journal schema version {found} is newer than this build supports ({supported}); refusing to open")]
    TooNew {
        path: String,
        found: u64,
        supported: u64,
    },
    /// The store is already open (another daemon holds its lock).
    #[error("{path}: journal is already open by another process")]
    Locked { path: String },
    /// Stored data failed to decode or verify.
    #[error("journal data corrupt: {0}")]
    Corrupt(String),
    /// redb or file-system failure.
    #[error("journal storage error: {0}")]
    Storage(String),
    /// A bad argument (unknown hash syntax, unknown entry, ...).
    #[error("{0}")]
    Invalid(String),
    /// The writer thread is gone (shut down or crashed).
    #[error("journal writer is not running")]
    WriterGone,
}

pub type Result<T, E = JournalError> = std::result::Result<T, E>;

macro_rules! storage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for JournalError {
            fn from(e: $t) -> Self { JournalError::Storage(e.to_string()) }
        }
    )*};
}
storage_from!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError,
    std::io::Error
);

/// `cwd` of an entry (the reference's `WirePath`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Cwd {
    pub display: String,
    /// base64 of the raw bytes, only for non-UTF-8 paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// Kinds of stored outputs.
#[derive(
    Clone,
    Copy,
    Debug,
    Serialize,
    Deserialize,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    Value,
    Render,
    Stdout,
    Stderr,
}

fn is_true(b: &bool) -> bool {
    *b
}
fn yes() -> bool {
    true
}

/// One output of an entry as it appears on the wire: `{kind, hash, len}`.
/// `stored:false` (only serialized when false) means the bytes exceeded the store's size cap and
/// were not kept; `hash`/`len` still describe the full bytes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutputRef {
    pub kind: OutputKind,
    /// lowercase blake3 hex (64 chars) of the uncompressed bytes.
    pub hash: String,
    pub len: u64,
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub stored: bool,
}

/// Output bytes handed to the journal (values already encoded as tagged JSON by the caller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputData {
    pub kind: OutputKind,
    pub bytes: Vec<u8>,
}

impl OutputData {
    pub fn new(kind: OutputKind, bytes: impl Into<Vec<u8>>) -> Self {
        OutputData {
            kind,
            bytes: bytes.into(),
        }
    }
}

fn objects(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "object"}})
}

/// A journal entry, exactly the JSON shape of `journal.query` rows.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Entry {
    pub id: EntryId,
    pub session: String,
    pub principal: String,
    /// start time, ns since the epoch.
    pub ts: i64,
    /// null while unfinished.
    pub dur_ns: Option<i64>,
    pub cwd: Cwd,
    pub src: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ast: Option<serde_json::Value>,
    /// Effect objects `{kind, ...}` as derived by the planner.
    #[schemars(schema_with = "objects")]
    pub effects: Vec<serde_json::Value>,
    /// null while unfinished or on signal death.
    pub status: Option<i64>,
    /// null while unfinished.
    pub ok: Option<bool>,
    pub opaque: bool,
    pub outputs: Vec<OutputRef>,
}

impl Entry {
    /// First whitespace-separated word of `src` (`""` for blank source).
    pub fn head(&self) -> &str {
        head_of(&self.src)
    }

    /// Effect kinds, normalised to snake form (`fs.write` → `fs_write`).
    pub fn effect_kinds(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .effects
            .iter()
            .filter_map(|e| e.get("kind").and_then(|k| k.as_str()))
            .map(shoal_base::text::effect_kind_snake)
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// What a caller supplies when an exec starts (the id is assigned by the journal).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewEntry {
    pub session: String,
    pub principal: String,
    pub ts: i64,
    pub cwd: Cwd,
    pub src: String,
    pub ast: Option<serde_json::Value>,
    pub effects: Vec<serde_json::Value>,
    pub opaque: bool,
}

/// What a caller supplies when an exec ends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Finish {
    pub dur_ns: i64,
    pub status: Option<i64>,
    pub ok: bool,
    pub outputs: Vec<OutputData>,
    /// When set, a transcript row `(entry.session, n)` is written pointing at this entry's
    /// `value` and `render` outputs, so `out:n` survives a restart.
    pub transcript: Option<u64>,
}

/// First whitespace-separated word of a source text.
pub fn head_of(src: &str) -> &str {
    src.split_whitespace().next().unwrap_or("")
}

pub use shoal_base::now_ns;

/// The name of a session's `n`th stored value: `out:n`.
pub fn ref_name(n: u64) -> String {
    format!("out:{n}")
}
