//! The strict `shoal.toml` loader (docs/protocol.md §1).
//!
//! Every key is known: unknown keys, wrong types and bad values are errors that
//! name `file:line:column`. Config types are plain data, separate from runtime
//! state; `shoal.toml.example` documents every key with its default.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Default frame limit of both protocols: 16 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub daemon: DaemonConfig,
    pub socket: SocketConfig,
    pub session: SessionConfig,
    pub journal: JournalConfig,
    pub limits: LimitsConfig,
    /// `[policy.principal."NAME"]` sections (Leash, docs/rules.md §21).
    pub policy: shoal_policy::policy::PolicyConfig,
    pub plans: PlansConfig,
    pub tasks: TasksConfig,
    pub http: HttpConfig,
}

/// `[http]`: MCP over Streamable HTTP from the daemon (docs/http.md). Off unless
/// `listen` (or `shoal daemon --http`) names an address.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// `host:port` to serve `/mcp` on; loopback only (TLS is not supported yet).
    pub listen: Option<String>,
    /// Browser origins allowed besides loopback ones (`http://127.0.0.1:PORT`, ...).
    pub allowed_origins: Vec<String>,
    /// How long a client may take to send a request's head and body.
    pub request_timeout_ms: u64,
    /// An SSE comment this often keeps idle streams open and finds vanished clients.
    pub keepalive_ms: u64,
    /// A 2025-era session (`Mcp-Session-Id`) unused this long, with no open
    /// stream, ends.
    pub session_idle_secs: u64,
    /// The daemon connections one token principal's HTTP clients hold at once
    /// (sessions, stateless requests running and idle ones kept for reuse):
    /// a new session past it ends the principal's least recently used one,
    /// a stateless request past it is refused.
    pub connections_per_principal: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: None,
            allowed_origins: Vec::new(),
            request_timeout_ms: 10_000,
            keepalive_ms: 15_000,
            session_idle_secs: 3600,
            connections_per_principal: 32,
        }
    }
}

/// `[tasks]`: how long finished background tasks stay listed.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TasksConfig {
    /// How long a finished task's record is kept (`90s`, `30m`, `1h`, `2d`).
    pub retain: TaskRetain,
    /// At most this many finished records per session (the oldest go first).
    pub retain_max: usize,
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            retain: TaskRetain(shoal_lang::task::RETAIN),
            retain_max: shoal_lang::task::RETAIN_MAX,
        }
    }
}

/// A checked `tasks.retain`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskRetain(pub std::time::Duration);

impl<'de> Deserialize<'de> for TaskRetain {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        shoal_policy::parse_duration(&s)
            .map(TaskRetain)
            .map_err(|e| serde::de::Error::custom(format!("tasks.retain: {e}")))
    }
}

/// `[plans]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PlansConfig {
    /// How long a plan can be applied after it was made (`90s`, `30m`, `1h`, `2d`).
    pub ttl: PlanTtl,
}

impl Default for PlansConfig {
    fn default() -> Self {
        PlansConfig {
            ttl: PlanTtl(shoal_policy::DEFAULT_PLAN_TTL),
        }
    }
}

/// A checked `plans.ttl`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanTtl(pub std::time::Duration);

impl<'de> Deserialize<'de> for PlanTtl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        shoal_policy::parse_duration(&s)
            .map(PlanTtl)
            .map_err(serde::de::Error::custom)
    }
}

