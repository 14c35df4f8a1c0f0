//! Actor-tier tests of the session supervisor: a panic in a Session seen by
//! message (the supervisor has no timer), restarted and counted, another
//! session untouched; the restart limit; the transcript across a restart; the
//! child table equal to the status rows naming the supervisor (session, plan
//! store, tasks, PTYs); tasks as children; a task whose actor dies recorded
//! failed. They run actors in-process, never a daemon, and leave no process.

use std::time::{Duration, Instant};

use super::*;
use crate::sessions::task::{wait_final, TaskControl, TaskView};
use serde_json::Value as Json;
use shoal_lang::task as tasks;
use shoal_lang::Position;
use shoal_value::Value;

fn start(registry: &Arc<Registry>, name: &str) -> (Addr<SessionSupervisor>, u64) {
    let reg = registry.register("session_supervisor", name, None);
    let id = reg.id();
    let shared = Arc::new(SessionShared::new(name.into(), std::env::temp_dir(), 80));
    (
        SessionSupervisor::new(shared, registry.clone(), reg, 3).start(),
        id,
    )
}

async fn table(a: &Addr<SessionSupervisor>) -> Json {
    serde_json::to_value(a.send(ListChildren).await.unwrap()).unwrap()
}

/// The child table once `done` holds of it (a bounded poll of the test's own;
/// the supervisor itself has no timer).
async fn table_when(a: &Addr<SessionSupervisor>, what: &str, done: impl Fn(&Json) -> bool) -> Json {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = table(a).await;
        if done(&t) {
            return t;
        }
        assert!(Instant::now() < deadline, "{what}: {t}");
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The session child's actor id in a table.
fn session_in(t: &Json) -> Option<u64> {
    t["children"]
        .as_array()?
        .iter()
        .find(|c| c["child"] == "session")?["actor"]
        .as_u64()
}

/// The session child's actor id, once the table has one.
async fn session_actor(a: &Addr<SessionSupervisor>) -> Option<u64> {
    session_in(&table(a).await)
}

/// The table's children: `field` of each.
fn children<'a>(t: &'a Json, field: &str) -> Vec<&'a Json> {
    t["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c[field])
        .collect()
}

/// The actor ids of the registry rows whose parent is `parent`, sorted.
fn rows_under(registry: &Registry, parent: u64) -> Vec<u64> {
    let mut rows: Vec<u64> = registry
        .snapshot()
        .iter()
        .filter(|r| r.parent == Some(parent))
        .map(|r| r.id)
        .collect();
    rows.sort_unstable();
    rows
}

/// Run `src` in the supervisor's session.
async fn exec(a: &Addr<SessionSupervisor>, src: &str) -> Result<ExecReply, SessionError> {
    a.send(Exec {
        src: src.into(),
        position: Position::Value,
        tty: false,
        cancel: crate::sessions::session::CallCancel::new(),
        gate: None,
        check: false,
        width: None,
        place: None,
        approved: Vec::new(),
    })
    .await
    .unwrap()
}

/// Crash the session child and wait until the supervisor has restarted it
/// `restarts` times in all, with a new actor.
async fn crash_and_wait(a: &Addr<SessionSupervisor>, restarts: u64) {
    let before = session_actor(a).await;
    a.do_send(Crash);
    // Only the child's exit notice can make the supervisor restart it.
    table_when(a, &format!("restart #{restarts}"), |t| {
        t["restarts"] == restarts && session_in(t).is_some() && session_in(t) != before
    })
    .await;
}

/// Start `sh { sleep 30 }` as a background task; its id.
async fn sleeping_task(a: &Addr<SessionSupervisor>) -> u64 {
    a.send(StartTask {
        src: "sh { sleep 30 }".into(),
        position: Position::Value,
        tty: false,
        gate: None,
    })
    .await
    .unwrap()
    .unwrap()
    .0
}

async fn task_call(a: &Addr<SessionSupervisor>, op: TaskOp) -> TaskAnswer {
    match a.send(TaskCall(op)).await.unwrap() {
        Ok(answer) => answer,
        Err(e) => panic!("task call failed: {e:?}"),
    }
}

/// A task's record.
async fn record(a: &Addr<SessionSupervisor>, id: u64) -> Json {
    let TaskAnswer::Record(r) = task_call(a, TaskOp::Get(id)).await else {
        panic!("no record");
    };
    serde_json::to_value(r).unwrap()
}

