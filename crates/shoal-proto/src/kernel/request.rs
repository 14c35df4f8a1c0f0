//! The kernel methods' params, typed (docs/protocol.md §2): one struct per
//! method and [`KernelRequest`], read from `(method, params)` in one step
//! ([`KernelRequest::parse`]); a bad param is `-32602` naming its JSON path.
//! Unknown members are ignored, as they always were. The daemon's kernel
//! connection matches on [`KernelRequest`], never on a method's name.

use serde::de::DeserializeOwned;
use serde_json::{json, Value as Json};

use super::params::*;
use crate::rpc::RpcError;

/// One kernel request, parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelRequest {
    Attach(AttachParams),
    Parse(SrcParams),
    Complete(CompleteParams),
    SessionList,
    SessionClose(CloseParams),
    Exec(ExecParams),
    ValueGet(GetParams),
    DaemonStatus,
    DebugCrash(CrashParams),
    JournalQuery(shoal_journal::Query),
    JournalGet(JournalGetParams),
    BlobGet(BlobGetParams),
    Events(EventsRequest),
    Task(TaskRequest),
    Explain(ExplainParams),
    PlanGet(PlanRefParams),
    PlanList,
    PlanApply(ApplyParams),
    PlanApprove(DecideParams),
    PlanDeny(DecideParams),
    CapRequest(CapRequestParams),
    Pty(PtyRequest),
    PtyClaim(PtyIdParams),
    PtyRelease(PtyIdParams),
    PtyWatch(PtyIdParams),
    TokensChanged,
}

/// The kernel methods, each once (`pty.*` included; `debug.crash` only with
/// the debug hooks on).
pub const METHODS: &[&str] = &[
    "session.attach",
    "parse",
    "complete",
    "session.list",
    "session.close",
    "exec",
    "value.get",
    "daemon.status",
    "debug.crash",
    "journal.query",
    "journal.get",
    "blob.get",
    "events.read",
    "events.publish",
    "events.subscribe",
    "events.unsubscribe",
    "task.get",
    "task.list",
    "task.await",
    "task.cancel",
    "task.suspend",
    "task.resume",
    "explain",
    "plan.get",
    "plan.list",
    "plan.apply",
    "plan.approve",
    "plan.deny",
    "cap.request",
    "pty.open",
    "pty.send",
    "pty.read",
    "pty.resize",
    "pty.close",
    "pty.list",
    "pty.claim",
    "pty.release",
    "pty.watch",
    "leash.tokens_changed",
];

impl KernelRequest {
    /// `params` (an object; `null` counts as `{}`) read as `method`'s.
    /// `-32601` for an unknown method (and `debug.crash` without `debug`),
    /// `-32602` naming the JSON path of a bad param.
    pub fn parse(method: &str, params: Json, debug: bool) -> Result<KernelRequest, RpcError> {
        use KernelRequest as K;
        if !METHODS.contains(&method) || (method == "debug.crash" && !debug) {
            return Err(RpcError::method_not_found(method));
        }
        let params = match params {
            Json::Null => Json::Object(Default::default()),
            p @ Json::Object(_) => p,
            _ => return Err(RpcError::invalid_params("params must be an object")),
        };
        let p = Params { method, params };
        Ok(match method {
            "session.attach" => K::Attach(p.read()?),
            "parse" => K::Parse(p.read()?),
            "complete" => K::Complete(p.read()?),
            "session.list" => K::SessionList,
            "session.close" => K::SessionClose(p.read()?),
            "exec" => K::Exec(p.read()?),
            "value.get" => K::ValueGet(p.read()?),
            "daemon.status" => K::DaemonStatus,
            "debug.crash" => K::DebugCrash(p.read()?),
            "journal.query" => K::JournalQuery(p.read()?),
            "journal.get" => K::JournalGet(p.read()?),
            "blob.get" => K::BlobGet(p.read()?),
            "events.read" => K::Events(EventsRequest::Read(p.read()?)),
            "events.publish" => K::Events(EventsRequest::Publish(p.read()?)),
            "events.subscribe" => K::Events(EventsRequest::Subscribe(p.read()?)),
            "events.unsubscribe" => K::Events(EventsRequest::Unsubscribe(p.read()?)),
            "task.list" => K::Task(TaskRequest::List),
            "task.get" => K::Task(TaskRequest::Get(p.read()?)),
            "task.await" => K::Task(TaskRequest::Await(p.read()?)),
            "task.cancel" => K::Task(TaskRequest::Cancel(p.read()?)),
            "task.suspend" => K::Task(TaskRequest::Suspend(p.read()?)),
            "task.resume" => K::Task(TaskRequest::Resume(p.read()?)),
            "explain" => K::Explain(p.read()?),
            "plan.get" => K::PlanGet(p.read()?),
            "plan.list" => K::PlanList,
            "plan.apply" => K::PlanApply(p.read()?),
            "plan.approve" => K::PlanApprove(p.read()?),
            "plan.deny" => K::PlanDeny(p.read()?),
            "cap.request" => K::CapRequest(p.read()?),
            "pty.open" => K::Pty(PtyRequest::Open(p.read()?)),
            "pty.send" => K::Pty(PtyRequest::Send(p.read()?)),
            "pty.read" => K::Pty(PtyRequest::Read(p.read()?)),
            "pty.resize" => K::Pty(PtyRequest::Resize(p.read()?)),
            "pty.close" => K::Pty(PtyRequest::Close(p.read()?)),
            "pty.list" => K::Pty(PtyRequest::List),
            "pty.claim" => K::PtyClaim(p.read()?),
            "pty.release" => K::PtyRelease(p.read()?),
            "pty.watch" => K::PtyWatch(p.read()?),
            "leash.tokens_changed" => K::TokensChanged,
            _ => return Err(RpcError::method_not_found(method)),
        })
    }

