//! [`Store`]: the opened journal. Reads are safe from any thread at any time (each call takes its
//! own short MVCC read transaction; none is held across calls). Writes go through
//! [`Store::apply`], one write transaction per batch, which only the group-commit writer calls
//! (crate-private: no other crate can write behind it); redb's file lock keeps a second process
//! out.
//!
//! Retention runs inside the same transaction as the batch that exceeded a limit: oldest
//! unpinned entries go first, their index rows and output refs with them; blobs are deleted only
//! when their last ref (entry output, transcript row, pin) goes.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};
use serde::{Deserialize, Serialize};

mod apply;

use super::cas::{self, CasTables};
use super::schema::{self, *};
use super::scope::Scope;
use super::{Entry, EntryId, Finish, JournalError, NewEntry, OutputRef, Result};
pub(crate) use apply::decode_tsw;
use apply::{read_counter, Counters, Tx};
use shoal_base::sync::RwLocked;

/// Retention limits (`journal.max_entries`, `journal.max_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub max_entries: Option<u64>,
    /// Entry rows plus stored blob bytes.
    pub max_bytes: Option<u64>,
    /// `max_bytes` never shrinks the journal below this many entries (blobs held by transcript
    /// rows count towards the bytes but cannot be reclaimed by deleting entries).
    pub floor: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_entries: None,
            max_bytes: None,
            floor: 100,
        }
    }
}

/// Options of [`Store::open`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// redb page cache (default 32 MiB; redb's own default is 1 GiB).
    pub cache_bytes: usize,
    /// Outputs larger than this are recorded (`stored:false`) but not kept (default 64 MiB).
    pub max_blob_bytes: u64,
    pub retention: Retention,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 32 << 20,
            max_blob_bytes: 64 << 20,
            retention: Retention::default(),
        }
    }
}

/// A write. `id: None` lets the store allocate the next id (the writer allocates ids itself so it
/// can acknowledge before the commit).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Start of an exec: an unfinished row (`ok`, `status`, `dur_ns` null).
    Append {
        id: Option<EntryId>,
        entry: NewEntry,
    },
    /// End of an exec: outputs into the content store, `ok`/`status`/`dur_ns`, optional
    /// transcript row.
    Finish {
        id: EntryId,
        finish: Finish,
    },
    /// Append and finish in one go.
    Record {
        id: Option<EntryId>,
        entry: NewEntry,
        finish: Finish,
    },
    /// A transcript row not tied to a finished exec (e.g. a background task's value).
    Transcript {
        session: String,
        n: u64,
        ts: i64,
        entry_id: Option<EntryId>,
        value: Vec<u8>,
        render: Vec<u8>,
    },
    /// Forget every transcript row of a session (releases their blobs).
    DropTranscript {
        session: String,
    },
    /// Persist one event of a replayable channel (`journal`, `session.transcript`). The
    /// payload is shared with the bus's copy of the event (queuing it, and keeping it for a
    /// retry after a failed commit, copies no JSON); it is serialized here, once.
    Event {
        channel: String,
        seq: u64,
        ts: i64,
        payload: std::sync::Arc<crate::event::Payload>,
    },
    /// Reserve `out:N` numbers of a session up to `upto` (a high-water mark that only grows,
    /// kept across `DropTranscript`): a restarted session continues past it, so no number that
    /// may have been handed out is handed out again.
    ReserveRefs {
        session: String,
        upto: u64,
    },
    /// Give back the unused part of a reservation at a clean shutdown: lower the mark to
    /// `upto`, the last number handed out (never raises it).
    ReleaseRefs {
        session: String,
        upto: u64,
    },
    /// Keep a blob regardless of entries and transcripts (`HEX` or `blake3:HEX`).
    PinBlob(String),
    UnpinBlob(String),
    /// Retention never deletes a pinned entry (nor, therefore, its outputs).
    PinEntry(EntryId),
    UnpinEntry(EntryId),
}

/// The meta key of a session's reserved `out:N` mark.
pub(crate) fn reserve_key(session: &str) -> String {
    format!("out_reserved:{session}")
}

/// A persisted transcript row: `out:n` of `session`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TranscriptRow {
    pub session: String,
    pub n: u64,
    pub ts: i64,
    pub entry_id: Option<EntryId>,
    /// The tagged-JSON value bytes (`None` if the exec produced no value output).
    pub value: Option<OutputRef>,
    pub render: Option<OutputRef>,
}

