//! What one exec leaves for the journal ([`PendingJournal`]) and whether it is
//! cheap enough to hand over before the reply. Runs on the worker (or a task's)
//! thread only; the full wire encoding here is the journal's storage path,
//! never a reply.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use super::panic_message;
use super::shared::SessionShared;
use crate::event_bus::Publish;
use crate::journal_writer::{self, ExecRecord, Ran};
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
