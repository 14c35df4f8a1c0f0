//! Content-addressed blob store. A blob is addressed by blake3 of its uncompressed bytes
//! (lowercase hex on the wire) and stored once, refcounted.
//!
//! Layout (three tables, all keys fixed-width):
//! - `blobs`: blob id (u64, allocated sequentially) → record
//!   `refs u64 | raw_len u64 | stored_len u64 | flag u8 | blake3 [32] | inline data`;
//!   the flag says raw or lz4 (tried from [`COMPRESS_THRESHOLD`] bytes, kept only when it saves
//!   space) and whether the data is inline (stored ≤ [`INLINE_MAX`]) or in `blob_data`.
//! - `blob_data`: blob id → stored bytes of a large blob (so a refcount change never rewrites it).
//! - `blob_hash`: `blake3[0..8] | blob id` → (), the lookup index (a prefix collision only
//!   costs one more record read; the full hash in the record decides).
//!
//! Why sequential ids plus a 16-byte hash index rather than records keyed by hash: hash keys are
//! random, and every random insert dirties a B-tree page at commit time. Keeping the random part
//! down to 16-byte keys (≈250 per page) and the records append-only cut the pages a group commit
//! writes (and checksums) several-fold, which is what bounds batched append throughput.
//!
//! Why inside redb and not as files under the state dir: a blob, the entry or transcript row
//! that references it and its refcount are written in one transaction, so a crash (SIGKILL
//! included) never leaves a ref without its bytes or an orphan file, GC is transactional, and
//! there is one fsync per group commit instead of one per file. Blobs are capped
//! ([`super::StoreOptions::max_blob_bytes`], default 64 MiB); larger outputs are recorded
//! (`hash`, `len`, `stored:false`) but their bytes are not kept.
//!
//! GC is by reference count: one ref per entry output, per transcript row field and per pin. A
//! blob is deleted in the same transaction that drops its last ref, so GC can never remove what
//! a live transcript row, a pinned blob or a kept entry needs. Every read re-hashes and fails
//! with [`JournalError::Corrupt`] on mismatch.

use redb::{ReadableTable, Table};

use super::{JournalError, Result};

/// Blobs at least this large are lz4-compressed (kept raw if compression does not help).
pub const COMPRESS_THRESHOLD: usize = 512;
/// Stored data up to this size sits inline in the blob record.
pub const INLINE_MAX: usize = 2048;
/// Refuse to inflate anything claiming more than this (guards corrupt headers).
const MAX_INFLATE: u64 = 4 << 30;
const HEADER: usize = 57;
const F_LZ4: u8 = 1;
const F_EXTERNAL: u8 = 2;

/// blake3 of `bytes` as 64 lowercase hex chars.
pub fn hash_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Parse `HEX` or `blake3:HEX` (64 hex chars, either case) into the 32-byte hash.
pub fn parse_hash(s: &str) -> Result<[u8; 32]> {
    let hex = s.strip_prefix("blake3:").unwrap_or(s);
    blake3::Hash::from_hex(hex)
        .map(|h| *h.as_bytes())
        .map_err(|_| JournalError::Invalid(format!("not a blake3 hash: {s:?}")))
}

pub fn to_hex(key: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*key).to_hex().to_string()
}

/// The fixed part of a blob record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlobMeta {
    pub refs: u64,
    pub raw_len: u64,
    pub stored_len: u64,
    pub flag: u8,
    pub hash: [u8; 32],
}

fn bad(what: impl std::fmt::Display, m: &str) -> JournalError {
    JournalError::Corrupt(format!("blob {what}: {m}"))
}

fn be(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(b);
    u64::from_be_bytes(x)
}

/// Split a record into its header and inline data.
pub fn parse_record(id: u64, rec: &[u8]) -> Result<(BlobMeta, &[u8])> {
    if rec.len() < HEADER {
        return Err(bad(format!("#{id}"), "short record"));
    }
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&rec[25..57]);
    let m = BlobMeta {
        refs: be(&rec[0..8]),
        raw_len: be(&rec[8..16]),
        stored_len: be(&rec[16..24]),
        flag: rec[24],
        hash,
    };
    if m.flag & !(F_LZ4 | F_EXTERNAL) != 0 {
        return Err(bad(format!("#{id}"), "unknown flags"));
    }
    Ok((m, &rec[HEADER..]))
}

fn record(m: &BlobMeta, inline: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + inline.len());
    v.extend_from_slice(&m.refs.to_be_bytes());
    v.extend_from_slice(&m.raw_len.to_be_bytes());
    v.extend_from_slice(&m.stored_len.to_be_bytes());
    v.push(m.flag);
    v.extend_from_slice(&m.hash);
    v.extend_from_slice(inline);
    v
}

impl BlobMeta {
    pub fn external(&self) -> bool {
        self.flag & F_EXTERNAL != 0
    }
}