/// A persisted event.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StoredEvent {
    pub seq: u64,
    pub ts: i64,
    pub payload: serde_json::Value,
}

/// Facts about one blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobInfo {
    pub len: u64,
    pub stored_len: u64,
    pub refs: u64,
    pub pinned: bool,
}

/// Counters for operator status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StoreStats {
    pub entries: u64,
    /// entry rows + stored blob bytes.
    pub bytes: u64,
    pub blobs: u64,
    pub next_id: EntryId,
    pub file_bytes: u64,
}

/// The opened journal (see the module doc). Its write path is the crate's own: only the
/// [`JournalWriter`](crate::JournalWriter) applies a batch, so no other crate can write
/// behind it:
///
/// ```compile_fail
/// fn write_behind_the_writer(store: &shoal_journal::Store, ops: Vec<shoal_journal::Op>) {
///     let _ = store.apply(ops, todo!());
/// }
/// ```
pub struct Store {
    /// The open database; `None` for a moment while [`Store::reopen`] replaces it.
    db: std::sync::RwLock<Option<std::sync::Arc<Database>>>,
    path: PathBuf,
    opts: StoreOptions,
    pub(crate) writer_attached: AtomicBool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open or create the journal at `path` (a file, conventionally `<state>/journal.redb`).
    pub fn open(path: impl AsRef<Path>, opts: StoreOptions) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        // 0600 whatever the umask: created so before redb writes to it, and
        // tightened when an older daemon left it readable.
        if let Err(e) = shoal_base::paths::private_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot make {} private: {e}", path.display());
            }
        }
        let db = schema::open_db(&path, opts.cache_bytes)?;
        Ok(Store {
            db: std::sync::RwLock::new(Some(std::sync::Arc::new(db))),
            path,
            opts,
            writer_attached: AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open database (an error while a reopen is in progress or failed).
    pub(crate) fn db(&self) -> Result<std::sync::Arc<Database>> {
        self.db
            .read_locked()
            .clone()
            .ok_or_else(|| JournalError::Storage("the journal is being reopened".into()))
    }

    /// Close and open the file again, as redb requires after an I/O error (a failed commit
    /// poisons the open database). Fails, leaving the store closed, while the file cannot be
    /// opened (e.g. no space for recovery) or a reader still holds the old handle; call again.
    pub fn reopen(&self) -> Result<()> {
        let mut g = self.db.write_locked();
        if let Some(old) = g.take() {
            if let Err(old) = std::sync::Arc::try_unwrap(old) {
                *g = Some(old);
                return Err(JournalError::Storage(
                    "the journal is in use by a reader; reopen postponed".into(),
                ));
            }
        }
        let db = schema::open_db(&self.path, self.opts.cache_bytes)?;
        *g = Some(std::sync::Arc::new(db));
        Ok(())
    }

    pub fn options(&self) -> &StoreOptions {
        &self.opts
    }

    /// Apply a batch in one write transaction. The outer error means nothing was committed; the
    /// inner results are per op (a bad op, e.g. finishing an unknown id, does not sink the batch).
    /// Returns the entry id for `Append`/`Record`. Crate-private: the writer thread is the one
    /// writer (ARCHITECTURE.md, "The journal has one writer").
    pub(crate) fn apply(
        &self,
        ops: Vec<Op>,
        durability: redb::Durability,
    ) -> Result<Vec<Result<Option<EntryId>>>> {
        let mut wtx = self.db()?.begin_write()?;
        wtx.set_durability(durability)?;
        let n_ops = ops.len() as u64;
        let mut results = Vec::with_capacity(ops.len());
        {
            let meta = wtx.open_table(META)?;
            let next_blob = read_counter(&meta, "next_blob")?;
            let c = Counters {
                next_id: read_counter(&meta, "next_id")?,
                entry_count: read_counter(&meta, "entry_count")?,
                total_bytes: read_counter(&meta, "total_bytes")?,
            };
            let mut tx = Tx {
                meta,
                entries: wtx.open_table(ENTRIES)?,
                tsw: wtx.open_table(TSW)?,
                idx: wtx.open_table(IDX)?,
                cas: CasTables {
                    blobs: wtx.open_table(BLOBS)?,
                    data: wtx.open_table(BLOB_DATA)?,
                    by_hash: wtx.open_table(BLOB_HASH)?,
                    next_blob,
                },
                pins: wtx.open_table(PINS)?,
                pinned: wtx.open_table(PINNED_ENTRIES)?,
                transcript: wtx.open_table(TRANSCRIPT)?,
                events: wtx.open_table(EVENTS)?,
                c,
                opts: &self.opts,
                last_tsw: None,
            };
            for op in ops {
                match tx.apply_op(op) {
                    Err(JournalError::Storage(m)) => return Err(JournalError::Storage(m)),
                    r => results.push(r),
                }
            }
            tx.retention(2 * n_ops + 256)?;
            let c = tx.c;
            tx.meta
                .insert("next_id", enc_u64s(&[c.next_id]).as_slice())?;
            tx.meta
                .insert("entry_count", enc_u64s(&[c.entry_count]).as_slice())?;
            tx.meta
                .insert("total_bytes", enc_u64s(&[c.total_bytes]).as_slice())?;
            let nb = tx.cas.next_blob;
            tx.meta.insert("next_blob", enc_u64s(&[nb]).as_slice())?;
        }
        wtx.commit()?;
        Ok(results)
    }

    /// Convenience for tests: apply one op durably and return its result.
    #[cfg(test)]
    pub(crate) fn apply_one(&self, op: Op) -> Result<Option<EntryId>> {
        self.apply(vec![op], redb::Durability::Immediate)?
            .pop()
            .unwrap_or(Ok(None))
    }

    /// Make every earlier non-durable commit durable (an empty `Immediate` commit).
    pub(crate) fn sync(&self) -> Result<()> {
        let mut wtx = self.db()?.begin_write()?;
        wtx.set_durability(redb::Durability::Immediate)?;
        wtx.commit()?;
        Ok(())
    }

    pub fn get_entry(&self, id: EntryId) -> Result<Option<Entry>> {
        let rx = self.db()?.begin_read()?;
        let t = rx.open_table(ENTRIES)?;
        let r = match t.get(id)? {
            Some(g) => Some(decode_json::<Entry>("entry", g.value())?),
            None => None,
        };
        Ok(r)
    }

    /// The bytes behind `HEX` / `blake3:HEX`, verified; `None` if unknown (or collected).
    pub fn blob_get(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        let key = cas::parse_hash(hash)?;
        let rx = self.db()?.begin_read()?;
        let blobs = rx.open_table(BLOBS)?;
        let data = rx.open_table(BLOB_DATA)?;
        let by_hash = rx.open_table(BLOB_HASH)?;
        cas::read(&blobs, &data, &by_hash, &key)
    }

    /// [`Store::blob_get`] for a reader limited to `scope`: under [`Scope::Principal`] the
    /// bytes come back only when one of that principal's own entries lists the hash among its
    /// outputs, and `None` otherwise, exactly as for a hash nobody stored (no existence
    /// oracle). [`Scope::All`] reads every blob.
    ///
    /// Why a scan and no index: the principal's own entry ids are already an index stream
    /// (`TAG_PRINCIPAL`), and an entry's output hashes are in its row, so walking that stream
    /// (newest first: the hash a reader asks for is usually of a recent exec) decides the
    /// question exactly with no schema change and no cost on the write path. A row is decoded
    /// only when the 64 hex digits occur in its bytes. The cost is bounded by the principal's
    /// own entries, like a `journal.query` with an unindexed filter, and it is paid before the
    /// blob table is looked at, so how long a refusal takes says nothing about whether
    /// someone else stored the hash. Transcript rows and pins are not consulted: a token only
    /// ever learns hashes from journal entries (`out:N` goes through its session).
    pub fn blob_get_scoped(&self, hash: &str, scope: &Scope) -> Result<Option<Vec<u8>>> {
        let Scope::Principal(principal) = scope else {
            return self.blob_get(hash);
        };
        let key = cas::parse_hash(hash)?;
        let hex = cas::to_hex(&key);
        let rx = self.db()?.begin_read()?;
        if !references(&rx, principal, &hex)? {
            return Ok(None);
        }
        let blobs = rx.open_table(BLOBS)?;
        let data = rx.open_table(BLOB_DATA)?;
        let by_hash = rx.open_table(BLOB_HASH)?;
        cas::read(&blobs, &data, &by_hash, &key)
    }

    pub fn blob_info(&self, hash: &str) -> Result<Option<BlobInfo>> {
        let key = cas::parse_hash(hash)?;
        let rx = self.db()?.begin_read()?;
        let blobs = rx.open_table(BLOBS)?;
        let by_hash = rx.open_table(BLOB_HASH)?;
        let pins = rx.open_table(PINS)?;
        Ok(
            cas::find(&blobs, &by_hash, &key)?.map(|(_, m, _)| BlobInfo {
                len: m.raw_len,
                stored_len: m.stored_len,
                refs: m.refs,
                pinned: pins.get(key.as_slice()).ok().flatten().is_some(),
            }),
        )
    }

    pub fn transcript_get(&self, session: &str, n: u64) -> Result<Option<TranscriptRow>> {
        let rx = self.db()?.begin_read()?;
        let t = rx.open_table(TRANSCRIPT)?;
        let key = with_id(&name_prefix(session), n);
        let r = match t.get(key.as_slice())? {
            Some(g) => Some(decode_json("transcript", g.value())?),
            None => None,
        };
        Ok(r)
    }

    /// Highest persisted `out:N` of a session (a restarted session continues after it).
    pub fn transcript_last(&self, session: &str) -> Result<Option<u64>> {
        let rx = self.db()?.begin_read()?;
        let t = rx.open_table(TRANSCRIPT)?;
        last_in_prefix(&t, &name_prefix(session))
    }

    /// The `out:N` high-water mark reserved for a session (0 when none was).
    pub fn refs_reserved(&self, session: &str) -> Result<u64> {
        let rx = self.db()?.begin_read()?;
        let meta = rx.open_table(META)?;
        apply::opt_counter(&meta, &reserve_key(session))
    }

    /// All persisted rows of a session, ascending `n`.
    pub fn transcript_rows(&self, session: &str) -> Result<Vec<TranscriptRow>> {
        let rx = self.db()?.begin_read()?;
        let t = rx.open_table(TRANSCRIPT)?;
        let p = name_prefix(session);
        let (a, b) = (with_id(&p, 0), with_id(&p, u64::MAX));
        let mut out = Vec::new();
        for r in t.range(a.as_slice()..=b.as_slice())? {
            let (_, v) = r?;
            out.push(decode_json("transcript", v.value())?);
        }
        Ok(out)
    }

    /// Events of `channel` with `seq > since` (all when `since` is `None`), ascending; `limit`
    /// (0 = no limit) keeps the newest tail.
    pub fn events_read(
        &self,
        channel: &str,
        since: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        let rx = self.db()?.begin_read()?;
        let t = rx.open_table(EVENTS)?;
        let p = name_prefix(channel);
        let start = match since {
            None => 0,
            Some(u64::MAX) => return Ok(Vec::new()),
            Some(s) => s + 1,
        };
        let (a, b) = (with_id(&p, start), with_id(&p, u64::MAX));
        let mut out = Vec::new();
        for r in t.range(a.as_slice()..=b.as_slice())?.rev() {
            if limit > 0 && out.len() >= limit {
                break;
            }
            let (k, v) = r?;
            let seq = key_id(k.value())?;
            let (ts, payload): (i64, serde_json::Value) = decode_json("event", v.value())?;
            out.push(StoredEvent { seq, ts, payload });
        }
        out.reverse();
        Ok(out)
    }

    /// Highest persisted seq of `channel` (`None` for a fresh store: the bus starts at 0).
    pub fn max_seq(&self, channel: &str) -> Result<Option<u64>> {
        let rx = self.db()?.begin_read()?;
        let t = rx.open_table(EVENTS)?;
        last_in_prefix(&t, &name_prefix(channel))
    }

    pub fn stats(&self) -> Result<StoreStats> {
        let rx = self.db()?.begin_read()?;
        let meta = rx.open_table(META)?;
        let blobs = rx.open_table(BLOBS)?;
        Ok(StoreStats {
            entries: read_counter(&meta, "entry_count")?,
            bytes: read_counter(&meta, "total_bytes")?,
            blobs: blobs.len()?,
            next_id: read_counter(&meta, "next_id")?,
            file_bytes: std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0),
        })
    }

    /// Rewrite the file to reclaim free space (offline maintenance: needs exclusive access, so
    /// not while a writer runs). Returns whether anything was compacted.
    pub fn compact(&mut self) -> Result<bool> {
        let g = shoal_base::sync::RwLocked::locked_mut(&mut self.db);
        let db = g
            .as_mut()
            .and_then(std::sync::Arc::get_mut)
            .ok_or_else(|| JournalError::Storage("the journal is in use".into()))?;
        db.compact()
            .map_err(|e| JournalError::Storage(e.to_string()))
    }

    /// Next entry id the store would allocate.
    pub fn next_id(&self) -> Result<EntryId> {
        Ok(self.stats()?.next_id)
    }

    /// Recount every blob's refs from entries, transcripts and pins and compare with the stored
    /// refcounts; returns the list of mismatches (empty when consistent). For tests and `fsck`.
    pub fn check_refcounts(&self) -> Result<Vec<String>> {
        use std::collections::BTreeMap;
        let rx = self.db()?.begin_read()?;
        let mut want: BTreeMap<[u8; 32], u64> = BTreeMap::new();
        let mut add = |o: &OutputRef| -> Result<()> {
            if o.stored {
                *want.entry(cas::parse_hash(&o.hash)?).or_default() += 1;
            }
            Ok(())
        };
        for r in rx.open_table(ENTRIES)?.iter()? {
            let (_, v) = r?;
            let e: Entry = decode_json("entry", v.value())?;
            for o in &e.outputs {
                add(o)?;
            }
        }
        for r in rx.open_table(TRANSCRIPT)?.iter()? {
            let (_, v) = r?;
            let row: TranscriptRow = decode_json("transcript", v.value())?;
            for o in row.value.iter().chain(row.render.iter()) {
                add(o)?;
            }
        }
        for r in rx.open_table(PINS)?.iter()? {
            let (k, _) = r?;
            let mut key = [0u8; 32];
            if k.value().len() == 32 {
                key.copy_from_slice(k.value());
            }
            *want.entry(key).or_default() += 1;
        }
        let mut bad = Vec::new();
        let blobs = rx.open_table(BLOBS)?;
        let data = rx.open_table(BLOB_DATA)?;
        let by_hash = rx.open_table(BLOB_HASH)?;
        let mut n_ext = 0u64;
        for r in blobs.iter()? {
            let (k, v) = r?;
            let (m, _) = cas::parse_record(k.value(), v.value())?;
            n_ext += u64::from(m.external());
            let w = want.remove(&m.hash).unwrap_or(0);
            if w != m.refs {
                bad.push(format!(
                    "{}: refs {}, expected {w}",
                    cas::to_hex(&m.hash),
                    m.refs
                ));
            }
            match cas::read(&blobs, &data, &by_hash, &m.hash) {
                Err(e) => bad.push(e.to_string()),
                Ok(None) => bad.push(format!("{}: not in the hash index", cas::to_hex(&m.hash))),
                Ok(Some(_)) => {}
            }
        }
        if data.len()? != n_ext {
            bad.push(format!(
                "{} data rows for {n_ext} external blobs",
                data.len()?
            ));
        }
        if by_hash.len()? != blobs.len()? {
            bad.push("hash index size differs from blob count".into());
        }
        for (k, w) in want {
            bad.push(format!("{}: {w} refs to a missing blob", cas::to_hex(&k)));
        }
        Ok(bad)
    }
}

