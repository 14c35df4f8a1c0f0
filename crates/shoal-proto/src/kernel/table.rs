//! The kernel method table: each method once, with how its params are read
//! ([`KernelRequest::parse`]), their schema and its result's schema, and the
//! schema document generated from it ([`kernel_schemas`],
//! docs/kernel-schema.json).

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Value as Json};

use super::params::*;
use super::request::{KernelRequest, Params};
use super::{
    Applied, Attached, BlobRead, CancelResult, CapRequestResult, Completions, Crashed,
    DaemonStatus, EventsRead, ExecAnswer, Explained, Parsed, PlanList, PlanResult, PtyClaimed,
    PtyClosed, PtyList, PtyOpened, PtyReleased, PtyResized, PtyScreen, PtySent, PtyWatching,
    Published, SessionClosed, SessionList, Subscription, TaskRow, TokensChecked, ValueRead,
};
use crate::rpc::RpcError;

/// A kernel method: its name, how its params are read, their schema, and
/// the schema of its successful reply's `result`.
pub(super) struct Method {
    pub(super) name: &'static str,
    pub(super) read: fn(&Params) -> Result<KernelRequest, RpcError>,
    params: fn(&mut SchemaGenerator) -> Schema,
    /// Generated from the type the daemon writes the reply from (with the
    /// serialize contract: what is sent, not what is accepted).
    result: fn(&mut SchemaGenerator) -> Schema,
}