    /// The method's name (for logs and errors).
    pub fn method(&self) -> &'static str {
        use KernelRequest as K;
        match self {
            K::Attach(_) => "session.attach",
            K::Parse(_) => "parse",
            K::Complete(_) => "complete",
            K::SessionList => "session.list",
            K::SessionClose(_) => "session.close",
            K::Exec(_) => "exec",
            K::ValueGet(_) => "value.get",
            K::DaemonStatus => "daemon.status",
            K::DebugCrash(_) => "debug.crash",
            K::JournalQuery(_) => "journal.query",
            K::JournalGet(_) => "journal.get",
            K::BlobGet(_) => "blob.get",
            K::Events(e) => e.method(),
            K::Task(t) => t.method(),
            K::Explain(_) => "explain",
            K::PlanGet(_) => "plan.get",
            K::PlanList => "plan.list",
            K::PlanApply(_) => "plan.apply",
            K::PlanApprove(_) => "plan.approve",
            K::PlanDeny(_) => "plan.deny",
            K::CapRequest(_) => "cap.request",
            K::Pty(p) => p.method(),
            K::PtyClaim(_) => "pty.claim",
            K::PtyRelease(_) => "pty.release",
            K::PtyWatch(_) => "pty.watch",
            K::TokensChanged => "leash.tokens_changed",
        }
    }

    /// The methods a principal may call in a session shared with it
    /// read-only (`session.close` names its session and is decided by the daemon).
    pub fn reads_only(&self) -> bool {
        use KernelRequest as K;
        match self {
            K::SessionList
            | K::SessionClose(_)
            | K::DaemonStatus
            | K::ValueGet(_)
            | K::JournalQuery(_)
            | K::JournalGet(_)
            | K::BlobGet(_)
            | K::PtyWatch(_)
            | K::PtyRelease(_) => true,
            K::Events(e) => !matches!(e, EventsRequest::Publish(_)),
            K::Task(t) => matches!(
                t,
                TaskRequest::Get(_) | TaskRequest::List | TaskRequest::Await(_)
            ),
            K::Pty(p) => matches!(p, PtyRequest::Read(_) | PtyRequest::List),
            _ => false,
        }
    }
}

/// A method's params on their way to a struct.
struct Params<'a> {
    method: &'a str,
    params: Json,
}

impl Params<'_> {
    fn read<T: DeserializeOwned>(&self) -> Result<T, RpcError> {
        typed_value(self.method, self.params.clone())
    }
}

/// `params` read into `T` in one step: an error is `-32602` naming the
/// JSON path that failed (`data.path`, e.g. `plan_ref`).
pub fn typed_value<T: DeserializeOwned>(method: &str, params: Json) -> Result<T, RpcError> {
    serde_path_to_error::deserialize(params).map_err(|e| params_error(method, &e))
}