/// `[limits]`: every quota the daemon enforces (docs/protocol.md §10). A reached
/// limit is a `-32040` `resource_limit` error that names its key.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Bytes the values of one session may hold (an evaluation past it fails
    /// with `resource_limit`).
    pub session_memory: u64,
    /// Bytes the sessions of one token principal may hold together, across
    /// execs (unset: `session_memory`). The local user is not bound by it.
    pub principal_memory: Option<u64>,
    /// Named sessions alive at once.
    pub max_sessions: usize,
    /// Named sessions alive at once that one principal owns (created by its attach).
    pub max_sessions_per_principal: usize,
    /// Client connections open at once.
    pub max_connections: usize,
    /// Running background tasks per session.
    pub max_tasks_per_session: usize,
    /// Open PTYs per session.
    pub max_ptys_per_session: usize,
    /// Resource subscriptions one connection may hold.
    pub max_subscriptions_per_connection: usize,
    /// Captured output a session may spill to disk, in bytes; past it the
    /// stream is closed for the child and the outcome says `truncated: true`.
    pub spill_bytes: u64,
    /// Bytes a token principal's private `/tmp` may hold (the tmpfs of its
    /// namespace holder, whose files are memory); a write past it fails
    /// with `ENOSPC`.
    pub token_tmp: u64,
    /// Bytes a token principal's trash (where its `rm` without `--permanent`
    /// moves files) may hold: older entries are purged to make room, and a
    /// file larger than this is deleted, not trashed.
    pub token_trash: u64,
    /// How long a client may leave its write queue full (not reading what it
    /// is sent) before its connection is closed, in milliseconds.
    pub write_stall_ms: u64,
}

impl LimitsConfig {
    /// `principal_memory`, or `session_memory` when unset.
    pub fn principal_memory(&self) -> u64 {
        self.principal_memory.unwrap_or(self.session_memory)
    }

    /// Places of `max_sessions` only the local user may take: token principals
    /// together create sessions while fewer than `max_sessions` minus these are
    /// alive ([`LOCAL_SESSIONS`], at most half of `max_sessions`).
    pub fn local_sessions(&self) -> usize {
        LOCAL_SESSIONS.min(self.max_sessions / 2)
    }
}

/// The share of `[limits] max_sessions` kept for the local user (see
/// [`LimitsConfig::local_sessions`]).
pub const LOCAL_SESSIONS: usize = 4;

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            session_memory: 1 << 30,
            principal_memory: None,
            max_sessions: 64,
            max_sessions_per_principal: 16,
            max_connections: 256,
            max_tasks_per_session: 64,
            max_ptys_per_session: 16,
            max_subscriptions_per_connection: 64,
            spill_bytes: 4 << 30,
            token_tmp: 256 << 20,
            token_trash: 256 << 20,
            write_stall_ms: 10_000,
        }
    }
}

/// `journal.durability`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum JournalDurability {
    /// The exec reply waits for the commit.
    Immediate,
    /// Group commit every `flush_ms`: a crash loses at most that much.
    #[default]
    Batched,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct JournalConfig {
    pub durability: JournalDurability,
    /// Batched mode: the longest an acknowledged entry waits for its durable commit.
    pub flush_ms: u64,
    /// Keep at most this many entries (oldest unpinned go first); unset: no limit.
    pub max_entries: Option<u64>,
    /// Keep entries plus stored outputs under this many bytes; unset: no limit.
    pub max_bytes: Option<u64>,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            durability: JournalDurability::Batched,
            flush_ms: 100,
            max_entries: None,
            max_bytes: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// tracing filter directive for the log file (`SHOAL_LOG` overrides).
    pub log_level: String,
    /// How many daily log files to keep.
    pub log_keep_days: usize,
    /// Largest accepted frame in bytes, both protocols.
    pub max_frame_bytes: u64,
    /// Restarts of a crashed EventBus, JournalWriter or Listener allowed per minute
    /// before the daemon stops restarting it.
    pub max_restarts_per_minute: u32,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct SocketConfig {
    /// Other uids allowed to connect (they must then present a token).
    pub allow_uids: Vec<u32>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// Column width of block renders.
    pub render_width: usize,
    /// Restarts of a crashed session actor allowed per minute before its
    /// supervisor gives up and reports it failed.
    pub max_restarts_per_minute: u32,
    /// Transcript values (`out:N`) a session keeps in memory; older ones are
    /// read back from the journal on demand. 1 ..= 1000000.
    pub resident_values: usize,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            log_level: "info".into(),
            log_keep_days: 7,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_restarts_per_minute: 10,
        }
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            render_width: 80,
            max_restarts_per_minute: 10,
            resident_values: 4096,
        }
    }
}