/// The kernel methods, each once (`pty.*` included; `debug.crash` only with
/// the debug hooks on): what [`KernelRequest::parse`] reads and
/// [`kernel_schemas`] describes.
pub(super) const TABLE: &[Method] = {
    use KernelRequest as K;
    &[
        Method {
            name: "session.attach",
            read: |p| Ok(K::Attach(p.read()?)),
            params: SchemaGenerator::subschema_for::<AttachParams>,
            result: of::<Attached>,
        },
        Method {
            name: "parse",
            read: |p| Ok(K::Parse(p.read()?)),
            params: SchemaGenerator::subschema_for::<SrcParams>,
            result: of::<Parsed<Json>>,
        },
        Method {
            name: "complete",
            read: |p| Ok(K::Complete(p.read()?)),
            params: SchemaGenerator::subschema_for::<CompleteParams>,
            result: of::<Completions>,
        },
        Method {
            name: "session.list",
            read: |_| Ok(K::SessionList),
            params: no_params,
            result: of::<SessionList>,
        },
        Method {
            name: "session.close",
            read: |p| Ok(K::SessionClose(p.read()?)),
            params: SchemaGenerator::subschema_for::<CloseParams>,
            result: of::<SessionClosed>,
        },
        Method {
            name: "exec",
            read: |p| Ok(K::Exec(p.read()?)),
            params: SchemaGenerator::subschema_for::<ExecParams>,
            result: exec_result,
        },
        Method {
            name: "value.get",
            read: |p| Ok(K::ValueGet(p.read()?)),
            params: SchemaGenerator::subschema_for::<GetParams>,
            result: of::<ValueRead>,
        },
        Method {
            name: "daemon.status",
            read: |_| Ok(K::DaemonStatus),
            params: no_params,
            result: of::<DaemonStatus>,
        },
        Method {
            name: "debug.crash",
            read: |p| Ok(K::DebugCrash(p.read()?)),
            params: SchemaGenerator::subschema_for::<CrashParams>,
            result: of::<Crashed>,
        },
        Method {
            name: "journal.query",
            read: |p| Ok(K::JournalQuery(p.read()?)),
            params: SchemaGenerator::subschema_for::<shoal_journal::Query>,
            result: of::<Vec<shoal_journal::Entry>>,
        },
        Method {
            name: "journal.get",
            read: |p| Ok(K::JournalGet(p.read()?)),
            params: SchemaGenerator::subschema_for::<JournalGetParams>,
            result: of::<shoal_journal::Entry>,
        },
        Method {
            name: "blob.get",
            read: |p| Ok(K::BlobGet(p.read()?)),
            params: SchemaGenerator::subschema_for::<BlobGetParams>,
            result: of::<BlobRead>,
        },
        Method {
            name: "events.read",
            read: |p| Ok(K::Events(EventsRequest::Read(p.read()?))),
            params: SchemaGenerator::subschema_for::<ReadEventsParams>,
            result: of::<EventsRead>,
        },
        Method {
            name: "events.publish",
            read: |p| Ok(K::Events(EventsRequest::Publish(p.read()?))),
            params: SchemaGenerator::subschema_for::<PublishParams>,
            result: of::<Published>,
        },
        Method {
            name: "events.subscribe",
            read: |p| Ok(K::Events(EventsRequest::Subscribe(p.read()?))),
            params: SchemaGenerator::subschema_for::<SubscribeParams>,
            result: of::<Subscription>,
        },
        Method {
            name: "events.unsubscribe",
            read: |p| Ok(K::Events(EventsRequest::Unsubscribe(p.read()?))),
            params: SchemaGenerator::subschema_for::<ChannelParams>,
            result: of::<Subscription>,
        },
        Method {
            name: "task.list",
            read: |_| Ok(K::Task(TaskRequest::List)),
            params: no_params,
            result: of::<Vec<TaskRow>>,
        },
        Method {
            name: "task.get",
            read: |p| Ok(K::Task(TaskRequest::Get(p.read()?))),
            params: SchemaGenerator::subschema_for::<TaskParams>,
            result: of::<TaskRow>,
        },
        Method {
            name: "task.await",
            read: |p| Ok(K::Task(TaskRequest::Await(p.read()?))),
            params: SchemaGenerator::subschema_for::<AwaitParams>,
            result: of::<TaskRow>,
        },
        Method {
            name: "task.cancel",
            read: |p| Ok(K::Task(TaskRequest::Cancel(p.read()?))),
            params: SchemaGenerator::subschema_for::<TaskParams>,
            result: of::<CancelResult>,
        },
        Method {
            name: "task.suspend",
            read: |p| Ok(K::Task(TaskRequest::Suspend(p.read()?))),
            params: SchemaGenerator::subschema_for::<TaskParams>,
            result: of::<TaskRow>,
        },
        Method {
            name: "task.resume",
            read: |p| Ok(K::Task(TaskRequest::Resume(p.read()?))),
            params: SchemaGenerator::subschema_for::<TaskParams>,
            result: of::<TaskRow>,
        },
        Method {
            name: "explain",
            read: |p| Ok(K::Explain(p.read()?)),
            params: SchemaGenerator::subschema_for::<ExplainParams>,
            result: of::<Explained>,
        },
        Method {
            name: "plan.get",
            read: |p| Ok(K::PlanGet(p.read()?)),
            params: SchemaGenerator::subschema_for::<PlanRefParams>,
            result: of::<PlanResult>,
        },
        Method {
            name: "plan.list",
            read: |_| Ok(K::PlanList),
            params: no_params,
            result: of::<PlanList>,
        },
        Method {
            name: "plan.apply",
            read: |p| Ok(K::PlanApply(p.read()?)),
            params: SchemaGenerator::subschema_for::<ApplyParams>,
            result: of::<Applied>,
        },
        Method {
            name: "plan.approve",
            read: |p| Ok(K::PlanApprove(p.read()?)),
            params: SchemaGenerator::subschema_for::<DecideParams>,
            result: of::<PlanResult>,
        },
        Method {
            name: "plan.deny",
            read: |p| Ok(K::PlanDeny(p.read()?)),
            params: SchemaGenerator::subschema_for::<DecideParams>,
            result: of::<PlanResult>,
        },
        Method {
            name: "cap.request",
            read: |p| Ok(K::CapRequest(p.read()?)),
            params: SchemaGenerator::subschema_for::<CapRequestParams>,
            result: of::<CapRequestResult>,
        },
        Method {
            name: "pty.open",
            read: |p| Ok(K::Pty(PtyRequest::Open(p.read()?))),
            params: SchemaGenerator::subschema_for::<PtyOpenParams>,
            result: of::<PtyOpened>,
        },
        Method {
            name: "pty.send",
            read: |p| Ok(K::Pty(PtyRequest::Send(p.read()?))),
            params: SchemaGenerator::subschema_for::<PtySendParams>,
            result: of::<PtySent>,
        },
        Method {
            name: "pty.read",
            read: |p| Ok(K::Pty(PtyRequest::Read(p.read()?))),
            params: SchemaGenerator::subschema_for::<PtyReadParams>,
            result: of::<PtyScreen>,
        },
        Method {
            name: "pty.resize",
            read: |p| Ok(K::Pty(PtyRequest::Resize(p.read()?))),
            params: SchemaGenerator::subschema_for::<PtyResizeParams>,
            result: of::<PtyResized>,
        },
        Method {
            name: "pty.close",
            read: |p| Ok(K::Pty(PtyRequest::Close(p.read()?))),
            params: SchemaGenerator::subschema_for::<PtyIdParams>,
            result: of::<PtyClosed>,
        },
        Method {
            name: "pty.list",
            read: |_| Ok(K::Pty(PtyRequest::List)),
            params: no_params,
            result: of::<PtyList>,
        },
        Method {
            name: "pty.claim",
            read: |p| Ok(K::PtyClaim(p.read()?)),
            params: SchemaGenerator::subschema_for::<PtyIdParams>,
            result: of::<PtyClaimed>,
        },
        Method {
            name: "pty.release",
            read: |p| Ok(K::PtyRelease(p.read()?)),
            params: SchemaGenerator::subschema_for::<PtyIdParams>,
            result: of::<PtyReleased>,
        },
        Method {
            name: "pty.watch",
            read: |p| Ok(K::PtyWatch(p.read()?)),
            params: SchemaGenerator::subschema_for::<PtyIdParams>,
            result: of::<PtyWatching>,
        },
        Method {
            name: "leash.tokens_changed",
            read: |_| Ok(K::TokensChanged),
            params: no_params,
            result: of::<TokensChecked>,
        },
    ]
};