/// Whether an entry of `principal` lists `hex` (lowercase blake3) among its outputs; see
/// [`Store::blob_get_scoped`]. The index key may be truncated (a principal name past
/// [`MAX_INDEX_KEY`] bytes shares its rows with others of the same prefix), so the decoded
/// entry's principal decides, as in `journal.query`. A row that fails to decode grants
/// nothing.
fn references(rx: &redb::ReadTransaction, principal: &str, hex: &str) -> Result<bool> {
    let entries = rx.open_table(ENTRIES)?;
    let idx = rx.open_table(IDX)?;
    let p = idx_prefix(TAG_PRINCIPAL, principal);
    let (a, b) = (with_id(&p, 0), with_id(&p, u64::MAX));
    let finder = memchr::memmem::Finder::new(hex.as_bytes());
    for r in idx.range(a.as_slice()..=b.as_slice())?.rev() {
        let id = key_id(r?.0.value())?;
        let Some(g) = entries.get(id)? else {
            continue;
        };
        if finder.find(g.value()).is_none() {
            continue;
        }
        let Ok(e) = decode_json::<Entry>("entry", g.value()) else {
            continue;
        };
        if e.principal == principal && e.outputs.iter().any(|o| o.hash == hex) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn last_in_prefix<T: ReadableTable<&'static [u8], V>, V: redb::Value + 'static>(
    t: &T,
    prefix: &[u8],
) -> Result<Option<u64>> {
    let (a, b) = (with_id(prefix, 0), with_id(prefix, u64::MAX));
    match t.range(a.as_slice()..=b.as_slice())?.next_back() {
        Some(r) => Ok(Some(key_id(r?.0.value())?)),
        None => Ok(None),
    }
}
