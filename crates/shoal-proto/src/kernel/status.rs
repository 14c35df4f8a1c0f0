//! `daemon.status`, typed (docs/protocol.md §2): the daemon's facts, every
//! actor's row, the sessions, the journal, the services, each `[limits]` quota
//! with its use, the adapters, the sandbox and the HTTP listener. A token
//! principal's answer is [`TokenStatus`]: the version, its sessions and its
//! own quota. A member `null` when unknown is an `Option` without
//! `skip_serializing_if`.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::{SessionRow, TaskRow};

/// `daemon.status`: the local user's view or a token principal's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum DaemonStatus {
    Local(Box<LocalStatus>),
    Token(Box<TokenStatus>),
}

/// `daemon.status` for the local user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LocalStatus {
    pub daemon: DaemonFacts,
    pub actors: Vec<ActorRow>,
    pub sessions: Vec<SessionRow>,
    /// `null` until the journal runs.
    pub journal: Option<JournalStatus>,
    /// Each supervised service by name, in the daemon's order.
    pub services: ServiceRows,
    pub limits: Limits,
    pub adapters: AdaptersStatus,
    pub leash: LeashStatus,
    pub rss_bytes: Option<u64>,
    /// `null` without an HTTP listener.
    pub http: Option<HttpStatus>,
}

/// `daemon.status` for a token principal: nothing of the daemon's internals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenStatus {
    pub daemon: TokenDaemonFacts,
    pub principal: String,
    pub sessions: Vec<SessionRow>,
    pub limits: Limits,
}

/// The daemon process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DaemonFacts {
    pub pid: u32,
    pub version: Cow<'static, str>,
    pub uptime_ms: u64,
    pub started_unix_ms: u64,
    pub socket: String,
    pub socket_activated: bool,
    pub state_dir: String,
    /// The config file read (`null`: defaults).
    pub config: Option<String>,
    pub log_dir: String,
}

/// What a token principal sees of the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenDaemonFacts {
    pub version: Cow<'static, str>,
    pub uptime_ms: u64,
}

/// One live actor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ActorRow {
    pub id: u64,
    pub kind: Cow<'static, str>,
    pub name: String,
    /// The actor that supervises it (`null`: none).
    pub parent: Option<u64>,
    pub state: Cow<'static, str>,
    /// Messages queued and not yet handled.
    pub mailbox: u64,
    pub handled: u64,
    pub restarts: u64,
    pub last_error: Option<String>,
    pub age_ms: u64,
}

/// The journal's figures. Store counters are `null` until first read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JournalStatus {
    pub exec_overhead_p50_us: Option<f64>,
    pub exec_overhead_p99_us: Option<f64>,
    pub path: String,
    pub durability: shoal_journal::Durability,
    pub flush_ms: u64,
    pub entries: Option<u64>,
    pub bytes: Option<u64>,
    pub blobs: Option<u64>,
    pub file_bytes: Option<u64>,
    pub queued: u64,
    pub commits: u64,
    pub committed_ops: u64,
    pub failed_commits: u64,
    pub last_commit_us: u64,
    pub last_commit_ops: u64,
    /// Batched: how long acknowledged ops waited to be durable (the window a crash loses).
    pub last_window_us: u64,
    pub worst_window_us: u64,
    /// Batched, now: the oldest acknowledged op not yet durable (a commit in flight included).
    pub at_risk_us: u64,
    pub last_commit_at: i64,
    pub last_error: Option<String>,
    /// `ok` or `degraded`.
    pub health: Cow<'static, str>,
    pub degraded_since: Option<i64>,
    pub failed_ops: u64,
    pub reopens: u64,
    pub dropped_ops: u64,
}

/// A supervised service's restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServiceRow {
    pub restarts: u64,
    pub failed: bool,
}

/// `{service: {restarts, failed}}`, keys in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceRows(pub Vec<(Cow<'static, str>, ServiceRow)>);

impl JsonSchema for ServiceRows {
    fn schema_name() -> Cow<'static, str> {
        "ServiceRows".into()
    }

    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let row = g.subschema_for::<ServiceRow>();
        json_schema!({"type": "object", "additionalProperties": row})
    }
}

