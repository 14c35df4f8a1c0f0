//! The `pty.*` requests and results as JSON (docs/rules.md §22,
//! docs/protocol.md §8): parameters parsed into [`PtyOp`], answers built from typed
//! values. The kernel methods and the MCP tools share both.

use std::time::Duration;

use serde_json::{json, Value as Json};

use super::{id_name, keys, parse_id, Exit, Matcher, PtyInfo, ReadOpts, ReadResult};
use shoal_proto::kernel::{PtyClaimed, PtyRef, PtyRequest, PtyScreenUpdate};
use shoal_proto::mcp::{
    result_json, Cursor, PtyAnswer, PtyClosed, PtyEntry, PtyExit, PtyList, PtyOpened, PtyResized,
    PtyScreen, PtySent, TakenOver,
};
use shoal_proto::rpc::{self, RpcError};

/// What `pty.open` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenRequest {
    pub cmd: String,
    pub args: Vec<String>,
    pub rows: u16,
    pub cols: u16,
    pub env: Vec<(String, String)>,
}

/// One `pty.*` request, parsed.
#[derive(Clone, Debug)]
pub enum PtyOp {
    Open(OpenRequest),
    Send { id: u64, bytes: Vec<u8> },
    Read { id: u64, opts: ReadOpts },
    Resize { id: u64, rows: u16, cols: u16 },
    Close { id: u64 },
    List,
}

impl PtyOp {
    /// The PTY it addresses (all but open and list).
    pub fn id(&self) -> Option<u64> {
        match self {
            PtyOp::Send { id, .. }
            | PtyOp::Read { id, .. }
            | PtyOp::Resize { id, .. }
            | PtyOp::Close { id } => Some(*id),
            PtyOp::Open(_) | PtyOp::List => None,
        }
    }
}

/// `-32022` "unknown or closed pty_id".
pub fn unknown_pty(id: &str) -> RpcError {
    RpcError::new(rpc::UNKNOWN_PTY, "unknown or closed pty_id").with_data(json!({"pty_id": id}))
}

/// [`unknown_pty`] with a hint naming the PTYs `open` in the session.
pub fn unknown_pty_among(id: &str, open: &[String]) -> RpcError {
    let hint = if open.is_empty() {
        "this session has no open PTY: shoal_pty_open starts one".to_string()
    } else {
        format!("open PTYs in this session: {}", open.join(", "))
    };
    RpcError::new(rpc::UNKNOWN_PTY, "unknown or closed pty_id")
        .with_data(json!({"pty_id": id, "hint": hint}))
}

/// `-32023` with the OS reason.
pub fn spawn_failed(cmd: &str, e: &std::io::Error) -> RpcError {
    RpcError::new(
        rpc::PTY_SPAWN_FAILED,
        format!("cannot start {cmd:?} on a pty: {e}"),
    )
    .with_data(json!({"cmd": cmd}))
}

/// `-32040`: `[limits] max_ptys_per_session` reached.
pub fn limit_reached(max: usize) -> RpcError {
    RpcError::new(
        rpc::RESOURCE_LIMIT,
        format!(
            "resource_limit: this session already has {max} open PTYs ([limits] max_ptys_per_session); close one first"
        ),
    )
    .with_data(json!({"code": "resource_limit", "limit": "max_ptys_per_session", "max": max}))
}

/// `-32602` for a screen of more than `MAX_CELLS` cells (after each side
/// is clamped to `1..=MAX_DIM`).
fn cells(rows: u16, cols: u16) -> Result<(), RpcError> {
    super::term::check_cells(rows, cols).map_err(|m| {
        RpcError::invalid_params(m).with_data(json!({
            "cols": cols,
            "rows": rows,
            "cells": rows as u32 * cols as u32,
            "max_cells": super::term::MAX_CELLS,
        }))
    })
}

