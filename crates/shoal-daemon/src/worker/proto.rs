//! What crosses between the daemon and a worker process, every message a
//! typed struct: on the pair, the daemon's requests and notes
//! ([`ToWorker`]) and the worker's ([`FromWorker`], answered by
//! [`TaskAnswer`] and the like); on a hosted session's line, its jobs
//! ([`LineJob`]) and their [`Answer`]s, an evaluation crossing as a
//! [`Crossed`]. Values travel in the journal's wire encoding: what the
//! daemon keeps of a worker's value is what it would read back from the
//! journal after a restart.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::eval::{Evaluated, Ran};
use crate::msg::SessionError;
use shoal_lang::ast::Span;
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

/// What a hosted session's line carries from the daemon, one job at a
/// time, each answered on the line with an [`Answer`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineJob {
    /// Evaluate.
    Exec(ExecJob),
    /// Derive the effects of `src` (planning; nothing runs).
    Derive {
        src: String,
        /// The caller's principal (`None`: the session's owner).
        caller: Option<String>,
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

/// The daemon's answer to a [`TaskAsk`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskAnswer {
    /// A started task's id.
    Task(u64),
    /// The tasks listed.
    Tasks(Vec<shoal_lang::eval::TaskInfo>),
    /// What an awaited task ended with (wire).
    Value(Json),
    /// A control applied.
    Done,
    /// What the ask raised (wire error).
    Raised(Json),
}

impl TaskAnswer {
    /// `e` as a task answer.
    pub fn raised(e: &ShoalError) -> TaskAnswer {
        TaskAnswer::Raised(wire::error(e))
    }
}

/// The warning codes the parser gives (a crossing warning's code must be
/// one of them).
const WARNING_CODES: &[&str] = &["builtin_in_chain", "dollar_in_string"];

/// What a session's line (or a task's request on the pair) answers: the
/// outcome, and for the foreground the session's views when they changed
/// and what its memory holds.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer {
    pub outcome: Result<Outcome, Failed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<Live>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
}

impl Answer {
    /// Just `outcome`.
    pub fn of(outcome: Result<Outcome, Failed>) -> Answer {
        Answer {
            outcome,
            live: None,
            memory: None,
        }
    }
}

/// What a job came to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// An exec's (or a task's) evaluation.
    Done(Crossed),
    /// A plan's derivation.
    Derived(DerivedX),
}

/// What the session and its principal hold in the worker after an exec,
/// for `shoal status`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Memory {
    pub session: u64,
    pub principal: u64,
}

/// A job that failed before or instead of evaluating, as it crosses.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failed {
    Internal(String),
    Rpc {
        code: i64,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<Json>,
    },
}

impl From<&SessionError> for Failed {
    fn from(e: &SessionError) -> Failed {
        match e {
            SessionError::Internal(m) => Failed::Internal(m.clone()),
            e => {
                let r = crate::peer::session_error(e.clone());
                Failed::Rpc {
                    code: r.code,
                    message: r.message,
                    data: r.data,
                }
            }
        }
    }
}

impl From<Failed> for SessionError {
    fn from(f: Failed) -> SessionError {
        match f {
            Failed::Internal(m) => SessionError::Internal(m),
            Failed::Rpc {
                code,
                message,
                data,
            } => {
                let mut e = RpcError::new(code, message);
                e.data = data;
                SessionError::Rpc(e)
            }
        }
    }
}

/// A parser warning as it crosses.
#[derive(Debug, Serialize, Deserialize)]
pub struct WarningX {
    code: String,
    message: String,
    span: Span,
    hint: String,
}

fn warnings_x(ws: &[Warning]) -> Vec<WarningX> {
    ws.iter()
        .map(|w| WarningX {
            code: w.code.to_string(),
            message: w.message.clone(),
            span: w.span,
            hint: w.hint.clone(),
        })
        .collect()
}

/// The warnings that crossed, each with a code the parser gives (any other
/// is dropped).
fn warnings_back(ws: Vec<WarningX>) -> Vec<Warning> {
    ws.into_iter()
        .filter_map(|w| {
            let code = WARNING_CODES.iter().find(|c| **c == w.code)?;
            Some(Warning {
                code,
                message: w.message,
                span: w.span,
                hint: w.hint,
            })
        })
        .collect()
}

