//! The kernel methods' params, typed (docs/protocol.md §2): one struct per
//! method and [`KernelRequest`], read from `(method, params)` in one step
//! ([`KernelRequest::parse`]); a bad param is `-32602` naming its JSON path.
//! Unknown members are ignored, as they always were. The daemon's kernel
//! connection matches on [`KernelRequest`], never on a method's name.

use serde::de::DeserializeOwned;
use serde_json::{json, Value as Json};

use super::params::*;
use super::table::TABLE;
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

impl KernelRequest {
    /// `params` (an object; `null` counts as `{}`) read as `method`'s.
    /// `-32601` for an unknown method (and `debug.crash` without `debug`),
    /// `-32602` naming the JSON path of a bad param.
    pub fn parse(method: &str, params: Json, debug: bool) -> Result<KernelRequest, RpcError> {
        let known = TABLE
            .iter()
            .find(|m| m.name == method)
            .filter(|m| debug || m.name != "debug.crash");
        let Some(m) = known else {
            return Err(RpcError::method_not_found(method));
        };
        let params = match params {
            Json::Null => Json::Object(Default::default()),
            p @ Json::Object(_) => p,
            _ => return Err(RpcError::invalid_params("params must be an object")),
        };
        (m.read)(&Params { method, params })
    }

    /// The params a client sends for this request: what
    /// [`KernelRequest::parse`] reads back as it (the CLI writes its
    /// requests so).
    pub fn params(&self) -> Json {
        use KernelRequest as K;
        let v = match self {
            K::Attach(p) => serde_json::to_value(p),
            K::Parse(p) => serde_json::to_value(p),
            K::Complete(p) => serde_json::to_value(p),
            K::SessionClose(p) => serde_json::to_value(p),
            K::Exec(p) => serde_json::to_value(p),
            K::ValueGet(p) => serde_json::to_value(p),
            K::DebugCrash(p) => serde_json::to_value(p),
            K::JournalQuery(p) => serde_json::to_value(p),
            K::JournalGet(p) => serde_json::to_value(p),
            K::BlobGet(p) => serde_json::to_value(p),
            K::Events(EventsRequest::Read(p)) => serde_json::to_value(p),
            K::Events(EventsRequest::Publish(p)) => serde_json::to_value(p),
            K::Events(EventsRequest::Subscribe(p)) => serde_json::to_value(p),
            K::Events(EventsRequest::Unsubscribe(p)) => serde_json::to_value(p),
            K::Task(TaskRequest::Await(p)) => serde_json::to_value(p),
            K::Task(
                TaskRequest::Get(p)
                | TaskRequest::Cancel(p)
                | TaskRequest::Suspend(p)
                | TaskRequest::Resume(p),
            ) => serde_json::to_value(p),
            K::Explain(p) => serde_json::to_value(p),
            K::PlanGet(p) => serde_json::to_value(p),
            K::PlanApply(p) => serde_json::to_value(p),
            K::PlanApprove(p) | K::PlanDeny(p) => serde_json::to_value(p),
            K::CapRequest(p) => serde_json::to_value(p),
            K::Pty(PtyRequest::Open(p)) => serde_json::to_value(p),
            K::Pty(PtyRequest::Send(p)) => serde_json::to_value(p),
            K::Pty(PtyRequest::Read(p)) => serde_json::to_value(p),
            K::Pty(PtyRequest::Resize(p)) => serde_json::to_value(p),
            K::Pty(PtyRequest::Close(p)) | K::PtyClaim(p) | K::PtyRelease(p) | K::PtyWatch(p) => {
                serde_json::to_value(p)
            }
            K::SessionList
            | K::DaemonStatus
            | K::Task(TaskRequest::List)
            | K::PlanList
            | K::Pty(PtyRequest::List)
            | K::TokensChanged => Ok(json!({})),
        };
        // Params are structs of strings, numbers and maps with string keys:
        // they always encode.
        v.unwrap_or_else(|_| json!({}))
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
pub(super) struct Params<'a> {
    method: &'a str,
    params: Json,
}

impl Params<'_> {
    pub(super) fn read<T: DeserializeOwned>(&self) -> Result<T, RpcError> {
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
    use super::super::table::{clashing_defs, kernel_schemas, methods};
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
        for m in methods() {
            let p = json!({"src": "x", "plan_ref": "plan:1", "task": "task:1", "channel": "c",
                "pty_id": "pty:1", "cmd": "sh", "input": "x", "cols": 80, "rows": 24,
                "ref": "out:1", "id": 1, "hash": "h"});
            let r = KernelRequest::parse(m, p, true).unwrap();
            assert_eq!(r.method(), m);
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

    /// One request of every method, every param given.
    fn samples() -> Vec<KernelRequest> {
        use KernelRequest as K;
        let elide = Some(crate::elide::Elide {
            max_bytes: Some(100),
            max_rows: Some(5),
            max_items: None,
        });
        let env = || {
            Some(EnvVars(vec![
                ("B".into(), "1".into()),
                ("A".into(), "2".into()),
            ]))
        };
        let plan = || PlanRef("plan:7".into());
        let task = || TaskParams {
            task: "task:3".into(),
        };
        let pty = |n| PtyIdParams {
            pty_id: if n == 0 {
                PtyRef::Name("pty:2".into())
            } else {
                PtyRef::Number(n)
            },
        };
        vec![
            K::Attach(AttachParams {
                session: Some("s".into()),
                cwd: Some("/tmp".into()),
                env: env(),
                token: Some("t".into()),
                client: Some(ClientParams {
                    kind: Some("cli".into()),
                    tty: Some(true),
                    name: Some("n".into()),
                    human: Some(false),
                }),
                create: Some(false),
            }),
            K::Parse(SrcParams { src: "ls".into() }),
            K::Complete(CompleteParams {
                src: "wh".into(),
                cursor: Some(2),
            }),
            K::SessionList,
            K::SessionClose(CloseParams {
                session: Some("s".into()),
            }),
            K::Exec(ExecParams {
                src: "1 + 1".into(),
                position: Some(PositionParam::Value),
                mode: Some(ExecMode::Approved),
                plan_ref: Some("plan:1".into()),
                width: Some(Width(120)),
                elide,
                background: Some(true),
                is_async: Some(false),
                timeout_ms: Some(500),
            }),
            K::ValueGet(GetParams {
                reference: "out:1".into(),
                path: Some(".a".into()),
                slice: Some([0, 2]),
                lines: Some([1, 3]),
                elide,
                format: Some("text".into()),
            }),
            K::DaemonStatus,
            K::DebugCrash(CrashParams {
                actor: Some("session".into()),
            }),
            K::JournalQuery(shoal_journal::Query {
                since: Some(1),
                until: Some(2),
                principal: Some("local".into()),
                ok: Some(true),
                effects: Some(vec!["fs.write".into()]),
                head: Some("git".into()),
                session: Some("s".into()),
                limit: Some(3),
            }),
            K::JournalGet(JournalGetParams { id: 4 }),
            K::BlobGet(BlobGetParams {
                hash: "h".into(),
                max_bytes: Some(9),
            }),
            K::Events(EventsRequest::Read(ReadEventsParams {
                channel: "c".into(),
                since: Some(1),
                limit: Some(2),
            })),
            K::Events(EventsRequest::Publish(PublishParams {
                channel: "user.c".into(),
                payload: json!({"a": [1, "b"]}),
            })),
            K::Events(EventsRequest::Subscribe(SubscribeParams {
                channel: "c".into(),
                since: Some(5),
            })),
            K::Events(EventsRequest::Unsubscribe(ChannelParams {
                channel: "c".into(),
            })),
            K::Task(TaskRequest::Get(task())),
            K::Task(TaskRequest::List),
            K::Task(TaskRequest::Await(AwaitParams {
                task: "task:3".into(),
                timeout_ms: Some(10),
            })),
            K::Task(TaskRequest::Cancel(task())),
            K::Task(TaskRequest::Suspend(task())),
            K::Task(TaskRequest::Resume(task())),
            K::Explain(ExplainParams { src: "rm a".into() }),
            K::PlanGet(PlanRefParams { plan_ref: plan() }),
            K::PlanList,
            K::PlanApply(ApplyParams {
                plan_ref: plan(),
                elide,
            }),
            K::PlanApprove(DecideParams {
                plan_ref: plan(),
                via: Some(Via::Cli),
            }),
            K::PlanDeny(DecideParams {
                plan_ref: plan(),
                via: Some(Via::Attach),
            }),
            K::CapRequest(CapRequestParams {
                plan_ref: plan(),
                effects: Some(vec![EffectKind("fs.write".into())]),
            }),
            K::Pty(PtyRequest::Open(PtyOpenParams {
                cmd: "vim".into(),
                args: Some(vec!["-u".into(), "NONE".into()]),
                cols: Some(100),
                rows: Some(30),
                env: env(),
            })),
            K::Pty(PtyRequest::Send(PtySendParams {
                pty_id: PtyRef::Name("pty:1".into()),
                input: json!({"keys": ["Escape", ":wq", "Enter"]}),
            })),
            K::Pty(PtyRequest::Read(PtyReadParams {
                pty_id: PtyRef::Number(1),
                wait_for: Some("re:x+".into()),
                stable_ms: Some(50),
                timeout_ms: Some(1000),
                scrollback: Some(10),
            })),
            K::Pty(PtyRequest::Resize(PtyResizeParams {
                pty_id: PtyRef::Number(1),
                cols: 90,
                rows: 20,
            })),
            K::Pty(PtyRequest::Close(pty(1))),
            K::Pty(PtyRequest::List),
            K::PtyClaim(pty(0)),
            K::PtyRelease(pty(2)),
            K::PtyWatch(pty(0)),
            K::TokensChanged,
        ]
    }

    #[test]
    fn a_request_written_with_its_params_reads_back_as_itself() {
        let samples = samples();
        let mut named: Vec<&str> = samples.iter().map(KernelRequest::method).collect();
        let mut all: Vec<&str> = methods().collect();
        named.sort_unstable();
        all.sort_unstable();
        assert_eq!(named, all, "one sample per method");
        for r in samples {
            let back = KernelRequest::parse(r.method(), r.params(), true);
            assert_eq!(back.as_ref(), Ok(&r), "{}: {}", r.method(), r.params());
        }
        // What is absent is left out, not sent as null.
        let r = KernelRequest::Exec(ExecParams {
            src: "1".into(),
            position: None,
            mode: None,
            plan_ref: None,
            width: None,
            elide: None,
            background: None,
            is_async: None,
            timeout_ms: None,
        });
        assert_eq!(r.params(), json!({"src": "1"}));
    }

    #[test]
    fn params_and_results_share_no_name_for_two_schemas() {
        assert_eq!(clashing_defs(), Vec::<String>::new());
    }

    /// Every method has both schemas, each a valid schema standing alone
    /// (tests/it/kernel_schema.rs checks the results against real replies).
    #[test]
    fn every_method_has_a_params_and_a_result_schema() {
        let doc = kernel_schemas();
        for m in methods() {
            for part in ["params", "result"] {
                let mut s = doc["methods"][m][part].clone();
                assert!(s.is_object(), "{m} has no {part} schema");
                s["$defs"] = doc["$defs"].clone();
                assert!(jsonschema::validator_for(&s).is_ok(), "{m} {part}: {s}");
            }
        }
        // A member left out when empty is never null when there.
        let get = &doc["$defs"]["GetResult"]["properties"];
        assert_eq!(get["render"], json!({"type": "string"}));
        assert_eq!(
            doc["$defs"]["TaskRow"]["properties"]["tail"]["$ref"],
            "#/$defs/TaskTail"
        );
    }

    /// The schema of `method`'s params, standing alone.
    fn validator(method: &str) -> jsonschema::Validator {
        let doc = kernel_schemas();
        let mut s = doc["methods"][method]["params"].clone();
        s["$defs"] = doc["$defs"].clone();
        jsonschema::validator_for(&s).unwrap()
    }

    #[test]
    fn the_schemas_accept_what_parses_and_refuse_what_does_not() {
        for r in samples() {
            let p = r.params();
            let v = validator(r.method());
            assert!(v.is_valid(&p), "{}: {p}", r.method());
        }
        let refused = [
            ("exec", json!({"src": "1", "width": 5})),
            ("exec", json!({"src": 1})),
            ("exec", json!({"position": "value"})),
            ("plan.get", json!({"plan_ref": ""})),
            ("pty.open", json!({"cmd": "sh", "args": ["a", 2]})),
            ("session.attach", json!({"env": {"A": 1}})),
            (
                "cap.request",
                json!({"plan_ref": "p", "effects": [{"nope": 1}]}),
            ),
            ("journal.query", json!({"limit": -1})),
            ("pty.close", json!({"pty_id": true})),
        ];
        for (m, p) in refused {
            assert!(KernelRequest::parse(m, p.clone(), true).is_err(), "{m} {p}");
            assert!(!validator(m).is_valid(&p), "{m}: the schema takes {p}");
        }
    }

    /// docs/kernel-schema.json is the generated schema (`SHOAL_BLESS=1`
    /// writes it).
    #[test]
    fn the_documented_schema_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/kernel-schema.json");
        let now = serde_json::to_string_pretty(&kernel_schemas()).unwrap() + "\n";
        if std::env::var_os("SHOAL_BLESS").is_some() {
            std::fs::write(path, &now).unwrap();
        }
        let doc = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            doc == now,
            "docs/kernel-schema.json is not the generated schema: run \
             `SHOAL_BLESS=1 cargo test -p shoal-proto documented_schema`"
        );
    }
}