/// Decode stored data (inline or external) and verify it against the record's hash.
pub fn decode_data(m: &BlobMeta, data: &[u8]) -> Result<Vec<u8>> {
    let name = to_hex(&m.hash);
    if data.len() as u64 != m.stored_len {
        return Err(bad(&name, "stored length mismatch"));
    }
    let bytes = if m.flag & F_LZ4 != 0 {
        if m.raw_len > MAX_INFLATE {
            return Err(bad(&name, "implausible length"));
        }
        lz4_flex::block::decompress(data, m.raw_len as usize)
            .map_err(|e| bad(&name, &e.to_string()))?
    } else {
        data.to_vec()
    };
    if bytes.len() as u64 != m.raw_len {
        return Err(bad(&name, "length mismatch"));
    }
    if blake3::hash(&bytes).as_bytes() != &m.hash {
        return Err(bad(&name, "hash mismatch"));
    }
    Ok(bytes)
}

fn hkey(hash: &[u8; 32], id: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&hash[..8]);
    k[8..].copy_from_slice(&id.to_be_bytes());
    k
}

/// Find a blob by hash: its id, header and the raw record.
pub fn find<B, H>(
    blobs: &B,
    by_hash: &H,
    hash: &[u8; 32],
) -> Result<Option<(u64, BlobMeta, Vec<u8>)>>
where
    B: ReadableTable<u64, &'static [u8]>,
    H: ReadableTable<[u8; 16], ()>,
{
    let (a, b) = (hkey(hash, 0), hkey(hash, u64::MAX));
    for r in by_hash.range(a..=b)? {
        let k = r?.0.value();
        let id = be(&k[8..]);
        if let Some(g) = blobs.get(id)? {
            let rec = g.value().to_vec();
            let (m, _) = parse_record(id, &rec)?;
            if &m.hash == hash {
                return Ok(Some((id, m, rec)));
            }
        }
    }
    Ok(None)
}

/// Read and verify a blob.
pub fn read<B, D, H>(blobs: &B, data: &D, by_hash: &H, hash: &[u8; 32]) -> Result<Option<Vec<u8>>>
where
    B: ReadableTable<u64, &'static [u8]>,
    D: ReadableTable<u64, &'static [u8]>,
    H: ReadableTable<[u8; 16], ()>,
{
    let Some((id, m, rec)) = find(blobs, by_hash, hash)? else {
        return Ok(None);
    };
    if m.external() {
        let Some(d) = data.get(id)? else {
            return Err(bad(to_hex(hash), "data missing"));
        };
        return decode_data(&m, d.value()).map(Some);
    }
    decode_data(&m, &rec[HEADER..]).map(Some)
}

/// The write-side tables of the content store.
pub struct CasTables<'a> {
    pub blobs: Table<'a, u64, &'static [u8]>,
    pub data: Table<'a, u64, &'static [u8]>,
    pub by_hash: Table<'a, [u8; 16], ()>,
    /// Next blob id (persisted by the caller).
    pub next_blob: u64,
}

impl CasTables<'_> {
    /// Store `bytes` (if absent) and take `n` ≥ 1 refs. Returns the hex hash and the number of
    /// new bytes stored (0 when deduplicated).
    pub fn put_refs(&mut self, bytes: &[u8], n: u64) -> Result<(String, u64)> {
        let h = blake3::hash(bytes);
        let hash = *h.as_bytes();
        if self.add_refs(&hash, n)? {
            return Ok((h.to_hex().to_string(), 0));
        }
        let mut flag = 0u8;
        let compressed;
        let mut stored: &[u8] = bytes;
        if bytes.len() >= COMPRESS_THRESHOLD {
            compressed = lz4_flex::block::compress(bytes);
            if compressed.len() + 16 < bytes.len() {
                stored = &compressed;
                flag |= F_LZ4;
            }
        }
        let id = self.next_blob.max(1);
        self.next_blob = id + 1;
        let external = stored.len() > INLINE_MAX;
        if external {
            flag |= F_EXTERNAL;
            self.data.insert(id, stored)?;
        }
        let m = BlobMeta {
            refs: n,
            raw_len: bytes.len() as u64,
            stored_len: stored.len() as u64,
            flag,
            hash,
        };
        let rec = record(&m, if external { &[] } else { stored });
        self.blobs.insert(id, rec.as_slice())?;
        self.by_hash.insert(hkey(&hash, id), ())?;
        Ok((h.to_hex().to_string(), m.stored_len + HEADER as u64))
    }

    /// Take one more ref on an existing blob; false if it does not exist.
    pub fn add_ref(&mut self, hash: &[u8; 32]) -> Result<bool> {
        self.add_refs(hash, 1)
    }

    fn add_refs(&mut self, hash: &[u8; 32], n: u64) -> Result<bool> {
        let Some((id, mut m, rec)) = find(&self.blobs, &self.by_hash, hash)? else {
            return Ok(false);
        };
        m.refs += n;
        self.blobs
            .insert(id, record(&m, &rec[HEADER..]).as_slice())?;
        Ok(true)
    }

    /// Drop one ref; deletes the blob at zero. Returns the bytes freed.
    pub fn release(&mut self, hash: &[u8; 32]) -> Result<u64> {
        let Some((id, mut m, rec)) = find(&self.blobs, &self.by_hash, hash)? else {
            return Ok(0);
        };
        if m.refs > 1 {
            m.refs -= 1;
            self.blobs
                .insert(id, record(&m, &rec[HEADER..]).as_slice())?;
            return Ok(0);
        }
        self.blobs.remove(id)?;
        self.by_hash.remove(hkey(hash, id))?;
        if m.external() {
            self.data.remove(id)?;
        }
        Ok(m.stored_len + HEADER as u64)
    }
}
