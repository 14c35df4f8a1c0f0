//! `journal.query`: filters, the visibility [`Scope`] applied, and the index-driven planner.
//!
//! Semantics (docs/protocol.md §6): every filter is applied before `limit`; results are newest first
//! (by entry id); `since`/`until` are inclusive bounds on the start time `ts` (ns); `principal`
//! and `head` (first whitespace word of `src`) match exactly; `ok` matches finished entries only;
//! `session` matches exactly (checked per candidate); `effects` is all-of, each name matching an effect kind exactly after `.`→`_`; `limit` 0 or
//! absent means 100 (capped at [`MAX_LIMIT`]). [`Scope::Principal`] restricts to that principal's
//! own entries.
//!
//! Plan: key filters (principal/scope, head, ok, each effect) are sorted id streams in the `idx`
//! table; one stream is walked backwards, several are intersected walking down together (a stream
//! steps through its iterator while it skips few ids and re-seeks with one B-tree descent when it
//! would skip many), none means walking entry ids backwards. The time window is first
//! turned into an id range with the entry-time table (prefix-max / suffix-min of `ts`, both
//! monotone in id, so two binary searches bound the ids that can possibly match), then checked
//! exactly per candidate. Every hit is verified against the decoded entry, so indexes only ever
//! make a query faster, never different.

use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};

use super::schema::*;
use super::scope::Scope;
use super::store::decode_tsw;
use super::store::Store;
use super::{Entry, EntryId, JournalError, Result};
use shoal_base::text::effect_kind_snake;

/// Default and maximum `limit`.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 10_000;

/// Filters of `journal.query` (all optional), as they arrive in JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Query {
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub principal: Option<String>,
    pub ok: Option<bool>,
    pub effects: Option<Vec<String>>,
    pub head: Option<String>,
    /// The session the entry ran in (exact; checked per candidate, not indexed).
    pub session: Option<String>,
    pub limit: Option<usize>,
}

impl Query {
    pub fn effective_limit(&self) -> usize {
        match self.limit {
            None | Some(0) => DEFAULT_LIMIT,
            Some(n) => n.min(MAX_LIMIT),
        }
    }

    /// A query that can match nothing by construction is a caller's mistake:
    /// say so instead of answering an empty list.
    pub fn check(&self) -> std::result::Result<(), String> {
        if let (Some(s), Some(u)) = (self.since, self.until) {
            if s > u {
                return Err(format!(
                    "since ({s}) is after until ({u}): no entry can match; both are Unix nanoseconds"
                ));
            }
        }
        Ok(())
    }

    /// Exact predicate (the planner's ground truth).
    pub fn matches(&self, scope: &Scope, e: &Entry) -> bool {
        if let Scope::Principal(p) = scope {
            if &e.principal != p {
                return false;
            }
        }
        if self.since.is_some_and(|s| e.ts < s) || self.until.is_some_and(|u| e.ts > u) {
            return false;
        }
        if self.principal.as_ref().is_some_and(|p| &e.principal != p) {
            return false;
        }
        if self.ok.is_some() && e.ok != self.ok {
            return false;
        }
        if self.head.as_ref().is_some_and(|h| e.head() != h) {
            return false;
        }
        if self.session.as_ref().is_some_and(|s| &e.session != s) {
            return false;
        }
        if let Some(want) = &self.effects {
            let have = e.effect_kinds();
            if !want.iter().all(|k| have.contains(&effect_kind_snake(k))) {
                return false;
            }
        }
        true
    }
}

type Tbl<K, V> = redb::ReadOnlyTable<K, V>;

/// One key stream walked downwards: steps through its iterator while the ids it skips are few,
/// re-seeks (a fresh reverse range, one B-tree descent) when it would have to skip many.
struct Stream {
    prefix: Vec<u8>,
    it: redb::Range<'static, &'static [u8], ()>,
    cur: Option<u64>,
    lo: u64,
}

/// Steps taken before a stream re-seeks instead.
const STEPS_BEFORE_SEEK: u32 = 8;

impl Stream {
    fn open(idx: &Tbl<&'static [u8], ()>, prefix: Vec<u8>, lo: u64, hi: u64) -> Result<Stream> {
        let mut it =
            idx.range(with_id(&prefix, lo).as_slice()..=with_id(&prefix, hi).as_slice())?;
        let cur = next_id(&mut it)?;
        Ok(Stream {
            prefix,
            it,
            cur,
            lo,
        })
    }

    /// Largest id of the stream ≤ `target` (None when exhausted).
    fn le(&mut self, idx: &Tbl<&'static [u8], ()>, target: u64) -> Result<Option<u64>> {
        let mut steps = 0;
        loop {
            match self.cur {
                None => return Ok(None),
                Some(c) if c <= target => return Ok(Some(c)),
                Some(_) if steps >= STEPS_BEFORE_SEEK => {
                    if target < self.lo {
                        self.cur = None;
                        return Ok(None);
                    }
                    let (a, b) = (
                        with_id(&self.prefix, self.lo),
                        with_id(&self.prefix, target),
                    );
                    self.it = idx.range(a.as_slice()..=b.as_slice())?;
                    self.cur = next_id(&mut self.it)?;
                    steps = 0;
                }
                Some(_) => {
                    self.cur = next_id(&mut self.it)?;
                    steps += 1;
                }
            }
        }
    }
}

fn next_id(it: &mut redb::Range<'static, &'static [u8], ()>) -> Result<Option<u64>> {
    match it.next_back() {
        Some(r) => Ok(Some(key_id(r?.0.value())?)),
        None => Ok(None),
    }
}

