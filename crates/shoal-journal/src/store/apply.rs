//! The write path of [`Store::apply`](super::Store::apply): one [`Tx`] per batch holds every
//! table open in the write transaction and applies ops to all of them together (entry row, index
//! rows, entry-time row, blobs and refcounts, transcript rows, events, meta counters), so nothing
//! is ever torn by a crash. Retention runs at the end of the same transaction.
//!
//! Never called from outside the store; never panics on stored data (a row that fails to decode
//! is a per-op error, or skipped when deleting).

use redb::{ReadableTable, Table};

use super::{Op, StoreOptions, TranscriptRow};
use crate::cas::{self, CasTables};
use crate::schema::*;
use crate::{Entry, EntryId, Finish, JournalError, NewEntry, OutputKind, OutputRef, Result};

#[derive(Clone, Copy, Debug)]
pub(crate) struct Counters {
    pub(crate) next_id: u64,
    pub(crate) entry_count: u64,
    pub(crate) total_bytes: u64,
}

pub(crate) fn read_counter<T: ReadableTable<&'static str, &'static [u8]>>(
    t: &T,
    k: &str,
) -> Result<u64> {
    match t.get(k)? {
        Some(g) => Ok(u64s::<1>(k, g.value())?[0]),
        None => Err(JournalError::Corrupt(format!("meta {k} missing"))),
    }
}

/// A meta counter that may be absent (0 then).
pub(crate) fn opt_counter<T: ReadableTable<&'static str, &'static [u8]>>(
    t: &T,
    k: &str,
) -> Result<u64> {
    match t.get(k)? {
        Some(g) => Ok(u64s::<1>(k, g.value())?[0]),
        None => Ok(0),
    }
}

fn i64_be(v: i64) -> [u8; 8] {
    v.to_be_bytes()
}

/// (ts, prefix-max, suffix-min) of an entry-time row.
pub(crate) fn decode_tsw(b: &[u8]) -> Result<[i64; 3]> {
    let [a, m, n] = u64s::<3>("entry_time", b)?;
    Ok([a as i64, m as i64, n as i64])
}

fn encode_tsw(v: [i64; 3]) -> Vec<u8> {
    v.iter().flat_map(|x| i64_be(*x)).collect()
}

/// Index keys of an entry: (tag, key).
pub(crate) fn index_keys(e: &Entry) -> Vec<(u8, String)> {
    let mut v = vec![
        (TAG_PRINCIPAL, e.principal.clone()),
        (TAG_HEAD, e.head().to_string()),
    ];
    if let Some(ok) = e.ok {
        v.push((TAG_OK, ok.to_string()));
    }
    for k in e.effect_kinds() {
        v.push((TAG_EFFECT, k));
    }
    v
}

pub(crate) struct Tx<'a> {
    pub(crate) meta: Table<'a, &'static str, &'static [u8]>,
    pub(crate) entries: Table<'a, u64, &'static [u8]>,
    pub(crate) tsw: Table<'a, u64, &'static [u8]>,
    pub(crate) idx: Table<'a, &'static [u8], ()>,
    pub(crate) cas: CasTables<'a>,
    pub(crate) pins: Table<'a, &'static [u8], ()>,
    pub(crate) pinned: Table<'a, u64, ()>,
    pub(crate) transcript: Table<'a, &'static [u8], &'static [u8]>,
    pub(crate) events: Table<'a, &'static [u8], &'static [u8]>,
    pub(crate) c: Counters,
    pub(crate) opts: &'a StoreOptions,
    /// The highest entry-time row, cached for the common append-at-the-end path.
    pub(crate) last_tsw: Option<(u64, [i64; 3])>,
}