/// `-32040`: a PTY of `cols` x `rows` needs `needed` bytes that do not fit
/// `[limits] session_memory` beside what the session holds.
pub fn memory_refused(
    what: &str,
    (cols, rows): (u16, u16),
    needed: u64,
    budget: &shoal_value::memory::MemBudget,
    ptys: usize,
) -> RpcError {
    let size = shoal_value::render::size;
    let (limit, held) = (budget.limit(), budget.held());
    let evaluating = budget.used().max(0) as u64;
    let s = if ptys == 1 { "" } else { "s" };
    let verb = if ptys == 1 { "holds" } else { "hold" };
    RpcError::new(
        rpc::RESOURCE_LIMIT,
        format!(
            "resource_limit: {what} a {cols}x{rows} PTY needs up to {}, which does not fit [limits] session_memory = {}: the session's {ptys} open PTY{s} {verb} {}, its evaluation {}; close a PTY, use a smaller screen or raise the limit",
            size(needed),
            size(limit),
            size(held),
            size(evaluating),
        ),
    )
    .with_data(json!({
        "code": "resource_limit",
        "limit": "session_memory",
        "max": limit,
        "needed": needed,
        "held_by_ptys": held,
        "evaluation": evaluating,
    }))
}

/// The PTY a request names (`-32022` for a name of none).
pub fn pty_id(r: &PtyRef) -> Result<u64, RpcError> {
    match r {
        PtyRef::Name(s) => parse_id(s).ok_or_else(|| unknown_pty(s)),
        PtyRef::Number(n) => Ok(*n),
    }
}

/// The checks serde does not make, and the PTY's id resolved.
pub fn parse(req: PtyRequest) -> Result<PtyOp, RpcError> {
    match req {
        PtyRequest::Open(p) => {
            if p.cmd.is_empty() {
                return Err(RpcError::invalid_params(
                    "pty.open requires a non-empty cmd",
                ));
            }
            let env = p.env.unwrap_or_default().0;
            if let Some((k, _)) = env
                .iter()
                .find(|(k, _)| k.is_empty() || k.contains('=') || k.contains('\0'))
            {
                return Err(RpcError::invalid_params(format!(
                    "env.{k} must be a string (and its name non-empty, without = or NUL)"
                )));
            }
            let dim = |v: Option<u64>, default| v.map_or(default, super::term::clamp_dim);
            let (rows, cols) = (dim(p.rows, 24), dim(p.cols, 80));
            cells(rows, cols)?;
            Ok(PtyOp::Open(OpenRequest {
                cmd: p.cmd,
                args: p.args.unwrap_or_default(),
                rows,
                cols,
                env,
            }))
        }
        PtyRequest::Send(p) => {
            let id = pty_id(&p.pty_id)?;
            let bytes = keys::encode_input(&p.input).map_err(|e| {
                let mut data = json!({"path": e.path});
                if let Some(i) = e.index() {
                    data["index"] = json!(i);
                }
                let message = match e.index() {
                    Some(i) => format!("input[{i}]: {}", e.message),
                    None => e.message,
                };
                RpcError::invalid_params(message).with_data(data)
            })?;
            Ok(PtyOp::Send { id, bytes })
        }
        PtyRequest::Read(p) => {
            let id = pty_id(&p.pty_id)?;
            let wait_for = match p.wait_for {
                None => None,
                Some(s) if !s.is_empty() => {
                    Some(Matcher::parse(&s).map_err(RpcError::invalid_params)?)
                }
                Some(_) => {
                    return Err(RpcError::invalid_params(
                        "wait_for must be a non-empty string (text, or re:REGEX)",
                    ))
                }
            };
            Ok(PtyOp::Read {
                id,
                opts: ReadOpts {
                    wait_for,
                    stable: p.stable_ms.map(Duration::from_millis),
                    timeout: p.timeout_ms.map(Duration::from_millis),
                    scrollback: p.scrollback.map(|n| n as usize),
                },
            })
        }
        PtyRequest::Resize(p) => {
            let id = pty_id(&p.pty_id)?;
            let (rows, cols) = (
                super::term::clamp_dim(p.rows),
                super::term::clamp_dim(p.cols),
            );
            cells(rows, cols)?;
            Ok(PtyOp::Resize { id, rows, cols })
        }
        PtyRequest::Close(p) => Ok(PtyOp::Close {
            id: pty_id(&p.pty_id)?,
        }),
        PtyRequest::List => Ok(PtyOp::List),
    }
}

