//! What crosses the pair between the daemon and a worker process: the
//! daemon's requests and notes ([`ToWorker`]), the worker's
//! ([`FromWorker`]), and an evaluation's result in a form that crosses
//! ([`evaluated_json`], [`evaluated_from`]). Values travel in the journal's
//! wire encoding: what the daemon keeps of a worker's value is what it
//! would read back from the journal after a restart.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use crate::eval::{Evaluated, Ran};
use crate::msg::SessionError;
use shoal_lang::{ParseError, Position, Warning};
use shoal_proto::rpc::RpcError;
use shoal_proto::wire;
use shoal_value::{shown::Shown, ShoalError, Value};

/// The first frame the daemon sends, before the worker confines itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Init {
    /// The token principal whose sessions the worker evaluates.
    pub principal: String,
    /// The text of the config the daemon runs with (its `[policy]` and
    /// `[limits]`; empty: the defaults), as the daemon read it at start.
    pub config: String,
    /// The daemon's state dir.
    pub state_dir: PathBuf,
    /// What no token reaches (the daemon's `protect` list).
    pub protected: Vec<PathBuf>,
}

/// The worker's answer to [`Init`]: confined and ready.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ready {
    pub pid: u32,
}

/// From the daemon to a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ToWorker {
    /// Host session `session` (its language session starts on first use).
    Open {
        session: String,
        cwd: PathBuf,
        env: Vec<(String, String)>,
        session_memory: u64,
        spill_bytes: u64,
    },
    /// Evaluate (a request: the reply is [`evaluated_json`] or an error).
    Exec(ExecJob),
    /// Derive the effects of `src` in `session` (planning; nothing runs): a
    /// request, answered `{"derived": ..}` ([`derived_json`]) or an error.
    Derive {
        session: String,
        src: String,
        /// The caller's principal (`None`: the session's owner).
        caller: Option<String>,
    },
    /// Fork `session`'s language state as of its last exec for a
    /// background task of `src`, behind the owner's Leash verdict on it (a
    /// request, answered `{"fork": key}` or an error; nothing runs yet).
    Fork { session: String, src: String },
    /// Run a background task on fork `fork` (one made by [`ToWorker::Fork`]
    /// or by the language's `cmd &`): a request answered as an exec is.
    Task { fork: u64, job: ExecJob },
    /// Send `signal` to the process group of job `job`'s running program
    /// (a task's suspend and resume): a request, answered `{"pid": pid}`
    /// (0: no program runs).
    Signal { job: u64, signal: i32 },
    /// Stop hosting `session`.
    Close { session: String },
    /// A note: cancel job `job` (again, while it runs).
    Interrupt { job: u64 },
    /// A note: deliver a `user.*` event to `session`'s channel readers.
    Inject {
        session: String,
        channel: String,
        value: Json,
    },
}

/// One exec as the worker gets it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecJob {
    pub session: String,
    /// The daemon's number for it (what [`ToWorker::Interrupt`] names).
    pub job: u64,
    pub src: String,
    pub value_position: bool,
    pub tty: bool,
    pub width: usize,
    /// The caller's principal (`None`: the session's owner).
    pub caller: Option<String>,
    pub check: bool,
    /// An approved plan's place: the run is refused anywhere else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<shoal_policy::plan::Place>,
    /// That plan's effects (`Effect::to_json`): the caller's gate lets
    /// them through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved: Vec<Json>,
}

/// A hosted session's views after an exec that changed them (its cwd,
/// environment and top-level names), for `shoal://session/*`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Live {
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub names: Vec<String>,
}

impl ExecJob {
    pub fn position(&self) -> Position {
        if self.value_position {
            Position::Value
        } else {
            Position::Stmt
        }
    }
}

