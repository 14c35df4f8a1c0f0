//! Table definitions, key/value encodings and the open/validate procedure of `journal.redb`.
//!
//! Every stored value is our own encoding: a version byte followed by JSON, or fixed-width
//! big-endian integers; every composite key is a byte string (`tag | len u32 BE | bytes | u64 BE`)
//! so ordering never depends on redb's tuple encodings (which redb 5 changes).
//!
//! Opening never overwrites anything that is not ours: a file without the redb magic is refused
//! before redb sees it; a redb file is first opened read-only and must carry our meta table
//! (`format = "shoal-journal"`, `schema_version <= SCHEMA_VERSION`) or be completely empty.
//! Only then is it opened for writing. A redb panic while opening a damaged file is caught and
//! reported as [`JournalError::Corrupt`].

use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use redb::{Database, ReadableDatabase, TableDefinition};

use super::{JournalError, Result};

/// Bump when the layout changes; older files are migrated, newer files are refused.
pub const SCHEMA_VERSION: u64 = 1;
/// Value of the `format` meta key.
pub const FORMAT: &[u8] = b"shoal-journal";
/// Version byte in front of every JSON-encoded value.
pub const VALUE_V1: u8 = 1;

const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// `format`, `schema_version`, `next_id`, `next_blob`, `entry_count`, `total_bytes`.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("shoal_meta");
/// entry id → VALUE_V1 + JSON of [`super::Entry`].
pub const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new("entries");
/// entry id → ts | prefix-max ts | suffix-min ts (3 × i64 BE); drives time-window planning.
pub const TSW: TableDefinition<u64, &[u8]> = TableDefinition::new("entry_time");
/// secondary indexes: `tag | len | key | id` → ().
pub const IDX: TableDefinition<&[u8], ()> = TableDefinition::new("idx");
/// blob id → blob record: refcount, lengths, hash and, when small, the bytes (see `cas`).
pub const BLOBS: TableDefinition<u64, &[u8]> = TableDefinition::new("blobs");
/// blob id → the stored bytes of a blob too large to sit in its record.
pub const BLOB_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("blob_data");
/// `blake3[0..8] | blob id` → (): lookup by hash.
pub const BLOB_HASH: TableDefinition<[u8; 16], ()> = TableDefinition::new("blob_hash");
/// pinned blobs (each pin holds one ref).
pub const PINS: TableDefinition<&[u8], ()> = TableDefinition::new("pins");
/// entries that retention must keep.
pub const PINNED_ENTRIES: TableDefinition<u64, ()> = TableDefinition::new("pinned_entries");
/// `len | session | n` → VALUE_V1 + JSON of a transcript row.
pub const TRANSCRIPT: TableDefinition<&[u8], &[u8]> = TableDefinition::new("transcript");
/// `len | channel | seq` → VALUE_V1 + JSON `{ts, payload}`.
pub const EVENTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("events");

pub const TAG_PRINCIPAL: u8 = b'p';
pub const TAG_HEAD: u8 = b'h';
pub const TAG_OK: u8 = b'o';
pub const TAG_EFFECT: u8 = b'e';

/// Index keys longer than this are truncated (queries then verify on the decoded entry).
pub const MAX_INDEX_KEY: usize = 512;

/// `tag | len u32 BE | bytes` (the prefix shared by all ids of one key).
pub fn idx_prefix(tag: u8, key: &str) -> Vec<u8> {
    let b = truncate_key(key).as_bytes();
    let mut v = Vec::with_capacity(b.len() + 13);
    v.push(tag);
    v.extend_from_slice(&(b.len() as u32).to_be_bytes());
    v.extend_from_slice(b);
    v
}

/// Longest char-boundary prefix of `key` of at most [`MAX_INDEX_KEY`] bytes.
pub fn truncate_key(key: &str) -> &str {
    if key.len() <= MAX_INDEX_KEY {
        return key;
    }
    let mut end = MAX_INDEX_KEY;
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    &key[..end]
}

pub fn with_id(prefix: &[u8], id: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(prefix.len() + 8);
    v.extend_from_slice(prefix);
    v.extend_from_slice(&id.to_be_bytes());
    v
}