pub fn exit_json(e: Option<Exit>) -> Json {
    result_json(exit_of(e))
}

fn exit_of(e: Option<Exit>) -> Option<PtyExit> {
    e.map(|e| PtyExit {
        status: e.status,
        signal: e.signal_name(),
    })
}

pub fn open_result(info: &PtyInfo) -> PtyAnswer {
    PtyAnswer::Opened(PtyOpened {
        pty_id: id_name(info.id),
        pid: info.pid,
        cmd: info.cmd.clone(),
        cols: info.cols,
        rows: info.rows,
        alive: info.alive,
    })
}

pub fn send_result(id: u64, sent: usize) -> PtyAnswer {
    PtyAnswer::Sent(PtySent {
        pty_id: id_name(id),
        sent,
    })
}

pub fn read_result(info: &PtyInfo, r: &ReadResult) -> PtyAnswer {
    let s = &r.snapshot.screen;
    PtyAnswer::Screen(Box::new(PtyScreen {
        pty_id: id_name(info.id),
        cmd: info.cmd.clone(),
        cols: info.cols,
        rows: s.rows.len(),
        cursor: Cursor {
            row: s.cursor_row,
            col: s.cursor_col,
            hidden: s.cursor_hidden,
        },
        screen: s.rows.clone(),
        changed: r.snapshot.changed,
        alive: r.alive,
        exit: if r.alive { None } else { exit_of(r.exit) },
        pid: info.pid,
        alternate_screen: s.alternate.then_some(true),
        matched: r.matched,
        scrollback: r.snapshot.scrollback.clone(),
    }))
}

pub fn resize_result(id: u64, rows: u16, cols: u16) -> PtyAnswer {
    PtyAnswer::Resized(PtyResized {
        pty_id: id_name(id),
        cols,
        rows,
    })
}

pub fn close_result(id: u64, exit: Option<Exit>) -> PtyAnswer {
    PtyAnswer::Closed(PtyClosed {
        pty_id: id_name(id),
        closed: true,
        exit: exit_of(exit),
    })
}

/// One PTY as lists show it.
pub fn list_entry(info: &PtyInfo) -> PtyEntry {
    PtyEntry {
        pty_id: id_name(info.id),
        cmd: info.cmd.clone(),
        pid: info.pid,
        cols: info.cols,
        rows: info.rows,
        alive: info.alive,
        taken_over: info.claimed.as_ref().map(|c| TakenOver {
            by: "human".into(),
            client: c.client.clone(),
        }),
        watchers: (info.watchers > 0).then_some(info.watchers),
    }
}

/// `pty.claim`'s answer.
pub fn claim_result(info: &PtyInfo, claimed: bool) -> PtyClaimed {
    PtyClaimed {
        pty_id: id_name(info.id),
        claimed,
        cols: info.cols,
        rows: info.rows,
        alive: info.alive,
    }
}

/// A `pty.watch` answer or `pty.screen` notification's params.
pub fn screen_update(id: u64, u: &super::stream::Update) -> PtyScreenUpdate {
    PtyScreenUpdate {
        pty_id: id_name(id),
        seq: u.seq,
        full: u.full,
        ansi: u.ansi.clone(),
        rows: u.rows,
        cols: u.cols,
    }
}