/// A config error, already located: `file:line:column: message`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// The loaded config plus where it came from (`None`: defaults, no file).
#[derive(Clone, Debug)]
pub struct Loaded {
    pub config: Config,
    pub path: Option<PathBuf>,
    /// The text it was parsed from (empty: defaults).
    pub text: String,
}

/// Load `path`; a missing file is an error only when `required`.
pub fn load(path: &Path, required: bool) -> Result<Loaded, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Loaded {
            config: parse(&text, path)?,
            path: Some(path.to_path_buf()),
            text,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => Ok(Loaded {
            config: Config::default(),
            path: None,
            text: String::new(),
        }),
        Err(e) => Err(ConfigError::Io {
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// Parse and validate config text; `path` is only used in messages.
pub use shoal_base::text::line_col;

pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let config: Config = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
        ConfigError::Invalid {
            path: path.to_path_buf(),
            line,
            column,
            message: e.message().trim().to_string(),
        }
    })?;
    validate(&config, text, path)?;
    Ok(config)
}

fn validate(c: &Config, text: &str, path: &Path) -> Result<(), ConfigError> {
    let bad = |key: &str, message: String| {
        let (line, column) = locate_key(text, key);
        Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line,
            column,
            message,
        })
    };
    // A token's sessions are named NAME@PRINCIPAL (docs/leash.md).
    if let Some(name) = c.policy.principal.keys().find(|n| n.contains('@')) {
        return bad(
            name,
            format!("a principal name has no '@' (got [policy.principal.{name:?}])"),
        );
    }
    if c.daemon.max_frame_bytes < 1024 || c.daemon.max_frame_bytes > 1 << 30 {
        return bad(
            "max_frame_bytes",
            format!(
                "max_frame_bytes must be between 1024 and 1073741824 (got {})",
                c.daemon.max_frame_bytes
            ),
        );
    }
    if c.daemon.log_level.trim().is_empty()
        || tracing_subscriber::EnvFilter::try_new(&c.daemon.log_level).is_err()
    {
        return bad(
            "log_level",
            format!("log_level is not a valid filter: {:?}", c.daemon.log_level),
        );
    }
    if !(100..=600_000).contains(&c.http.request_timeout_ms) {
        return bad(
            "request_timeout_ms",
            format!(
                "request_timeout_ms must be between 100 and 600000 (got {})",
                c.http.request_timeout_ms
            ),
        );
    }
    if !(50..=600_000).contains(&c.http.keepalive_ms) {
        return bad(
            "keepalive_ms",
            format!(
                "keepalive_ms must be between 50 and 600000 (got {})",
                c.http.keepalive_ms
            ),
        );
    }
    if !(1..=100_000).contains(&c.http.connections_per_principal) {
        return bad(
            "connections_per_principal",
            format!(
                "connections_per_principal must be between 1 and 100000 (got {})",
                c.http.connections_per_principal
            ),
        );
    }
    if c.http.session_idle_secs == 0 {
        return bad(
            "session_idle_secs",
            "session_idle_secs must be at least 1".into(),
        );
    }
    if let Some(l) = &c.http.listen {
        if let Err(e) = crate::config::http_listen(l) {
            return bad("listen", e);
        }
    }
    if c.daemon.log_keep_days == 0 {
        return bad("log_keep_days", "log_keep_days must be at least 1".into());
    }
    if !(1..=1_000_000).contains(&c.session.resident_values) {
        return bad(
            "resident_values",
            format!(
                "resident_values must be between 1 and 1000000 (got {})",
                c.session.resident_values
            ),
        );
    }
    if !(20..=1000).contains(&c.session.render_width) {
        return bad(
            "render_width",
            format!(
                "render_width must be between 20 and 1000 (got {})",
                c.session.render_width
            ),
        );
    }
    if !(1..=60_000).contains(&c.journal.flush_ms) {
        return bad(
            "flush_ms",
            format!(
                "flush_ms must be between 1 and 60000 (got {})",
                c.journal.flush_ms
            ),
        );
    }
    let l = &c.limits;
    if l.session_memory < 1 << 20 {
        return bad(
            "session_memory",
            format!(
                "session_memory must be at least 1048576 (got {})",
                l.session_memory
            ),
        );
    }
    if let Some(m) = l.principal_memory.filter(|m| *m < 1 << 20) {
        return bad(
            "principal_memory",
            format!("principal_memory must be at least 1048576 (got {m})"),
        );
    }
    if l.spill_bytes < 1 << 20 {
        return bad(
            "spill_bytes",
            format!(
                "spill_bytes must be at least 1048576 (got {})",
                l.spill_bytes
            ),
        );
    }
    if l.token_tmp < 1 << 20 {
        return bad(
            "token_tmp",
            format!("token_tmp must be at least 1048576 (got {})", l.token_tmp),
        );
    }
    if l.token_trash < 1 << 20 {
        return bad(
            "token_trash",
            format!(
                "token_trash must be at least 1048576 (got {})",
                l.token_trash
            ),
        );
    }
    for (key, value, max) in [
        ("max_sessions", l.max_sessions, 100_000),
        (
            "max_sessions_per_principal",
            l.max_sessions_per_principal,
            100_000,
        ),
        ("max_connections", l.max_connections, 100_000),
        ("max_tasks_per_session", l.max_tasks_per_session, 100_000),
        ("max_ptys_per_session", l.max_ptys_per_session, 10_000),
        (
            "max_subscriptions_per_connection",
            l.max_subscriptions_per_connection,
            100_000,
        ),
    ] {
        if !(1..=max).contains(&value) {
            return bad(
                key,
                format!("{key} must be between 1 and {max} (got {value})"),
            );
        }
    }
    if !(1..=1_000_000).contains(&c.tasks.retain_max) {
        return bad(
            "retain_max",
            format!(
                "tasks.retain_max must be between 1 and 1000000 (got {})",
                c.tasks.retain_max
            ),
        );
    }
    if c.journal.max_entries == Some(0) {
        return bad("max_entries", "max_entries must be at least 1".into());
    }
    if c.journal.max_bytes.is_some_and(|b| b < 1 << 20) {
        return bad(
            "max_bytes",
            format!(
                "max_bytes must be at least 1048576 (got {})",
                c.journal.max_bytes.unwrap_or(0)
            ),
        );
    }
    Ok(())
}