/// Trailing u64 of a composite key.
pub fn key_id(key: &[u8]) -> Result<u64> {
    if key.len() < 8 {
        return Err(JournalError::Corrupt("short index key".into()));
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[key.len() - 8..]);
    Ok(u64::from_be_bytes(b))
}

/// `len u32 BE | name` prefix for the transcript and events tables.
pub fn name_prefix(name: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(name.len() + 12);
    v.extend_from_slice(&(name.len() as u32).to_be_bytes());
    v.extend_from_slice(name.as_bytes());
    v
}

pub fn encode_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>> {
    let mut out = vec![VALUE_V1];
    serde_json::to_writer(&mut out, v).map_err(|e| JournalError::Invalid(e.to_string()))?;
    Ok(out)
}

pub fn decode_json<T: serde::de::DeserializeOwned>(what: &str, b: &[u8]) -> Result<T> {
    match b.split_first() {
        Some((&VALUE_V1, rest)) => {
            serde_json::from_slice(rest).map_err(|e| JournalError::Corrupt(format!("{what}: {e}")))
        }
        Some((v, _)) => Err(JournalError::Corrupt(format!(
            "{what}: unknown value encoding version {v}"
        ))),
        None => Err(JournalError::Corrupt(format!("{what}: empty value"))),
    }
}

pub fn u64s<const N: usize>(what: &str, b: &[u8]) -> Result<[u64; N]> {
    if b.len() != N * 8 {
        return Err(JournalError::Corrupt(format!(
            "{what}: bad length {}",
            b.len()
        )));
    }
    let mut out = [0u64; N];
    for (i, o) in out.iter_mut().enumerate() {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[i * 8..i * 8 + 8]);
        *o = u64::from_be_bytes(x);
    }
    Ok(out)
}

pub fn enc_u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_be_bytes()).collect()
}

fn storage_msg(path: &Path, e: impl std::fmt::Display) -> JournalError {
    JournalError::Storage(format!("{}: {e}", path.display()))
}

fn classify(path: &Path, e: redb::DatabaseError) -> JournalError {
    let p = path.display().to_string();
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen => JournalError::Locked { path: p },
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(m)) => {
            JournalError::Corrupt(format!("{p}: {m}"))
        }
        redb::DatabaseError::UpgradeRequired(v) => {
            JournalError::Corrupt(format!("{p}: redb file format {v} needs a manual upgrade"))
        }
        other => storage_msg(path, other),
    }
}

fn panic_msg(path: &Path) -> JournalError {
    JournalError::Corrupt(format!(
        "{}: the store could not be read (damaged file)",
        path.display()
    ))
}

enum Kind {
    Fresh,
    Ours,
}