impl Serialize for ServiceRows {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de> Deserialize<'de> for ServiceRows {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Rows;
        impl<'de> serde::de::Visitor<'de> for Rows {
            type Value = ServiceRows;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of services")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<ServiceRows, A::Error> {
                let mut rows = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, ServiceRow>()? {
                    rows.push((Cow::Owned(k), v));
                }
                Ok(ServiceRows(rows))
            }
        }
        d.deserialize_map(Rows)
    }
}

/// One `[limits]` quota: its key, its maximum and, where the daemon counts
/// it, its use now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Quota {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    pub max: u64,
    pub key: Cow<'static, str>,
}

impl Quota {
    pub fn used(used: u64, max: u64, key: &'static str) -> Self {
        Quota {
            used: Some(used),
            max,
            key: Cow::Borrowed(key),
        }
    }
}

/// Each quota with its use. Per-session and per-connection quotas show the
/// busiest session or connection; a token principal sees only
/// `sessions_per_principal`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Quota>,
    /// The busiest token principal's sessions (the local uid has no such cap),
    /// or the asking principal's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions_per_principal: Option<Quota>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<Quota>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriptions_per_connection: Option<Quota>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_per_session: Option<Quota>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ptys_per_session: Option<Quota>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_memory: Option<Quota>,
    /// What the token principal holding the most holds of its
    /// `principal_memory` together, or the asking principal's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal_memory: Option<Quota>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spill_bytes: Option<Quota>,
}

/// The adapters loaded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AdaptersStatus {
    pub count: usize,
    pub warnings: Vec<String>,
}

/// The sandbox tier and, per configured principal, what is enforced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LeashStatus {
    pub tier: Cow<'static, str>,
    pub landlock_abi: i64,
    pub plan_ttl_s: u64,
    /// The token store's file (`null`: none).
    pub tokens: Option<String>,
    pub principals: Vec<LeashPrincipal>,
}

/// A configured principal's sandbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LeashPrincipal {
    pub name: String,
    pub caps_enforced: bool,
    pub hermetic: bool,
    pub net: Cow<'static, str>,
    /// The verdict on an opaque effect.
    pub opaque: Cow<'static, str>,
    pub auto_apply: String,
}

/// The HTTP listener.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HttpStatus {
    pub listen: String,
    pub url: String,
    /// TCP connections open now.
    pub connections: usize,
    /// SSE streams being read now.
    pub streams: usize,
    /// 2025-era sessions open now.
    pub sessions: usize,
    /// Requests served since start.
    pub requests: u64,
}

/// A session supervisor's child table: `{session, failed, restarts,
/// children, tasks}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChildTable {
    pub session: String,
    pub failed: bool,
    pub restarts: u64,
    pub children: Vec<ChildRow>,
    pub tasks: Vec<TaskRow>,
}