pub fn list_result(infos: &[PtyInfo]) -> PtyAnswer {
    PtyAnswer::List(PtyList {
        ptys: infos.iter().map(list_entry).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel request's params, parsed as the connection does.
    fn parse(method: &str, v: Json) -> Result<PtyOp, RpcError> {
        match shoal_proto::kernel::KernelRequest::parse(method, v, false)? {
            shoal_proto::kernel::KernelRequest::Pty(r) => super::parse(r),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn open_params() {
        let PtyOp::Open(o) = parse("pty.open", json!({"cmd": "cat"})).unwrap() else {
            panic!()
        };
        assert_eq!((o.cols, o.rows), (80, 24));
        let PtyOp::Open(o) = parse(
            "pty.open",
            json!({"cmd": "x", "args": ["-q"], "cols": 5000, "rows": 0, "env": {"A": "b"}}),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!((o.cols, o.rows), (1000, 1));
        assert_eq!(o.args, vec!["-q"]);
        assert_eq!(o.env, vec![("A".to_string(), "b".to_string())]);
        for bad in [
            json!({}),
            json!({"cmd": ""}),
            json!({"cmd": "x", "args": [1]}),
            json!({"cmd": "x", "env": {"A": 1}}),
            json!({"cmd": "x", "cols": -1}),
            json!({"cmd": "x", "cols": 1000, "rows": 251}),
            json!({"cmd": "x", "cols": 5000, "rows": 5000}),
        ] {
            let e = parse("pty.open", bad.clone()).unwrap_err();
            assert_eq!(e.code, rpc::INVALID_PARAMS, "{bad}");
        }
        // The cell cap applies after the clamp, to resizes too.
        let e = parse(
            "pty.resize",
            json!({"pty_id": "pty:1", "cols": 5000, "rows": 5000}),
        )
        .unwrap_err();
        assert_eq!(e.code, rpc::INVALID_PARAMS);
        assert!(e.message.contains("1000000 cells"), "{}", e.message);
        assert!(parse(
            "pty.resize",
            json!({"pty_id": "pty:1", "cols": 1000, "rows": 250})
        )
        .is_ok());
    }

    #[test]
    fn the_charge_is_what_the_docs_say() {
        // docs/protocol.md §8: ~2.9 MB for 80x24, ~20.8 MB for 1000x250.
        let small = crate::charge(24, 80);
        assert!((2_800_000..3_000_000).contains(&small), "{small}");
        let large = crate::charge(250, 1000);
        assert!((20_700_000..20_900_000).contains(&large), "{large}");
    }

    #[test]
    fn send_errors_carry_the_index() {
        let e = parse(
            "pty.send",
            json!({"pty_id": "pty:1", "input": ["a", {"key": "Bogus"}]}),
        )
        .unwrap_err();
        assert_eq!(e.code, rpc::INVALID_PARAMS);
        assert_eq!(e.data.as_ref().unwrap()["index"], json!(1));
        assert!(e.message.starts_with("input[1]"), "{}", e.message);
        let PtyOp::Send { id, bytes } = parse(
            "pty.send",
            json!({"pty_id": "pty:7", "input": ["hi", {"key": "Enter"}]}),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!((id, bytes), (7, b"hi\r".to_vec()));
    }

    #[test]
    fn ids_and_read_params() {
        assert_eq!(
            parse("pty.close", json!({"pty_id": "pty:x"}))
                .unwrap_err()
                .code,
            rpc::UNKNOWN_PTY
        );
        assert_eq!(
            parse("pty.close", json!({})).unwrap_err().code,
            rpc::INVALID_PARAMS
        );
        let PtyOp::Read { opts, .. } = parse(
            "pty.read",
            json!({"pty_id": "pty:2", "wait_for": "re:\\d+", "timeout_ms": 50, "scrollback": 3}),
        )
        .unwrap() else {
            panic!()
        };
        assert!(opts.wait_for.unwrap().matches("x 42"));
        assert_eq!(opts.timeout, Some(Duration::from_millis(50)));
        assert_eq!(opts.scrollback, Some(3));
        assert!(parse("pty.read", json!({"pty_id": "pty:2", "wait_for": "re:("})).is_err());
        assert_eq!(
            exit_json(Some(Exit {
                status: None,
                signal: Some(9)
            })),
            json!({"status": null, "signal": "SIGKILL"})
        );
        assert_eq!(
            exit_json(Some(Exit {
                status: Some(0),
                signal: None
            })),
            json!({"status": 0, "signal": null})
        );
        assert_eq!(exit_json(None), Json::Null);
    }
}