/// From a worker to the daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FromWorker {
    /// What `out:n` of `session` is (a request: the reply is its wire value).
    Lookup { session: String, n: u64 },
    /// A note: publish `value` on `channel` (a `user.*` channel).
    Publish {
        session: String,
        channel: String,
        value: Json,
    },
    /// A note: output of the program task job `job` runs (`data`: base64
    /// bytes of its stderr, else of its stdout), for the task's tail.
    Output {
        job: u64,
        stderr: bool,
        data: String,
    },
    /// The session's tasks as an evaluation reaches them (`cmd &`, `jobs`,
    /// a task handle's methods): a request, answered as [`TaskAsk`] says.
    Tasks { session: String, ask: TaskAsk },
}

/// What an evaluation in the worker asks of its session's tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "ask", rename_all = "snake_case")]
pub enum TaskAsk {
    /// Start a task of `src` on fork `fork` (already past the Leash
    /// verdict): `{"task": id}`.
    Start { src: String, fork: u64 },
    /// Every task (`id` absent) or one: `{"tasks": [TaskInfo..]}`
    /// (`shoal_lang::eval::TaskInfo`).
    List {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
    },
    /// Wait until task `id` ends: `{"value": wire}` or `{"raised": wire error}`.
    Wait { id: u64 },
    /// Cancel, suspend or resume task `id`: `null`.
    Control {
        id: u64,
        control: shoal_lang::eval::TaskControl,
    },
}

/// The warning codes the parser gives (a crossing warning's code must be
/// one of them).
const WARNING_CODES: &[&str] = &["builtin_in_chain", "dollar_in_string"];

fn warnings_json(ws: &[Warning]) -> Json {
    shoal_proto::kernel::warnings_json(ws)
}

fn span_from(j: &Json) -> shoal_lang::ast::Span {
    let n = |k: &str| {
        j.get(k)
            .and_then(Json::as_u64)
            .and_then(|x| u32::try_from(x).ok())
            .unwrap_or(0)
    };
    shoal_lang::ast::Span {
        start: n("start"),
        end: n("end"),
    }
}