/// One child of a session supervisor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChildRow {
    pub child: String,
    /// Its actor's id.
    pub actor: u64,
    pub state: Cow<'static, str>,
    pub age_ms: u64,
    pub restarts: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> SessionRow {
        SessionRow {
            name: "s".into(),
            owner: "u".into(),
            cwd: "/w".into(),
            clients: 1,
            humans: vec![],
            busy: false,
            transcript: 2,
            tasks: 0,
            ptys: 0,
            pty_memory: 0,
            memory: 0,
            procs: 0,
            spill_bytes: 0,
            ref_waits: 0,
            pty_list: vec![],
            age_ms: 5,
            access: Some("read".into()),
            task_list: None,
            children: None,
            restarts: None,
        }
    }

    fn token_status() -> DaemonStatus {
        DaemonStatus::Token(Box::new(TokenStatus {
            daemon: TokenDaemonFacts {
                version: "1.0".into(),
                uptime_ms: 7,
            },
            principal: "agent:a".into(),
            sessions: vec![row()],
            limits: Limits {
                sessions_per_principal: Some(Quota::used(1, 4, "max_sessions_per_principal")),
                ..Default::default()
            },
        }))
    }

    fn local_status() -> DaemonStatus {
        let mut session = row();
        session.access = None;
        session.task_list = Some(vec![]);
        session.children = Some(vec![ChildRow {
            child: "session".into(),
            actor: 3,
            state: "running".into(),
            age_ms: 4,
            restarts: 0,
        }]);
        session.restarts = Some(0);
        DaemonStatus::Local(Box::new(LocalStatus {
            daemon: DaemonFacts {
                pid: 9,
                version: "1.0".into(),
                uptime_ms: 10,
                started_unix_ms: 11,
                socket: "/r/shoal.sock".into(),
                socket_activated: false,
                state_dir: "/s".into(),
                config: None,
                log_dir: "/s/logs".into(),
            },
            actors: vec![ActorRow {
                id: 1,
                kind: "daemon".into(),
                name: "daemon".into(),
                parent: None,
                state: "running".into(),
                mailbox: 0,
                handled: 3,
                restarts: 0,
                last_error: None,
                age_ms: 12,
            }],
            sessions: vec![session],
            journal: Some(JournalStatus {
                exec_overhead_p50_us: Some(1.5),
                exec_overhead_p99_us: None,
                path: "/s/journal.redb".into(),
                durability: shoal_journal::Durability::Batched,
                flush_ms: 5,
                entries: Some(2),
                bytes: None,
                blobs: None,
                file_bytes: None,
                queued: 0,
                commits: 1,
                committed_ops: 2,
                failed_commits: 0,
                last_commit_us: 30,
                last_commit_ops: 2,
                last_window_us: 40,
                worst_window_us: 50,
                at_risk_us: 0,
                last_commit_at: 99,
                last_error: None,
                health: "ok".into(),
                degraded_since: None,
                failed_ops: 0,
                reopens: 0,
                dropped_ops: 0,
            }),
            services: ServiceRows(vec![
                (
                    "journal_writer".into(),
                    ServiceRow {
                        restarts: 1,
                        failed: false,
                    },
                ),
                (
                    "event_bus".into(),
                    ServiceRow {
                        restarts: 0,
                        failed: true,
                    },
                ),
            ]),
            limits: Limits {
                sessions: Some(Quota::used(1, 64, "max_sessions")),
                sessions_per_principal: Some(Quota::used(0, 4, "max_sessions_per_principal")),
                session_memory: Some(Quota {
                    used: None,
                    max: 1024,
                    key: "session_memory".into(),
                }),
                ..Default::default()
            },
            adapters: AdaptersStatus {
                count: 3,
                warnings: vec!["w".into()],
            },
            leash: LeashStatus {
                tier: "A".into(),
                landlock_abi: 5,
                plan_ttl_s: 600,
                tokens: None,
                principals: vec![LeashPrincipal {
                    name: "agent:a".into(),
                    caps_enforced: true,
                    hermetic: false,
                    net: "open".into(),
                    opaque: "deny".into(),
                    auto_apply: "ingrant".into(),
                }],
            },
            rss_bytes: Some(4096),
            http: Some(HttpStatus {
                listen: "127.0.0.1:80".into(),
                url: "http://127.0.0.1:80/mcp".into(),
                connections: 1,
                streams: 0,
                sessions: 2,
                requests: 3,
            }),
        }))
    }

    #[test]
    fn a_token_principal_sees_its_sessions_and_its_quota() {
        let st = token_status();
        assert_eq!(
            serde_json::to_value(&st).unwrap(),
            json!({
                "daemon": {"version": "1.0", "uptime_ms": 7},
                "principal": "agent:a",
                "sessions": [{
                    "name": "s", "owner": "u", "cwd": "/w", "clients": 1, "humans": [],
                    "busy": false, "transcript": 2, "tasks": 0, "ptys": 0, "pty_memory": 0,
                    "memory": 0, "procs": 0, "spill_bytes": 0, "ref_waits": 0, "pty_list": [], "age_ms": 5,
                    "access": "read",
                }],
                "limits": {"sessions_per_principal": {"used": 1, "max": 4, "key": "max_sessions_per_principal"}},
            })
        );
    }

    #[test]
    fn the_local_status_keeps_its_sections_and_order() {
        let st = local_status();
        let expected = json!({
            "daemon": {
                "pid": 9, "version": "1.0", "uptime_ms": 10, "started_unix_ms": 11,
                "socket": "/r/shoal.sock", "socket_activated": false, "state_dir": "/s",
                "config": null, "log_dir": "/s/logs",
            },
            "actors": [{
                "id": 1, "kind": "daemon", "name": "daemon", "parent": null, "state": "running",
                "mailbox": 0, "handled": 3, "restarts": 0, "last_error": null, "age_ms": 12,
            }],
            "sessions": [{
                "name": "s", "owner": "u", "cwd": "/w", "clients": 1, "humans": [],
                "busy": false, "transcript": 2, "tasks": 0, "ptys": 0, "pty_memory": 0,
                "memory": 0, "procs": 0, "spill_bytes": 0, "ref_waits": 0, "pty_list": [], "age_ms": 5,
                "task_list": [],
                "children": [{"child": "session", "actor": 3, "state": "running", "age_ms": 4, "restarts": 0}],
                "restarts": 0,
            }],
            "journal": {
                "exec_overhead_p50_us": 1.5, "exec_overhead_p99_us": null,
                "path": "/s/journal.redb", "durability": "batched", "flush_ms": 5,
                "entries": 2, "bytes": null, "blobs": null, "file_bytes": null,
                "queued": 0, "commits": 1, "committed_ops": 2, "failed_commits": 0,
                "last_commit_us": 30, "last_commit_ops": 2, "last_window_us": 40,
                "worst_window_us": 50, "at_risk_us": 0, "last_commit_at": 99,
                "last_error": null, "health": "ok", "degraded_since": null,
                "failed_ops": 0, "reopens": 0, "dropped_ops": 0,
            },
            "services": {
                "journal_writer": {"restarts": 1, "failed": false},
                "event_bus": {"restarts": 0, "failed": true},
            },
            "limits": {
                "sessions": {"used": 1, "max": 64, "key": "max_sessions"},
                "sessions_per_principal": {"used": 0, "max": 4, "key": "max_sessions_per_principal"},
                "session_memory": {"max": 1024, "key": "session_memory"},
            },
            "adapters": {"count": 3, "warnings": ["w"]},
            "leash": {
                "tier": "A", "landlock_abi": 5, "plan_ttl_s": 600, "tokens": null,
                "principals": [{
                    "name": "agent:a", "caps_enforced": true, "hermetic": false,
                    "net": "open", "opaque": "deny", "auto_apply": "ingrant",
                }],
            },
            "rss_bytes": 4096,
            "http": {
                "listen": "127.0.0.1:80", "url": "http://127.0.0.1:80/mcp",
                "connections": 1, "streams": 0, "sessions": 2, "requests": 3,
            },
        });
        // The order too: `json!` keeps it (preserve_order), so compare the text.
        assert_eq!(
            serde_json::to_string(&st).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
    }

    /// What `shoal status` reads back is what the daemon wrote, in the form
    /// it was written (the token form has no daemon internals to miss).
    #[test]
    fn a_status_reads_back_as_it_was_written() {
        let mut local = local_status();
        if let DaemonStatus::Local(l) = &mut local {
            let s = &mut l.sessions[0];
            s.humans.push(super::super::HumanRow {
                client: "attach".into(),
                since: "2026-01-01T00:00:00Z".into(),
            });
            s.pty_list.push(super::super::PtyEntry {
                pty_id: "pty:1".into(),
                cmd: "vim".into(),
                pid: 7,
                cols: 80,
                rows: 24,
                alive: true,
                taken_over: Some(super::super::TakenOver {
                    by: "human".into(),
                    client: "attach".into(),
                }),
                watchers: Some(2),
            });
        }
        for st in [local, token_status()] {
            let text = serde_json::to_string(&st).unwrap();
            let back: DaemonStatus = serde_json::from_str(&text).unwrap();
            assert_eq!(back, st);
            assert_eq!(serde_json::to_string(&back).unwrap(), text);
        }
    }
}