/// A task's view, to wait on.
async fn view(a: &Addr<SessionSupervisor>, id: u64) -> tokio::sync::watch::Receiver<TaskView> {
    let TaskAnswer::Watch(view) = task_call(a, TaskOp::Watch(id)).await else {
        panic!("no view");
    };
    view
}

/// Cancel a task and wait for its final state (no process left behind).
async fn cancel_task(a: &Addr<SessionSupervisor>, id: u64) -> tasks::TaskState {
    let answer = task_call(a, TaskOp::Control(id, TaskControl::Cancel)).await;
    assert!(matches!(answer, TaskAnswer::Done), "cancel not carried out");
    let v = wait_final(view(a, id).await, Some(Duration::from_secs(10))).await;
    v.record.state
}

#[test]
fn a_panicking_session_is_restarted_by_message_and_counted() {
    let sys = System::new();
    sys.block_on(async {
        let registry = Arc::new(Registry::default());
        let (a, a_id) = start(&registry, "a");
        let (b, _) = start(&registry, "b");
        let b_first = session_actor(&b).await.unwrap();
        crash_and_wait(&a, 1).await;
        // The other session is untouched.
        assert_eq!(session_actor(&b).await, Some(b_first));
        assert_eq!(table(&b).await["restarts"], 0);
        // The child table is what status shows: the registry rows whose
        // parent is this supervisor.
        let t = table(&a).await;
        let shown: Vec<u64> = children(&t, "actor")
            .iter()
            .filter_map(|a| a.as_u64())
            .collect();
        assert_eq!(rows_under(&registry, a_id), shown);
        let restarted = registry
            .snapshot()
            .into_iter()
            .find(|r| r.id == shown[0])
            .unwrap();
        assert_eq!(restarted.restarts, 1);
    });
}

#[test]
fn a_task_is_a_child_and_cancels_alone() {
    let sys = System::new();
    sys.block_on(async {
        let registry = Arc::new(Registry::default());
        let (a, a_id) = start(&registry, "t");
        let ids = [sleeping_task(&a).await, sleeping_task(&a).await];
        let t = table(&a).await;
        assert!(
            children(&t, "child").contains(&&Json::from(tasks::ref_name(ids[0]))),
            "{t}"
        );
        assert_eq!(
            registry
                .snapshot()
                .iter()
                .filter(|r| r.parent == Some(a_id) && r.kind == "task")
                .count(),
            2
        );
        assert_eq!(cancel_task(&a, ids[0]).await, tasks::TaskState::Cancelled);
        let other = record(&a, ids[1]).await;
        assert_eq!(other["state"], "running", "{other}");
        // Leave no process behind.
        assert_eq!(cancel_task(&a, ids[1]).await, tasks::TaskState::Cancelled);
        a.do_send(StopSession);
    });
}

#[test]
fn a_restarted_session_keeps_its_transcript_and_answers() {
    let sys = System::new();
    sys.block_on(async {
        let registry = Arc::new(Registry::default());
        let (a, _) = start(&registry, "kept");
        let (b, _) = start(&registry, "beside");
        let first = exec(&a, "6 * 7").await.unwrap();
        assert_eq!(first.n, 1);
        exec(&b, "let y = 5").await.unwrap();
        crash_and_wait(&a, 1).await;
        // The transcript lives in the supervisor: out:1 survives the restart.
        let got = a
            .send(GetValue {
                reference: "out:1".into(),
                req: Default::default(),
                tty: false,
            })
            .await
            .unwrap()
            .unwrap();
        let got =
            serde_json::to_value(shoal_proto::kernel::value_view_result(&got).unwrap()).unwrap();
        assert_eq!(
            got["value"],
            serde_json::json!({"$": "int", "v": 42}),
            "{got}"
        );
        // The new child evaluates, numbering goes on.
        let next = exec(&a, "1 + 1").await.unwrap();
        assert_eq!(next.n, 2);
        assert!(matches!(next.value, Value::Int(2)));
        // The other session kept its bindings.
        let y = exec(&b, "y + 1").await.unwrap();
        assert!(matches!(y.value, Value::Int(6)));
        a.do_send(StopSession);
        b.do_send(StopSession);
    });
}