fn warnings_from(j: &Json) -> Vec<Warning> {
    let s = |w: &Json, k: &str| w.get(k).and_then(Json::as_str).unwrap_or("").to_string();
    j.as_array()
        .map(|ws| {
            ws.iter()
                .filter_map(|w| {
                    let code = w.get("code").and_then(Json::as_str)?;
                    let code = WARNING_CODES.iter().find(|c| **c == code)?;
                    Some(Warning {
                        code,
                        message: s(w, "message"),
                        span: span_from(w.get("span").unwrap_or(&Json::Null)),
                        hint: s(w, "hint"),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

fn shown_json(s: &Shown) -> Json {
    json!({
        "status": s.status,
        "body": s.body,
        "stderr": s.stderr,
        "truncated": s.truncated,
        "cells_cut": s.cells_cut,
    })
}

fn shown_from(j: &Json) -> Shown {
    let opt = |k: &str| j.get(k).and_then(Json::as_str).map(str::to_string);
    let flag = |k: &str| j.get(k).and_then(Json::as_bool).unwrap_or(false);
    Shown {
        status: opt("status"),
        body: opt("body").unwrap_or_default(),
        stderr: opt("stderr"),
        truncated: flag("truncated"),
        cells_cut: flag("cells_cut"),
    }
}

/// `e` as it crosses.
pub fn error_json(e: &SessionError) -> Json {
    match e {
        SessionError::Internal(m) => json!({"internal": m}),
        e => json!({"rpc": crate::peer::session_error(e.clone())}),
    }
}

/// An error that crossed.
pub fn error_from(j: &Json) -> SessionError {
    if let Some(m) = j.get("internal").and_then(Json::as_str) {
        return SessionError::Internal(m.to_string());
    }
    let r = j.get("rpc").unwrap_or(&Json::Null);
    let mut e = RpcError::new(
        r.get("code").and_then(Json::as_i64).unwrap_or(-32603),
        r.get("message")
            .and_then(Json::as_str)
            .unwrap_or("the worker failed"),
    );
    e.data = r.get("data").cloned();
    SessionError::Rpc(e)
}

/// A plan's derivation as it crosses.
pub fn derived_json(d: &shoal_policy::undo::Derived) -> Json {
    json!({
        "effects": d.effects.iter().map(shoal_policy::Effect::to_json).collect::<Vec<_>>(),
        "lost": d.undo.lost,
        "trashed": d.undo.trashed,
        "trash_dir": d.undo.trash_dir,
        "place": d.place,
    })
}

/// A derivation that crossed (`None`: not one).
pub fn derived_from(j: &Json) -> Option<shoal_policy::undo::Derived> {
    let strings = |k: &str| -> Option<Vec<String>> {
        j.get(k)?
            .as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let effects = j
        .get("effects")?
        .as_array()?
        .iter()
        .map(shoal_policy::Effect::from_json)
        .collect::<Option<Vec<_>>>()?;
    let place = match j.get("place") {
        None | Some(Json::Null) => None,
        Some(p) => Some(serde_json::from_value(p.clone()).ok()?),
    };
    Some(shoal_policy::undo::Derived {
        effects,
        undo: shoal_policy::undo::Undo {
            lost: strings("lost")?,
            trashed: strings("trashed")?,
            trash_dir: j
                .get("trash_dir")
                .and_then(Json::as_str)
                .map(str::to_string),
        },
        place,
    })
}

/// A raised error as it crosses: its wire form and a command's exit status.
fn error_value_json(e: &ShoalError) -> Json {
    let mut j = wire::error(e);
    if let (Some(status), Some(o)) = (e.status, j.as_object_mut()) {
        o.insert("status".into(), json!(status));
    }
    j
}

fn error_value_from(j: &Json) -> Option<ShoalError> {
    let mut e = match &wire::decode(j)? {
        Value::Error(e) => ShoalError::clone(e),
        _ => return None,
    };
    e.status = j.get("status").and_then(Json::as_i64);
    Some(e)
}

/// A value that crossed: as the journal reads it back, but a task (what
/// `cmd &` gives) stays a task, not its number.
fn value_from(j: &Json) -> Option<Value> {
    if j.get("$").and_then(Json::as_str) == Some("task") {
        let id = j.get("id")?.as_u64()?;
        return Some(Value::Task(std::sync::Arc::new(shoal_value::TaskRef {
            id,
        })));
    }
    wire::decode(j)
}

/// `e` as it crosses.
pub fn evaluated_json(e: &Evaluated) -> Json {
    let ran = match &e.ran {
        Ran::Panicked(m) => json!({"panicked": m}),
        Ran::Parse(p) => json!({"parse": {
            "msg": p.msg,
            "span": {"start": p.span.start, "end": p.span.end},
            "hint": p.hint,
        }}),
        Ran::Raised { error, warnings } => json!({
            "raised": error_value_json(error),
            "warnings": warnings_json(warnings),
        }),
        Ran::Value {
            value,
            shown,
            warnings,
        } => json!({
            "value": wire::encode(value),
            "shown": shown_json(shown),
            "warnings": warnings_json(warnings),
        }),
    };
    json!({
        "effects": e.effects,
        "cwd": e.cwd,
        "ts": e.ts,
        "elapsed_ns": u64::try_from(e.elapsed.as_nanos()).unwrap_or(u64::MAX),
        "ran": ran,
    })
}

/// An evaluation that crossed (`None`: not one).
pub fn evaluated_from(j: &Json) -> Option<Evaluated> {
    let ran = j.get("ran")?;
    let ran = if let Some(m) = ran.get("panicked") {
        Ran::Panicked(m.as_str()?.to_string())
    } else if let Some(p) = ran.get("parse") {
        Ran::Parse(ParseError {
            msg: p.get("msg")?.as_str()?.to_string(),
            span: span_from(p.get("span")?),
            hint: p.get("hint").and_then(Json::as_str).map(str::to_string),
        })
    } else if let Some(r) = ran.get("raised") {
        let error = error_value_from(r)?;
        Ran::Raised {
            error,
            warnings: warnings_from(ran.get("warnings")?),
        }
    } else {
        let v = ran.get("value")?;
        // What does not decode (a closure, a stream) is kept as its text.
        let value = value_from(v).unwrap_or_else(|| {
            let repr = v
                .get("repr")
                .or_else(|| v.get("label"))
                .and_then(Json::as_str)
                .unwrap_or("<value>");
            Value::str(repr)
        });
        Ran::Value {
            value,
            shown: shown_from(ran.get("shown")?),
            warnings: warnings_from(ran.get("warnings")?),
        }
    };
    Some(Evaluated {
        effects: j.get("effects")?.as_array()?.clone(),
        cwd: PathBuf::from(j.get("cwd")?.as_str()?),
        ts: j.get("ts")?.as_i64()?,
        elapsed: Duration::from_nanos(j.get("elapsed_ns")?.as_u64()?),
        ran,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evaluation_crosses_whole() {
        let e = Evaluated {
            effects: vec![json!({"kind": "fs_read", "path": "/p"})],
            cwd: PathBuf::from("/proj"),
            ts: 7,
            elapsed: Duration::from_micros(1500),
            ran: Ran::Value {
                value: Value::List(std::sync::Arc::new(vec![Value::Int(1), Value::str("a")])),
                shown: Shown {
                    status: Some("exit status 1".into()),
                    body: "[1, a]".into(),
                    stderr: None,
                    truncated: true,
                    cells_cut: false,
                },
                warnings: vec![Warning {
                    code: "dollar_in_string",
                    message: "m".into(),
                    span: shoal_lang::ast::Span { start: 1, end: 3 },
                    hint: "h".into(),
                }],
            },
        };
        let back = evaluated_from(&evaluated_json(&e)).unwrap();
        assert_eq!(back.effects, e.effects);
        assert_eq!((back.cwd, back.ts, back.elapsed), (e.cwd, e.ts, e.elapsed));
        match (back.ran, e.ran) {
            (
                Ran::Value {
                    value,
                    shown,
                    warnings,
                },
                Ran::Value {
                    value: v0,
                    shown: s0,
                    warnings: w0,
                },
            ) => {
                assert_eq!(wire::encode(&value), wire::encode(&v0));
                assert_eq!(shown, s0);
                assert_eq!(warnings, w0);
            }
            _ => panic!("not a value"),
        }
        let raised = Evaluated {
            effects: vec![],
            cwd: PathBuf::from("/"),
            ts: 0,
            elapsed: Duration::ZERO,
            ran: Ran::Raised {
                error: ShoalError::new(shoal_value::ErrorCode::Permission, "denied"),
                warnings: vec![],
            },
        };
        let d = shoal_policy::undo::Derived {
            effects: vec![
                shoal_policy::Effect::FsDelete {
                    paths: vec!["/p/a".into()],
                },
                shoal_policy::Effect::Opaque,
            ],
            undo: shoal_policy::undo::Undo {
                lost: vec!["rm --permanent deletes /p/a for good".into()],
                trashed: vec!["/p/b".into()],
                trash_dir: Some("/t".into()),
            },
            place: Some(shoal_policy::plan::Place {
                cwd: PathBuf::from("/p"),
                env: "e".into(),
                files: vec![shoal_policy::place::BoundFile {
                    path: PathBuf::from("/p/x"),
                    digest: "b3:00".into(),
                }],
                unbound: false,
            }),
        };
        assert_eq!(derived_from(&derived_json(&d)), Some(d));
        match evaluated_from(&evaluated_json(&raised)).unwrap().ran {
            Ran::Raised { error, .. } => {
                assert_eq!(error.msg, "denied");
                assert_eq!(error.code, shoal_value::ErrorCode::Permission);
            }
            _ => panic!("not raised"),
        }
    }
}