impl Tx<'_> {
    pub(crate) fn apply_op(&mut self, op: Op) -> Result<Option<EntryId>> {
        match op {
            Op::Append { id, entry } => self.append(id, entry).map(Some),
            Op::Finish { id, finish } => self.finish(id, finish).map(|_| None),
            Op::Record { id, entry, finish } => self.record(id, entry, finish).map(Some),
            Op::Transcript {
                session,
                n,
                ts,
                entry_id,
                value,
                render,
            } => {
                let value = Some(self.put_output(OutputKind::Value, &value)?);
                let render = Some(self.put_output(OutputKind::Render, &render)?);
                self.put_transcript(TranscriptRow {
                    session,
                    n,
                    ts,
                    entry_id,
                    value,
                    render,
                })?;
                Ok(None)
            }
            Op::DropTranscript { session } => {
                let p = name_prefix(&session);
                let (a, b) = (with_id(&p, 0), with_id(&p, u64::MAX));
                let mut rows = Vec::new();
                for r in self.transcript.range(a.as_slice()..=b.as_slice())? {
                    let (k, v) = r?;
                    rows.push((k.value().to_vec(), v.value().to_vec()));
                }
                for (k, v) in rows {
                    if let Ok(row) = decode_json::<TranscriptRow>("transcript", &v) {
                        self.release_row(&row)?;
                    }
                    self.transcript.remove(k.as_slice())?;
                }
                Ok(None)
            }
            Op::Event {
                channel,
                seq,
                ts,
                payload,
            } => {
                let p = name_prefix(&channel);
                let key = with_id(&p, seq);
                self.events
                    .insert(key.as_slice(), encode_json(&(ts, &*payload))?.as_slice())?;
                if let Some(max) = self.opts.retention.max_entries {
                    // keep at most `max` events per channel (seqs are dense)
                    loop {
                        let a = with_id(&p, 0);
                        let first = match self.events.range(a.as_slice()..)?.next() {
                            Some(r) => {
                                let k = r?.0.value().to_vec();
                                if !k.starts_with(&p) || k.len() != p.len() + 8 {
                                    break;
                                }
                                k
                            }
                            None => break,
                        };
                        if key_id(&first)?.saturating_add(max) > seq {
                            break;
                        }
                        self.events.remove(first.as_slice())?;
                    }
                }
                Ok(None)
            }
            Op::ReserveRefs { session, upto } => {
                let key = super::reserve_key(&session);
                let have = opt_counter(&self.meta, &key)?;
                if upto > have {
                    self.meta
                        .insert(key.as_str(), enc_u64s(&[upto]).as_slice())?;
                }
                Ok(None)
            }
            Op::ReleaseRefs { session, upto } => {
                let key = super::reserve_key(&session);
                let have = opt_counter(&self.meta, &key)?;
                if upto < have {
                    self.meta
                        .insert(key.as_str(), enc_u64s(&[upto]).as_slice())?;
                }
                Ok(None)
            }
            Op::PinBlob(h) => {
                let key = cas::parse_hash(&h)?;
                if self.pins.get(key.as_slice())?.is_none() {
                    if !self.cas.add_ref(&key)? {
                        return Err(JournalError::Invalid(format!("no such blob: {h}")));
                    }
                    self.pins.insert(key.as_slice(), ())?;
                }
                Ok(None)
            }
            Op::UnpinBlob(h) => {
                let key = cas::parse_hash(&h)?;
                if self.pins.remove(key.as_slice())?.is_some() {
                    let freed = self.cas.release(&key)?;
                    self.c.total_bytes = self.c.total_bytes.saturating_sub(freed);
                }
                Ok(None)
            }
            Op::PinEntry(id) => {
                if self.entries.get(id)?.is_none() {
                    return Err(JournalError::Invalid(format!("no such entry: {id}")));
                }
                self.pinned.insert(id, ())?;
                Ok(None)
            }
            Op::UnpinEntry(id) => {
                self.pinned.remove(id)?;
                Ok(None)
            }
        }
    }

    fn new_row(&mut self, id: Option<EntryId>, e: NewEntry) -> Result<Entry> {
        let id = id.unwrap_or(self.c.next_id);
        if id == 0 {
            return Err(JournalError::Invalid("entry id 0".into()));
        }
        // next_id is always above every stored id, so only older ids need the lookup
        if id < self.c.next_id && self.entries.get(id)?.is_some() {
            return Err(JournalError::Invalid(format!("duplicate entry id {id}")));
        }
        Ok(Entry {
            id,
            session: e.session,
            principal: e.principal,
            ts: e.ts,
            dur_ns: None,
            cwd: e.cwd,
            src: e.src,
            ast: e.ast,
            effects: e.effects,
            status: None,
            ok: None,
            opaque: e.opaque,
            outputs: Vec::new(),
        })
    }

    /// Insert a new row with all its index rows.
    fn write_new(&mut self, entry: &Entry) -> Result<EntryId> {
        let id = entry.id;
        let bytes = encode_json(entry)?;
        self.entries.insert(id, bytes.as_slice())?;
        for (tag, key) in index_keys(entry) {
            self.idx
                .insert(with_id(&idx_prefix(tag, &key), id).as_slice(), ())?;
        }
        self.insert_tsw(id, entry.ts)?;
        self.c.next_id = self.c.next_id.max(id + 1);
        self.c.entry_count += 1;
        self.c.total_bytes += bytes.len() as u64;
        Ok(id)
    }

    fn append(&mut self, id: Option<EntryId>, e: NewEntry) -> Result<EntryId> {
        let entry = self.new_row(id, e)?;
        self.write_new(&entry)
    }

    fn record(&mut self, id: Option<EntryId>, e: NewEntry, f: Finish) -> Result<EntryId> {
        let mut entry = self.new_row(id, e)?;
        self.fill_finish(&mut entry, f)?;
        self.write_new(&entry)
    }

    fn insert_tsw(&mut self, id: u64, ts: i64) -> Result<()> {
        if id >= self.c.next_id {
            // appending after every stored id: no later rows to fix
            let prev = match self.last_tsw {
                Some((k, row)) if k < id => Some(row),
                _ => match self.tsw.last()? {
                    Some((k, v)) if k.value() < id => Some(decode_tsw(v.value())?),
                    _ => None,
                },
            };
            let row = [ts, prev.map_or(ts, |p| p[1].max(ts)), ts];
            self.tsw.insert(id, encode_tsw(row).as_slice())?;
            self.last_tsw = Some((id, row));
            if prev.is_some_and(|p| p[2] > ts) {
                self.lower_suffix_min(id, ts)?;
            }
            return Ok(());
        }
        self.last_tsw = None;
        let prev = match self.tsw.range(..id)?.next_back() {
            Some(r) => Some(decode_tsw(r?.1.value())?),
            None => None,
        };
        let next = match self.tsw.range(id + 1..)?.next() {
            Some(r) => Some(decode_tsw(r?.1.value())?),
            None => None,
        };
        let pmax = prev.map_or(ts, |p| p[1].max(ts));
        let smin = next.map_or(ts, |n| n[2].min(ts));
        self.tsw
            .insert(id, encode_tsw([ts, pmax, smin]).as_slice())?;
        // later rows: prefix-max must cover this ts (only when ids arrive out of order)
        let mut fix = Vec::new();
        for r in self.tsw.range(id + 1..)? {
            let (k, v) = r?;
            let row = decode_tsw(v.value())?;
            if row[1] >= pmax {
                break;
            }
            fix.push((k.value(), [row[0], pmax, row[2]]));
        }
        for (k, row) in fix {
            self.tsw.insert(k, encode_tsw(row).as_slice())?;
        }
        self.lower_suffix_min(id, ts)
    }

    /// Earlier rows: suffix-min must cover `ts` (only when the clock went backwards).
    fn lower_suffix_min(&mut self, id: u64, ts: i64) -> Result<()> {
        let mut fix = Vec::new();
        for r in self.tsw.range(..id)?.rev() {
            let (k, v) = r?;
            let row = decode_tsw(v.value())?;
            if row[2] <= ts {
                break;
            }
            fix.push((k.value(), [row[0], row[1], ts]));
        }
        for (k, row) in fix {
            self.tsw.insert(k, encode_tsw(row).as_slice())?;
        }
        Ok(())
    }

    fn put_output(&mut self, kind: OutputKind, bytes: &[u8]) -> Result<OutputRef> {
        self.put_output_refs(kind, bytes, 1)
    }

    /// Store an output taking `refs` refs at once.
    fn put_output_refs(&mut self, kind: OutputKind, bytes: &[u8], refs: u64) -> Result<OutputRef> {
        let len = bytes.len() as u64;
        if len > self.opts.max_blob_bytes {
            return Ok(OutputRef {
                kind,
                hash: cas::hash_hex(bytes),
                len,
                stored: false,
            });
        }
        let (hash, added) = self.cas.put_refs(bytes, refs)?;
        self.c.total_bytes += added;
        Ok(OutputRef {
            kind,
            hash,
            len,
            stored: true,
        })
    }

    fn release(&mut self, o: &OutputRef) -> Result<()> {
        if o.stored {
            if let Ok(key) = cas::parse_hash(&o.hash) {
                let freed = self.cas.release(&key)?;
                self.c.total_bytes = self.c.total_bytes.saturating_sub(freed);
            }
        }
        Ok(())
    }

    fn release_row(&mut self, row: &TranscriptRow) -> Result<()> {
        for o in row.value.iter().chain(row.render.iter()) {
            self.release(o)?;
        }
        Ok(())
    }

    fn put_transcript(&mut self, row: TranscriptRow) -> Result<()> {
        let key = with_id(&name_prefix(&row.session), row.n);
        let old = self
            .transcript
            .get(key.as_slice())?
            .map(|g| g.value().to_vec());
        self.transcript
            .insert(key.as_slice(), encode_json(&row)?.as_slice())?;
        if let Some(old) = old {
            if let Ok(old) = decode_json::<TranscriptRow>("transcript", &old) {
                self.release_row(&old)?;
            }
        }
        Ok(())
    }

    fn finish(&mut self, id: EntryId, f: Finish) -> Result<()> {
        let old = match self.entries.get(id)? {
            Some(g) => g.value().to_vec(),
            None => return Err(JournalError::Invalid(format!("no such entry: {id}"))),
        };
        let mut e: Entry = decode_json("entry", &old)?;
        if e.ok.is_some() {
            return Err(JournalError::Invalid(format!(
                "entry {id} already finished"
            )));
        }
        self.fill_finish(&mut e, f)?;
        let bytes = encode_json(&e)?;
        self.entries.insert(id, bytes.as_slice())?;
        self.c.total_bytes =
            (self.c.total_bytes + bytes.len() as u64).saturating_sub(old.len() as u64);
        self.idx.insert(
            with_id(&idx_prefix(TAG_OK, &e.ok.unwrap_or(false).to_string()), id).as_slice(),
            (),
        )?;
        Ok(())
    }

    /// Outputs into the CAS, result fields, optional transcript row.
    fn fill_finish(&mut self, e: &mut Entry, f: Finish) -> Result<()> {
        // the transcript row's refs on the first value/render output are taken with the output
        let mut extra = [f.transcript.is_some(); 2];
        for o in &f.outputs {
            let slot = match o.kind {
                OutputKind::Value => extra.get_mut(0),
                OutputKind::Render => extra.get_mut(1),
                _ => None,
            };
            let refs = match slot {
                Some(x) if *x => {
                    *x = false;
                    2
                }
                _ => 1,
            };
            let r = self.put_output_refs(o.kind, &o.bytes, refs)?;
            e.outputs.push(r);
        }
        e.dur_ns = Some(f.dur_ns);
        e.status = f.status;
        e.ok = Some(f.ok);
        if let Some(n) = f.transcript {
            let pick = |k: OutputKind| e.outputs.iter().find(|o| o.kind == k).cloned();
            let row = TranscriptRow {
                session: e.session.clone(),
                n,
                ts: e.ts,
                entry_id: Some(e.id),
                value: pick(OutputKind::Value),
                render: pick(OutputKind::Render),
            };
            self.put_transcript(row)?;
        }
        Ok(())
    }

    fn delete_entry(&mut self, id: EntryId) -> Result<()> {
        let Some(bytes) = self.entries.remove(id)?.map(|g| g.value().to_vec()) else {
            return Ok(());
        };
        self.c.entry_count = self.c.entry_count.saturating_sub(1);
        self.c.total_bytes = self.c.total_bytes.saturating_sub(bytes.len() as u64);
        self.tsw.remove(id)?;
        // A corrupt row cannot name its index rows; they dangle harmlessly (queries verify
        // every hit against the entry row).
        if let Ok(e) = decode_json::<Entry>("entry", &bytes) {
            for (tag, key) in index_keys(&e) {
                self.idx
                    .remove(with_id(&idx_prefix(tag, &key), id).as_slice())?;
            }
            for o in &e.outputs {
                self.release(o)?;
            }
        }
        Ok(())
    }

    fn over_limit(&self) -> bool {
        let r = &self.opts.retention;
        r.max_entries.is_some_and(|m| self.c.entry_count > m)
            || r.max_bytes
                .is_some_and(|m| self.c.total_bytes > m && self.c.entry_count > r.floor)
    }

    /// Delete oldest unpinned entries while over a limit, at most `budget` per batch.
    pub(crate) fn retention(&mut self, budget: u64) -> Result<()> {
        if !self.over_limit() {
            return Ok(());
        }
        let mut victims = Vec::new();
        let mut cursor = 0u64;
        let mut done = 0u64;
        while done < budget && self.over_limit() {
            if victims.is_empty() {
                for r in self.entries.range(cursor..)? {
                    let id = r?.0.value();
                    cursor = id + 1;
                    if self.pinned.get(id)?.is_none() {
                        victims.push(id);
                        if victims.len() >= 64 {
                            break;
                        }
                    }
                }
                if victims.is_empty() {
                    break; // everything left is pinned
                }
                victims.reverse();
            }
            if let Some(id) = victims.pop() {
                self.delete_entry(id)?;
                done += 1;
            }
        }
        Ok(())
    }
}