/// Where `key = ...` first appears (the value position), else 1:1.
fn locate_key(text: &str, key: &str) -> (usize, usize) {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(key) {
            let rest_trim = rest.trim_start();
            if let Some(after_eq) = rest_trim.strip_prefix('=') {
                let indent = line.len() - trimmed.len();
                let eq = indent + key.len() + (rest.len() - rest_trim.len());
                let value_at = eq + 1 + (after_eq.len() - after_eq.trim_start().len());
                return line_col(text, offset + value_at);
            }
        }
        offset += line.len();
    }
    (1, 1)
}

/// Check an `[http] listen` address: `host:port` on a loopback address. Another
/// address would need TLS, which is not supported yet: refused, never served in
/// the clear.
pub fn http_listen(addr: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let all: Vec<std::net::SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| {
            format!("http listen address {addr:?}: {e} (expected host:port, e.g. 127.0.0.1:7417)")
        })?
        .collect();
    let first = *all
        .first()
        .ok_or_else(|| format!("http listen address {addr:?} resolves to nothing"))?;
    if let Some(a) = all.iter().find(|a| !a.ip().is_loopback()) {
        return Err(format!(
            "http listen address {addr:?} ({a}) is not a loopback address: serving MCP beyond this machine needs TLS, which is not supported yet"
        ));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, Path::new("c.toml")).unwrap_err().to_string()
    }

    #[test]
    fn defaults_and_empty() {
        assert_eq!(parse("", Path::new("c.toml")).unwrap(), Config::default());
        assert_eq!(Config::default().daemon.max_frame_bytes, 16 * 1024 * 1024);
    }

    #[test]
    fn errors_carry_line_and_column() {
        let cases = [
            (
                "[daemon]\nlog_levl = \"x\"\n",
                "c.toml:2:1: unknown field `log_levl`",
            ),
            (
                "[daemon]\nmax_frame_bytes = \"big\"\n",
                "c.toml:2:19: invalid type",
            ),
            (
                "[daemon]\nmax_frame_bytes = 10\n",
                "c.toml:2:19: max_frame_bytes must be between",
            ),
            ("[nope]\n", "c.toml:1:2: unknown field `nope`"),
            (
                "[session]\n  render_width = 5\n",
                "c.toml:2:18: render_width must be between",
            ),
            (
                "[journal]\ndurability = \"sometimes\"\n",
                "c.toml:2:14: unknown variant `sometimes`",
            ),
            (
                "[journal]\nflush_ms = 0\n",
                "c.toml:2:12: flush_ms must be between",
            ),
            (
                "[journal]\nmax_entries = 0\n",
                "c.toml:2:15: max_entries must be at least 1",
            ),
            (
                "[journal]\nmax_bytes = 10\n",
                "c.toml:2:13: max_bytes must be at least",
            ),
            (
                "[limits]\nmax_sessions = 0\n",
                "c.toml:2:16: max_sessions must be between 1 and 100000",
            ),
            (
                "[limits]\nmax_sessions_per_principal = 0\n",
                "c.toml:2:30: max_sessions_per_principal must be between 1 and 100000",
            ),
            (
                "[limits]\nprincipal_memory = 1000\n",
                "c.toml:2:20: principal_memory must be at least 1048576",
            ),
            (
                "[limits]\nprincipal_memory = \"1G\"\n",
                "c.toml:2:20: invalid type",
            ),
            (
                "[limits]\nspill_bytes = 5\n",
                "c.toml:2:15: spill_bytes must be at least",
            ),
            (
                "[limits]\ntoken_tmp = 4096\n",
                "c.toml:2:13: token_tmp must be at least 1048576",
            ),
            (
                "[policy.principal.\"x@b\"]\nopaque = \"deny\"\n",
                "c.toml:1:1: a principal name has no '@'",
            ),
            (
                "[limits]\ntoken_tmp = \"256M\"\n",
                "c.toml:2:13: invalid type",
            ),
            (
                "[limits]\ntoken_trash = 4096\n",
                "c.toml:2:15: token_trash must be at least 1048576",
            ),
            (
                "[tasks]\nretain = \"soon\"\n",
                "c.toml:2:10: tasks.retain: \"soon\" is not a duration",
            ),
            (
                "[tasks]\nretain_max = 0\n",
                "c.toml:2:14: tasks.retain_max must be between 1 and 1000000",
            ),
            (
                "[journal]\nflush = 1\n",
                "c.toml:2:1: unknown field `flush`",
            ),
        ];
        for (text, want) in cases {
            let got = err(text);
            assert!(got.starts_with(want), "{text:?}: {got}");
        }
    }

    #[test]
    fn example_file_parses() {
        let text = include_str!("../../../shoal.toml.example");
        let c = parse(text, Path::new("shoal.toml.example")).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn principal_memory_defaults_to_session_memory() {
        let c = parse("[limits]\nsession_memory = 67108864\n", Path::new("c.toml")).unwrap();
        assert_eq!(c.limits.principal_memory(), 64 << 20);
        let c = parse(
            "[limits]\nsession_memory = 67108864\nprincipal_memory = 33554432\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(c.limits.principal_memory, Some(32 << 20));
        assert_eq!(c.limits.principal_memory(), 32 << 20);
    }

    #[test]
    fn the_local_sessions_are_a_share_of_max_sessions() {
        let with = |max_sessions| LimitsConfig {
            max_sessions,
            ..LimitsConfig::default()
        };
        assert_eq!(with(64).local_sessions(), 4);
        assert_eq!(with(6).local_sessions(), 3);
        assert_eq!(with(1).local_sessions(), 0);
    }
}