/// An evaluation as it crosses ([`Evaluated`]); values in the journal's
/// wire encoding.
#[derive(Debug, Serialize, Deserialize)]
pub struct Crossed {
    effects: Vec<Json>,
    cwd: PathBuf,
    ts: i64,
    elapsed_ns: u64,
    ran: RanX,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RanX {
    Panicked(String),
    Parse {
        msg: String,
        span: Span,
        hint: Option<String>,
    },
    /// A raised error: its wire form, and a command's exit status.
    Raised {
        error: Json,
        status: Option<i64>,
        warnings: Vec<WarningX>,
    },
    Value {
        value: Json,
        shown: Shown,
        warnings: Vec<WarningX>,
    },
}

impl From<&Evaluated> for Crossed {
    fn from(e: &Evaluated) -> Crossed {
        let ran = match &e.ran {
            Ran::Panicked(m) => RanX::Panicked(m.clone()),
            Ran::Parse(p) => RanX::Parse {
                msg: p.msg.clone(),
                span: p.span,
                hint: p.hint.clone(),
            },
            Ran::Raised { error, warnings } => RanX::Raised {
                error: wire::error(error),
                status: error.status,
                warnings: warnings_x(warnings),
            },
            Ran::Value {
                value,
                shown,
                warnings,
            } => RanX::Value {
                value: wire::encode(value),
                shown: shown.clone(),
                warnings: warnings_x(warnings),
            },
        };
        Crossed {
            effects: e.effects.clone(),
            cwd: e.cwd.clone(),
            ts: e.ts,
            elapsed_ns: u64::try_from(e.elapsed.as_nanos()).unwrap_or(u64::MAX),
            ran,
        }
    }
}

impl Crossed {
    /// The evaluation that crossed (`None`: a raised error that is not one).
    pub fn evaluated(self) -> Option<Evaluated> {
        let ran = match self.ran {
            RanX::Panicked(m) => Ran::Panicked(m),
            RanX::Parse { msg, span, hint } => Ran::Parse(ParseError { msg, span, hint }),
            RanX::Raised {
                error,
                status,
                warnings,
            } => {
                let mut error = match &wire::decode(&error)? {
                    Value::Error(e) => ShoalError::clone(e),
                    _ => return None,
                };
                error.status = status;
                Ran::Raised {
                    error,
                    warnings: warnings_back(warnings),
                }
            }
            RanX::Value {
                value,
                shown,
                warnings,
            } => Ran::Value {
                value: value_from(&value),
                shown,
                warnings: warnings_back(warnings),
            },
        };
        Some(Evaluated {
            effects: self.effects,
            cwd: self.cwd,
            ts: self.ts,
            elapsed: Duration::from_nanos(self.elapsed_ns),
            ran,
        })
    }
}

/// A value that crossed: as the journal reads it back, but a task (what
/// `cmd &` gives) stays a task, not its number; what does not decode (a
/// closure, a stream) is kept as its text.
fn value_from(j: &Json) -> Value {
    if j.get("$").and_then(Json::as_str) == Some("task") {
        if let Some(id) = j.get("id").and_then(Json::as_u64) {
            return Value::Task(std::sync::Arc::new(shoal_value::TaskRef { id }));
        }
    }
    wire::decode(j).unwrap_or_else(|| {
        let repr = j
            .get("repr")
            .or_else(|| j.get("label"))
            .and_then(Json::as_str)
            .unwrap_or("<value>");
        Value::str(repr)
    })
}

/// A plan's derivation as it crosses (`Effect::to_json` for its effects).
#[derive(Debug, Serialize, Deserialize)]
pub struct DerivedX {
    effects: Vec<Json>,
    lost: Vec<String>,
    trashed: Vec<String>,
    trash_dir: Option<String>,
    place: Option<shoal_policy::plan::Place>,
}

impl From<&shoal_policy::undo::Derived> for DerivedX {
    fn from(d: &shoal_policy::undo::Derived) -> DerivedX {
        DerivedX {
            effects: d
                .effects
                .iter()
                .map(shoal_policy::Effect::to_json)
                .collect(),
            lost: d.undo.lost.clone(),
            trashed: d.undo.trashed.clone(),
            trash_dir: d.undo.trash_dir.clone(),
            place: d.place.clone(),
        }
    }
}

impl DerivedX {
    /// The derivation that crossed (`None`: an effect that is not one).
    pub fn derived(self) -> Option<shoal_policy::undo::Derived> {
        Some(shoal_policy::undo::Derived {
            effects: self
                .effects
                .iter()
                .map(shoal_policy::Effect::from_json)
                .collect::<Option<Vec<_>>>()?,
            undo: shoal_policy::undo::Undo {
                lost: self.lost,
                trashed: self.trashed,
                trash_dir: self.trash_dir,
            },
            place: self.place,
        })
    }
}

/// What a fork request answers: the fork's key.
pub type Forked = Result<u64, Failed>;

/// What a signal request answers: the pid signalled (0: no program ran).
#[derive(Debug, Serialize, Deserialize)]
pub struct Signalled {
    pub pid: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `e` as the daemon reads it after it crossed the line as text.
    fn crossed(e: &Evaluated) -> Evaluated {
        let text = serde_json::to_string(&Answer::of(Ok(Outcome::Done(e.into())))).unwrap();
        match serde_json::from_str::<Answer>(&text).unwrap().outcome {
            Ok(Outcome::Done(c)) => c.evaluated().unwrap(),
            _ => panic!("not an evaluation"),
        }
    }

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
        let back = crossed(&e);
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
                error: {
                    let mut e = ShoalError::new(shoal_value::ErrorCode::Permission, "denied");
                    e.status = Some(3);
                    e
                },
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
        let text = serde_json::to_string(&DerivedX::from(&d)).unwrap();
        let back = serde_json::from_str::<DerivedX>(&text).unwrap().derived();
        assert_eq!(back, Some(d));
        match crossed(&raised).ran {
            Ran::Raised { error, .. } => {
                assert_eq!(error.msg, "denied");
                assert_eq!(error.code, shoal_value::ErrorCode::Permission);
                assert_eq!(error.status, Some(3));
            }
            _ => panic!("not raised"),
        }
    }
}