/// The `-32602` of params that did not read: `invalid params for METHOD:
/// PATH: ...`, `data.path`.
pub fn params_error(method: &str, e: &serde_path_to_error::Error<serde_json::Error>) -> RpcError {
    let path = e.path().to_string();
    let at = if path == "." {
        String::new()
    } else {
        format!("{path}: ")
    };
    RpcError::invalid_params(format!("invalid params for {method}: {at}{}", e.inner()))
        .with_data(json!({"path": path}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc;

    fn parse(method: &str, p: Json) -> Result<KernelRequest, RpcError> {
        KernelRequest::parse(method, p, false)
    }

    #[test]
    fn a_bad_param_names_its_path() {
        let e = parse("plan.get", json!({"plan_ref": 5})).unwrap_err();
        assert_eq!(e.code, rpc::INVALID_PARAMS);
        assert_eq!(e.data.as_ref().unwrap()["path"], "plan_ref");
        assert!(
            e.message
                .starts_with("invalid params for plan.get: plan_ref: invalid type"),
            "{}",
            e.message
        );
        let e = parse("exec", json!({"source": "1"})).unwrap_err();
        assert_eq!(e.message, "invalid params for exec: missing field `src`");
        let e = parse("pty.open", json!({"cmd": "sh", "args": ["a", 2]})).unwrap_err();
        assert_eq!(e.data.as_ref().unwrap()["path"], "args[1]");
        let e = parse("exec", json!({"src": "1", "width": 5})).unwrap_err();
        assert!(
            e.message
                .contains("width: width must be an integer from 20 to 1000"),
            "{}",
            e.message
        );
        let e = parse("plan.apply", json!({"plan_ref": ""})).unwrap_err();
        assert!(
            e.message.contains("plan_ref must not be empty"),
            "{}",
            e.message
        );
        let e = parse("complete", json!({"src": "wh", "cursor": -1})).unwrap_err();
        assert_eq!(e.data.as_ref().unwrap()["path"], "cursor");
        let e = parse("session.attach", json!({"env": {"A": 1}})).unwrap_err();
        assert_eq!(e.data.as_ref().unwrap()["path"], "env.A");
    }

    #[test]
    fn unknown_methods_and_members() {
        let e = parse("nope", json!({})).unwrap_err();
        assert_eq!(e.code, rpc::METHOD_NOT_FOUND);
        let e = parse("debug.crash", json!({})).unwrap_err();
        assert_eq!(e.code, rpc::METHOD_NOT_FOUND);
        assert!(KernelRequest::parse("debug.crash", json!({}), true).is_ok());
        // Unknown members are ignored; `null` params are `{}`.
        let r = parse("exec", json!({"src": "1", "extra": true})).unwrap();
        assert!(matches!(r, KernelRequest::Exec(ExecParams { ref src, .. }) if src == "1"));
        assert_eq!(
            parse("task.list", Json::Null).unwrap(),
            KernelRequest::Task(TaskRequest::List)
        );
        let e = parse("exec", json!([1])).unwrap_err();
        assert_eq!(e.message, "params must be an object");
    }

    #[test]
    fn every_method_parses_and_names_itself() {
        for m in METHODS {
            let p = json!({"src": "x", "plan_ref": "plan:1", "task": "task:1", "channel": "c",
                "pty_id": "pty:1", "cmd": "sh", "input": "x", "cols": 80, "rows": 24,
                "ref": "out:1", "id": 1, "hash": "h"});
            let r = KernelRequest::parse(m, p, true).unwrap();
            assert_eq!(r.method(), *m);
        }
    }

    #[test]
    fn values_read_as_before() {
        let r = parse(
            "cap.request",
            json!({"plan_ref": "plan:1", "effects": ["fs.write", {"kind": "net"}]}),
        )
        .unwrap();
        let KernelRequest::CapRequest(c) = r else {
            panic!("{r:?}")
        };
        assert_eq!(c.kinds().collect::<Vec<_>>(), ["fs.write", "net"]);
        let r = parse("pty.close", json!({"pty_id": 3})).unwrap();
        assert_eq!(
            r,
            KernelRequest::Pty(PtyRequest::Close(PtyIdParams {
                pty_id: PtyRef::Number(3)
            }))
        );
        let r = parse("session.attach", json!({"env": {"B": "1", "A": "2"}})).unwrap();
        let KernelRequest::Attach(a) = r else {
            panic!("{r:?}")
        };
        assert_eq!(
            a.env.unwrap().0,
            [("B".to_string(), "1".to_string()), ("A".into(), "2".into())]
        );
    }
}