fn no_params(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

/// The schema of a reply written from `T`.
fn of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// `exec`'s reply, by its params: the value it ran to, or the task it
/// became (`background`, or a `timeout_ms` that ran out) ([`ExecAnswer`]);
/// the plan it made (`mode: "plan"`); the plan it ran (`mode: "approved"`).
fn exec_result(g: &mut SchemaGenerator) -> Schema {
    let ran = g.subschema_for::<ExecAnswer>();
    let planned = g.subschema_for::<PlanResult>();
    let applied = g.subschema_for::<Applied>();
    json_schema!({"anyOf": [ran, planned, applied]})
}

/// The kernel methods' names, in the table's order.
pub fn methods() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|m| m.name)
}

/// Every kernel method's params and result schemas (JSON Schema 2020-12):
/// `{methods: {method: {params, result}}, $defs}`. The params' are generated
/// from the structs [`KernelRequest::parse`] reads (what is accepted), the
/// results' from the types the daemon writes its replies from (what is
/// sent, [`sent_as_is`]). Both share `$defs`: a name defined by both is one
/// schema (a unit test holds it). docs/kernel-schema.json is this.
pub fn kernel_schemas() -> Json {
    let (mut params, mut results) = generators();
    let methods: serde_json::Map<String, Json> = TABLE
        .iter()
        .map(|m| {
            let p = (m.params)(&mut params).to_value();
            let mut r = (m.result)(&mut results).to_value();
            sent_as_is(&mut r);
            (m.name.to_string(), json!({"params": p, "result": r}))
        })
        .collect();
    let mut defs: serde_json::Map<String, Json> =
        params.take_definitions(true).into_iter().collect();
    for (name, mut def) in results.take_definitions(true) {
        sent_as_is(&mut def);
        defs.entry(name).or_insert(def);
    }
    defs.sort_keys();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "shoal kernel methods: params and results",
        "methods": methods,
        "$defs": defs,
    })
}

/// The generators of params (what is read) and of results (what is written).
fn generators() -> (SchemaGenerator, SchemaGenerator) {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.meta_schema = None;
    let mut results = settings.clone();
    results.contract = schemars::generate::Contract::Serialize;
    (settings.into_generator(), results.into_generator())
}

/// A result schema as the wire has it: a member that is not required is
/// one left out when empty (`skip_serializing_if`, the only way a written
/// member is absent), so it is never `null` when there; its schema loses
/// the `null` that its `Option` type gave it.
fn sent_as_is(schema: &mut Json) {
    match schema {
        Json::Object(o) => {
            o.values_mut().for_each(sent_as_is);
            let required: Vec<Json> = o
                .get("required")
                .and_then(Json::as_array)
                .cloned()
                .unwrap_or_default();
            if let Some(Json::Object(props)) = o.get_mut("properties") {
                for (name, p) in props.iter_mut() {
                    if !required.contains(&Json::String(name.clone())) {
                        drop_null(p);
                    }
                }
            }
        }
        Json::Array(a) => a.iter_mut().for_each(sent_as_is),
        _ => {}
    }
}

/// `{"type": [T, "null"]}` as `{"type": T}`; `{"anyOf": [S, {"type":
/// "null"}]}` as `S` (its description kept).
fn drop_null(p: &mut Json) {
    let Json::Object(o) = p else {
        return;
    };
    if let Some(Json::Array(types)) = o.get_mut("type") {
        types.retain(|t| t != "null");
        if let [one] = types.as_slice() {
            let one = one.clone();
            o.insert("type".into(), one);
        }
    }
    let null = json!({"type": "null"});
    let Some(Json::Array(any)) = o.get_mut("anyOf") else {
        return;
    };
    any.retain(|s| *s != null);
    if let [one] = any.as_slice() {
        let Json::Object(one) = one.clone() else {
            return;
        };
        o.remove("anyOf");
        for (k, v) in one {
            o.entry(k).or_insert(v);
        }
    }
}

/// The `$defs` names both contracts define differently: none may be (one
/// name, one schema in [`kernel_schemas`]).
#[cfg(test)]
pub(super) fn clashing_defs() -> Vec<String> {
    let (mut p, mut r) = generators();
    for m in TABLE {
        (m.params)(&mut p);
        (m.result)(&mut r);
    }
    let p = p.take_definitions(true);
    r.take_definitions(true)
        .into_iter()
        .filter_map(|(k, mut v)| {
            sent_as_is(&mut v);
            p.get(&k).is_some_and(|d| *d != v).then_some(k)
        })
        .collect()
}