#[test]
fn past_the_restart_limit_the_session_fails_and_says_so() {
    let sys = System::new();
    sys.block_on(async {
        let registry = Arc::new(Registry::default());
        // At most 3 restarts a minute.
        let (a, a_id) = start(&registry, "limit");
        let (b, _) = start(&registry, "other");
        for n in 1..=3 {
            crash_and_wait(&a, n).await;
        }
        a.do_send(Crash);
        let t = table_when(&a, "never failed", |t| t["failed"] == true).await;
        // Not restarted a fourth time: no session child is left.
        assert_eq!(t["restarts"], 3, "{t}");
        assert_eq!(session_in(&t), None, "{t}");
        // It says so: the exec error and the supervisor's status row.
        match exec(&a, "1").await {
            Err(SessionError::Internal(m)) => assert!(m.contains("failed"), "{m}"),
            other => panic!("a failed session answered {other:?}"),
        }
        let row = registry
            .snapshot()
            .into_iter()
            .find(|r| r.id == a_id)
            .unwrap();
        assert_eq!(row.state, "failed", "{row:?}");
        assert_eq!(
            row.last_error.as_deref(),
            Some("restart limit reached"),
            "{row:?}"
        );
        assert_eq!(row.restarts, 3, "{row:?}");
        // The other session never noticed.
        assert_eq!(table(&b).await["restarts"], 0);
        assert!(matches!(
            exec(&b, "2 + 2").await.unwrap().value,
            Value::Int(4)
        ));
        a.do_send(StopSession);
        b.do_send(StopSession);
    });
}

#[test]
fn the_child_table_is_every_row_status_shows() {
    let sys = System::new();
    sys.block_on(async {
        let registry = Arc::new(Registry::default());
        let (a, a_id) = start(&registry, "rows");
        let task = sleeping_task(&a).await;
        // A plan store and a PTY are children too.
        a.send(crate::sessions::plan_store::PlanCall {
            caller: crate::sessions::plan_store::Caller {
                principal: "tester".into(),
            },
            op: crate::sessions::plan_store::PlanOp::List,
        })
        .await
        .unwrap()
        .unwrap();
        let open = serde_json::from_value(serde_json::json!({"cmd": "cat"})).unwrap();
        let op = shoal_pty::api::parse(shoal_proto::kernel::PtyRequest::Open(open)).unwrap();
        let opened = a
            .send(crate::msg::PtyCall {
                op,
                gate: None,
                caller: None,
            })
            .await
            .unwrap()
            .unwrap();
        let t = table(&a).await;
        let mut shown: Vec<u64> = children(&t, "actor")
            .iter()
            .filter_map(|a| a.as_u64())
            .collect();
        shown.sort_unstable();
        assert_eq!(shown, rows_under(&registry, a_id), "{t}");
        let labels: Vec<&str> = children(&t, "child")
            .iter()
            .filter_map(|c| c.as_str())
            .collect();
        assert!(labels.contains(&"session"), "{t}");
        assert!(labels.contains(&"plan_store"), "{t}");
        assert!(labels.contains(&tasks::ref_name(task).as_str()), "{t}");
        assert!(
            labels.iter().any(|l| l.starts_with("pty:")),
            "{t} (opened {opened:?})"
        );
        cancel_task(&a, task).await;
        // Closing the session kills the PTY's process group.
        a.send(StopSession).await.unwrap();
    });
}

#[test]
fn a_task_whose_actor_dies_unfinished_is_recorded_failed() {
    let sys = System::new();
    sys.block_on(async {
        let registry = Arc::new(Registry::default());
        let (a, _) = start(&registry, "died");
        let task = sleeping_task(&a).await;
        let other = sleeping_task(&a).await;
        // The supervisor hears of a child's end only through its exit notice:
        // deliver the one a dying task actor sends (whatever its incarnation;
        // only the current one counts).
        for generation in 0..16 {
            a.do_send(ChildExited {
                kind: ChildKind::Task(task),
                generation,
            });
        }
        let r = record(&a, task).await;
        assert_eq!(r["state"], "failed", "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("died")),
            "{r}"
        );
        // Never re-run, and the other task runs on.
        let t = table(&a).await;
        assert!(
            !children(&t, "child").contains(&&Json::from(tasks::ref_name(task))),
            "{t}"
        );
        let o = record(&a, other).await;
        assert_eq!(o["state"], "running", "{o}");
        let dead = view(&a, task).await;
        cancel_task(&a, other).await;
        // Closing the session cancels the task whose actor it no longer
        // counts; its evaluation ends (no process left behind).
        a.send(StopSession).await.unwrap();
        let v = wait_final(dead, Some(Duration::from_secs(10))).await;
        assert!(v.record.state.is_final(), "{:?}", v.record.state);
    });
}
