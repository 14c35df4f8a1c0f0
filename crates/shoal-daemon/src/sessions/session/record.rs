//! What one exec leaves for the journal ([`PendingJournal`]), whether it is
//! cheap enough to hand over before the reply, and the count of acknowledged
//! execs whose record is not yet handed to the journal writer (the daemon's
//! shutdown waits for it). Runs on the worker (or a task's) thread only; the
//! full wire encoding here is the journal's storage path, never a reply.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use super::panic_message;
use super::shared::SessionShared;
use crate::event_bus::Publish;
use crate::journal_writer::{self, ExecRecord, Ran};
use shoal_base::sync::Locked;
use shoal_proto::wire;
use shoal_value::{ShoalError, Value};

/// Whether `v` encodes to at most about `limit` bytes: a walk that gives up as
/// soon as the count passes it (so it costs at most ~`limit / 16` steps).
fn encodes_small(v: &Value, limit: usize) -> bool {
    let mut left = limit as i64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        left -= 16;
        match v {
            Value::Str(s) => left -= s.len() as i64,
            Value::Path(p) => left -= p.as_os_str().len() as i64,
            Value::Bytes(b) => left -= b.len() as i64,
            Value::Outcome(o) => left -= (o.stdout.len() + o.stderr.len()) as i64,
            Value::Error(e) => {
                left -= (e.msg.len() + e.stderr.as_ref().map_or(0, |b| b.len())) as i64
            }
            Value::List(l) => {
                left -= 16 * l.len() as i64;
                if left >= 0 {
                    stack.extend(l.iter());
                }
            }
            Value::Record(r) => {
                left -= 16 * r.len() as i64;
                if left >= 0 {
                    for (k, v) in r.iter() {
                        left -= k.len() as i64;
                        stack.push(v);
                    }
                }
            }
            Value::Table(t) => {
                left -= 16 * t.len() as i64;
                if left >= 0 {
                    for r in t.iter() {
                        left -= 16 * r.len() as i64;
                        if left < 0 {
                            break;
                        }
                        for (k, v) in r.iter() {
                            left -= k.len() as i64;
                            stack.push(v);
                        }
                    }
                }
            }
            _ => {}
        }
        if left < 0 {
            return false;
        }
    }
    true
}

/// Execs acknowledged (batched durability) whose journal record the worker
/// has not yet handed to the journal writer.
static RECORDS_IN_FLIGHT: (Mutex<usize>, std::sync::Condvar) =
    (Mutex::new(0), std::sync::Condvar::new());

pub(super) struct RecordInFlight;

impl RecordInFlight {
    pub(super) fn begin() -> RecordInFlight {
        *RECORDS_IN_FLIGHT.0.locked() += 1;
        RecordInFlight
    }
}

impl Drop for RecordInFlight {
    fn drop(&mut self) {
        let mut n = RECORDS_IN_FLIGHT.0.locked();
        *n = n.saturating_sub(1);
        if *n == 0 {
            RECORDS_IN_FLIGHT.1.notify_all();
        }
    }
}

/// Wait (at most `limit`) until every acknowledged exec's journal record has
/// been handed to the journal writer: the daemon calls it before its final
/// flush, so a batched exec acknowledged just before shutdown is durable.
/// `false` when the limit passed first.
pub fn wait_records_handed_off(limit: std::time::Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut n = RECORDS_IN_FLIGHT.0.locked();
    while *n > 0 {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return false;
        };
        n = shoal_base::sync::wait_timeout_locked(&RECORDS_IN_FLIGHT.1, n, left);
    }
    true
}

/// What one exec leaves for the journal, recorded after or before the reply.
pub(super) struct PendingJournal {
    pub(super) n: u64,
    pub(super) principal: Option<String>,
    /// The caller's connection id and client name (the live view's "who").
    pub(super) by: (u64, Option<std::sync::Arc<str>>),
    pub(super) effects: Vec<serde_json::Value>,
    pub(super) src: String,
    pub(super) cwd: PathBuf,
    pub(super) ts: i64,
    pub(super) dur_ns: i64,
    pub(super) ran: PendingRan,
}

pub(super) enum PendingRan {
    Value {
        value: Value,
        render: String,
        bounded: String,
    },
    Raised(ShoalError),
}

/// Records of values (and renders) encoding to at most about this many bytes
/// are handed to the journal before the reply (batched durability).
const SMALL_RECORD: usize = 8 << 10;

impl PendingJournal {
    /// Cheap to encode: recorded before the reply.
    pub(super) fn is_small(&self) -> bool {
        match &self.ran {
            PendingRan::Value { value, render, .. } => {
                render.len() <= SMALL_RECORD && encodes_small(value, SMALL_RECORD)
            }
            PendingRan::Raised(e) => {
                e.msg.len() + e.stderr.as_ref().map_or(0, |b| b.len()) <= SMALL_RECORD
            }
        }
    }

    /// Journal the exec (its events go to `events`); the error is the reason
    /// it is not durable.
    pub(super) fn record(
        self,
        shared: &SessionShared,
        events: &mut Vec<Publish>,
    ) -> Result<(), String> {
        let Some(svc) = &shared.services else {
            return Ok(());
        };
        // The stored value is the full tagged encoding (refs survive restarts).
        let ran = match self.ran {
            PendingRan::Value {
                ref value,
                render,
                bounded,
            } => {
                let wire = match catch_unwind(AssertUnwindSafe(|| wire::encode_to_vec(value))) {
                    Ok(w) => w,
                    Err(p) => {
                        let m = format!("encoding panicked: {}", panic_message(&p));
                        tracing::error!(session = %shared.name, "{m}");
                        return Err(m);
                    }
                };
                Ran::Value {
                    value,
                    wire,
                    render,
                    bounded,
                }
            }
            PendingRan::Raised(ref e) => Ran::Raised { error: e },
        };
        let rec = ExecRecord {
            session: &shared.name,
            principal: self
                .principal
                .unwrap_or_else(journal_writer::local_principal),
            cwd: &self.cwd,
            src: self.src,
            ts: self.ts,
            dur_ns: self.dur_ns,
            n: self.n,
            ran,
            effects: self.effects,
            by: self.by,
        };
        match journal_writer::record_exec(svc, rec, events) {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::debug!(session = %shared.name, "exec not journaled: {e}");
                Err(e.to_string())
            }
        }
    }
}