/// Inspect an opened database without writing: empty, ours, or an error.
fn inspect<D: ReadableDatabase>(path: &Path, db: &D) -> Result<Kind> {
    let p = path.display().to_string();
    let rx = db.begin_read().map_err(|e| storage_msg(path, e))?;
    let tables: Vec<String> = rx
        .list_tables()
        .map_err(|e| storage_msg(path, e))?
        .map(|t| redb::TableHandle::name(&t).to_string())
        .collect();
    if tables.is_empty() {
        return Ok(Kind::Fresh);
    }
    let meta = match rx.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => {
            return Err(JournalError::Foreign { path: p })
        }
        Err(e) => return Err(storage_msg(path, e)),
    };
    let format = meta.get("format").map_err(|e| storage_msg(path, e))?;
    if format.as_ref().map(|g| g.value()) != Some(FORMAT) {
        return Err(JournalError::Foreign { path: p });
    }
    let ver = meta
        .get("schema_version")
        .map_err(|e| storage_msg(path, e))?
        .ok_or_else(|| JournalError::Corrupt(format!("{p}: schema_version missing")))?;
    let [found] = u64s::<1>("schema_version", ver.value())?;
    if found > SCHEMA_VERSION {
        return Err(JournalError::TooNew {
            path: p,
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(Kind::Ours)
}

/// Open (or create) the journal database at `path`; see the module doc for the guarantees.
pub fn open_db(path: &Path, cache_bytes: usize) -> Result<Database> {
    let p = path.display().to_string();
    let len = |path: &Path| match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(m.len()),
        Ok(_) => Err(JournalError::NotAJournal { path: p.clone() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(storage_msg(path, e)),
    };
    if len(path)? == 0 {
        create_fresh(path, cache_bytes)?;
    }
    let existing_len = len(path)?;
    if existing_len > 0 {
        let mut head = [0u8; 9];
        let n = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| storage_msg(path, e))?;
        if n < head.len() || head != REDB_MAGIC {
            return Err(JournalError::NotAJournal { path: p });
        }
        let mut b = redb::Builder::new();
        b.set_cache_size(cache_bytes.min(16 << 20));
        match catch_unwind(AssertUnwindSafe(|| b.open_read_only(path))) {
            Err(_) => return Err(panic_msg(path)),
            Ok(Ok(ro)) => {
                let r = catch_unwind(AssertUnwindSafe(|| inspect(path, &ro)));
                drop(ro);
                match r {
                    Err(_) => return Err(panic_msg(path)),
                    Ok(r) => {
                        r?;
                    }
                }
            }
            // Needs crash recovery, which a read-only open refuses: recover, then inspect before
            // writing anything.
            Ok(Err(redb::DatabaseError::RepairAborted)) => {}
            Ok(Err(e)) => return Err(classify(path, e)),
        }
    }
    let mut b = redb::Builder::new();
    b.set_cache_size(cache_bytes);
    let db = match catch_unwind(AssertUnwindSafe(|| b.create(path))) {
        Err(_) => return Err(panic_msg(path)),
        Ok(r) => r.map_err(|e| classify(path, e))?,
    };
    let kind = match catch_unwind(AssertUnwindSafe(|| inspect(path, &db))) {
        Err(_) => return Err(panic_msg(path)),
        Ok(r) => r?,
    };
    if let Kind::Fresh = kind {
        init(&db)?;
    } else {
        ensure_tables(&db)?;
    }
    Ok(db)
}

/// A new journal is made whole beside `path` (`<path>.new`) and renamed into
/// place, so a daemon killed while creating it leaves no half-written file
/// that the next start would refuse as foreign; a stale `.new` is ours to
/// replace.
fn create_fresh(path: &Path, cache_bytes: usize) -> Result<()> {
    let mut name = path.as_os_str().to_os_string();
    name.push(".new");
    let tmp = std::path::PathBuf::from(name);
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(storage_msg(&tmp, e)),
    }
    shoal_base::paths::private_file(&tmp).map_err(|e| storage_msg(&tmp, e))?;
    let mut b = redb::Builder::new();
    b.set_cache_size(cache_bytes.min(16 << 20));
    let db = match catch_unwind(AssertUnwindSafe(|| b.create(&tmp))) {
        Err(_) => return Err(panic_msg(&tmp)),
        Ok(r) => r.map_err(|e| classify(&tmp, e))?,
    };
    init(&db)?;
    drop(db);
    std::fs::rename(&tmp, path).map_err(|e| storage_msg(path, e))?;
    // The rename is durable once the directory is synced.
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

fn init(db: &Database) -> Result<()> {
    let tx = db.begin_write()?;
    {
        let mut meta = tx.open_table(META)?;
        meta.insert("format", FORMAT)?;
        meta.insert("schema_version", enc_u64s(&[SCHEMA_VERSION]).as_slice())?;
        meta.insert("next_id", enc_u64s(&[1]).as_slice())?;
        meta.insert("next_blob", enc_u64s(&[1]).as_slice())?;
        meta.insert("entry_count", enc_u64s(&[0]).as_slice())?;
        meta.insert("total_bytes", enc_u64s(&[0]).as_slice())?;
    }
    create_all(&tx)?;
    tx.commit()?;
    Ok(())
}

fn create_all(tx: &redb::WriteTransaction) -> Result<()> {
    tx.open_table(ENTRIES)?;
    tx.open_table(TSW)?;
    tx.open_table(IDX)?;
    tx.open_table(BLOBS)?;
    tx.open_table(BLOB_DATA)?;
    tx.open_table(BLOB_HASH)?;
    tx.open_table(PINS)?;
    tx.open_table(PINNED_ENTRIES)?;
    tx.open_table(TRANSCRIPT)?;
    tx.open_table(EVENTS)?;
    Ok(())
}

/// Tables added by later minor versions are created here (none yet).
fn ensure_tables(db: &Database) -> Result<()> {
    let tx = db.begin_write()?;
    create_all(&tx)?;
    tx.commit()?;
    Ok(())
}