/// Smallest key whose entry-time row satisfies the monotone predicate `pred`.
fn lower_bound(
    tsw: &Tbl<u64, &'static [u8]>,
    pred: impl Fn([i64; 3]) -> bool,
) -> Result<Option<u64>> {
    let (first, last) = match (tsw.first()?, tsw.last()?) {
        (Some(f), Some(l)) => (
            (f.0.value(), decode_tsw(f.1.value())?),
            (l.0.value(), decode_tsw(l.1.value())?),
        ),
        _ => return Ok(None),
    };
    if !pred(last.1) {
        return Ok(None);
    }
    if pred(first.1) {
        return Ok(Some(first.0));
    }
    let mut best = last.0; // pred(best) holds
    let (mut lo, mut hi) = (first.0 + 1, last.0.saturating_sub(1));
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        let (k, row) = match tsw.range(mid..best)?.next() {
            Some(r) => {
                let r = r?;
                (r.0.value(), decode_tsw(r.1.value())?)
            }
            None => {
                if mid == 0 {
                    break;
                }
                hi = mid - 1;
                continue;
            }
        };
        if pred(row) {
            best = k;
            if k == 0 {
                break;
            }
            hi = k - 1;
        } else {
            lo = k + 1;
        }
    }
    Ok(Some(best))
}

impl Store {
    /// Run a query (see the module doc). Results newest first.
    pub fn query(&self, q: &Query, scope: &Scope) -> Result<Vec<Entry>> {
        let limit = q.effective_limit();
        let rx = self.db()?.begin_read()?;
        let entries = rx.open_table(ENTRIES)?;
        let tsw = rx.open_table(TSW)?;
        let idx = rx.open_table(IDX)?;

        // --- id range from the time window
        let (mut lo, mut hi) = (1u64, u64::MAX);
        if let (Some(s), Some(u)) = (q.since, q.until) {
            if s > u {
                return Ok(Vec::new());
            }
        }
        if let Some(s) = q.since {
            // first id whose prefix-max ts reaches `since`
            match lower_bound(&tsw, |r| r[1] >= s)? {
                Some(id) => lo = lo.max(id),
                None => return Ok(Vec::new()),
            }
        }
        if let Some(u) = q.until {
            // ids with suffix-min ts > until cannot match
            if let Some(id) = lower_bound(&tsw, |r| r[2] > u)? {
                if id <= 1 {
                    return Ok(Vec::new());
                }
                hi = hi.min(id - 1);
            }
        }
        if lo > hi {
            return Ok(Vec::new());
        }

        // --- key streams
        let mut streams: Vec<Vec<u8>> = Vec::new();
        let principal = match (&q.principal, scope) {
            (Some(p), Scope::Principal(s)) if p != s => return Ok(Vec::new()),
            (Some(p), _) => Some(p.clone()),
            (None, Scope::Principal(s)) => Some(s.clone()),
            (None, Scope::All) => None,
        };
        if let Some(h) = &q.head {
            streams.push(idx_prefix(TAG_HEAD, h));
        }
        if let Some(p) = &principal {
            streams.push(idx_prefix(TAG_PRINCIPAL, p));
        }
        if let Some(effs) = &q.effects {
            let mut ks: Vec<String> = effs.iter().map(|k| effect_kind_snake(k)).collect();
            ks.sort();
            ks.dedup();
            for k in ks {
                streams.push(idx_prefix(TAG_EFFECT, &k));
            }
        }
        if let Some(ok) = q.ok {
            streams.push(idx_prefix(TAG_OK, &ok.to_string()));
        }
        let timed = q.since.is_some() || q.until.is_some();

        let mut out = Vec::new();
        let consider = |id: EntryId, out: &mut Vec<Entry>| -> Result<()> {
            if timed {
                match tsw.get(id)? {
                    Some(g) => {
                        let ts = decode_tsw(g.value())?[0];
                        if q.since.is_some_and(|s| ts < s) || q.until.is_some_and(|u| ts > u) {
                            return Ok(());
                        }
                    }
                    None => return Ok(()),
                }
            }
            if let Some(g) = entries.get(id)? {
                let e: Entry = decode_json("entry", g.value())
                    .map_err(|e| JournalError::Corrupt(format!("entry {id}: {e}")))?;
                if q.matches(scope, &e) {
                    out.push(e);
                }
            }
            Ok(())
        };

        match streams.len() {
            0 => {
                for r in tsw.range(lo..=hi)?.rev() {
                    if out.len() >= limit {
                        break;
                    }
                    let id = r?.0.value();
                    consider(id, &mut out)?;
                }
            }
            1 => {
                let (a, b) = (with_id(&streams[0], lo), with_id(&streams[0], hi));
                for r in idx.range(a.as_slice()..=b.as_slice())?.rev() {
                    if out.len() >= limit {
                        break;
                    }
                    let id = key_id(r?.0.value())?;
                    consider(id, &mut out)?;
                }
            }
            _ => {
                // intersection, walking down from `hi`: the candidate is the smallest current id
                // of all streams; streams above it catch up (step or re-seek)
                let mut ss = streams
                    .into_iter()
                    .map(|p| Stream::open(&idx, p, lo, hi))
                    .collect::<Result<Vec<_>>>()?;
                let mut target = hi;
                'outer: while out.len() < limit {
                    let mut lowest = target;
                    for s in ss.iter_mut() {
                        match s.le(&idx, target)? {
                            None => break 'outer,
                            Some(x) => lowest = lowest.min(x),
                        }
                    }
                    if lowest == target {
                        consider(target, &mut out)?;
                        if target <= lo {
                            break;
                        }
                        target -= 1;
                    } else {
                        target = lowest;
                    }
                }
            }
        }
        Ok(out)
    }
}
