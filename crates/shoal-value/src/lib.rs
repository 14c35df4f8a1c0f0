//! Runtime values of the Shoal language (docs/rules.md §3) and everything that is
//! pure about them: operators, rendering, methods, the JSON mapping and the data
//! namespaces. Nothing here evaluates syntax, spawns processes or knows actors;
//! callbacks into the evaluator go through the [`Host`] trait.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;

pub mod code;
pub mod coerce;
pub mod datetime;
pub use shoal_base::error;
pub use shoal_policy::glob;
pub mod json;
pub mod memory;
pub mod methods;
pub mod names;
pub mod ns;
pub mod ops;
pub mod output;
pub mod render;
pub mod shown;
pub mod suggest;
pub use shoal_base::spill_dir;

pub use code::Code;
pub use error::{ErrorCode, SResult, ShoalError};
pub use methods::feed_bytes;
pub use output::OutputBytes;

/// A record's field name: shared, so that rows built from one template (an
/// adapter's table, a JSON array of like objects) clone their keys with a
/// reference count instead of an allocation each.
pub type Key = Arc<str>;

/// Insertion-ordered record.
pub type Record = IndexMap<Key, Value>;

/// A Shoal value. Cloning is cheap (scalars are inline, aggregates are `Arc`s).
#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
    /// Byte-preserving OS path.
    Path(Arc<PathBuf>),
    Glob(Arc<GlobVal>),
    Regex(Arc<RegexVal>),
    /// Bytes.
    Size(u64),
    /// Nanoseconds.
    Duration(i64),
    DateTime(Arc<jiff::Zoned>),
    /// Seconds since midnight (0..86400).
    Time(u32),
    /// In memory or spilled to a private file (see [`output`]).
    Bytes(OutputBytes),
    List(Arc<Vec<Value>>),
    Record(Arc<Record>),
    Table(Arc<Vec<Arc<Record>>>),
    Range(RangeVal),
    Stream(Arc<StreamVal>),
    Error(Arc<ShoalError>),
    Outcome(Arc<Outcome>),
    Task(Arc<TaskRef>),
    /// A function or lambda with its captured scope (made and run by `lang`).
    Closure(Arc<dyn Code>),
    /// An alias target: a parsed command (made and run by `lang`).
    Command(Arc<dyn Code>),
    /// A named secret (redacted).
    Secret(Arc<SecretVal>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeVal {
    pub start: i64,
    pub end: i64,
    pub inclusive: bool,
}

impl RangeVal {
    /// How many ints the range holds.
    pub fn count(&self) -> usize {
        let (s, e) = (self.start as i128, self.end as i128);
        let n = if self.inclusive { e - s + 1 } else { e - s };
        usize::try_from(n.max(0)).unwrap_or(usize::MAX)
    }
}

#[derive(Debug)]
pub struct GlobVal {
    pub pattern: String,
    /// The cwd when the glob was made; relative patterns expand against it.
    pub cwd: PathBuf,
    pub hidden: bool,
}

#[derive(Debug)]
pub struct RegexVal {
    pub source: String,
    pub re: regex::Regex,
}

#[derive(Debug)]
pub struct SecretVal {
    pub name: String,
    pub secret: String,
}

/// The result of running a command (docs/rules.md §8).
#[derive(Debug)]
pub struct Outcome {
    /// Exit status; `None` when killed by a signal.
    pub status: Option<i64>,
    pub ok: bool,
    /// Signal name (`SIGSEGV`) when killed by a signal.
    pub signal: Option<String>,
    /// Wall time in nanoseconds.
    pub dur_ns: i64,
    /// 0 for builtins.
    pub pid: u32,
    /// Display form of the command (`git status --short`).
    pub cmd: String,
    /// Captured stdout; large streams are spilled to a file (see [`output`]).
    pub stdout: OutputBytes,
    pub stderr: OutputBytes,
    /// The structured result of a builtin; `None` for externals (their `.out` is
    /// derived from `stdout`).
    pub out: Option<Value>,
    /// Byte span of the invocation in the source that ran it, when known.
    pub span: Option<code::Span>,
    /// Captured output was cut at `[limits] spill_bytes` (the stream was
    /// closed for the child).
    pub truncated: bool,
    /// Set when an adapter typed `out`: the render says so and names the
    /// raw form.
    pub typed: Option<Arc<Typed>>,
}

/// How an adapter typed an outcome's `out` (docs/rules.md §8).
#[derive(Debug)]
pub struct Typed {
    /// The adapter (`git`).
    pub adapter: String,
    /// The command that bypasses it, as the agent wrote it (`^git log -5`).
    pub raw: String,
    /// A line shown above the value (`git status`: the branch).
    pub summary: Option<String>,
    /// The outcome renders as the tool's own text (`git diff`: the patch).
    pub render_text: bool,
}

/// A background task handle.
#[derive(Debug)]
pub struct TaskRef {
    pub id: u64,
}

/// A single-consumer lazy sequence (docs/rules.md §10).
pub struct StreamVal {
    /// Render label: `value`, `datetime`, `event`.
    pub label: String,
    /// `false` for `every`, `watch`, `tail`, channel events (until `take(n)`).
    pub bounded: bool,
    /// `None` once consumed.
    pub source: Mutex<Option<Box<dyn Iterator<Item = SResult<Value>> + Send>>>,
    /// Callback stages (`map`, `where`, ...) recorded on an unbounded stream, applied as its
    /// consumer pulls items: they need the host, which only the consumer has.
    pending: Mutex<methods::PendingStages>,
}

impl StreamVal {
    /// A stream over `source`, no stage pending.
    pub fn new(
        label: impl Into<String>,
        bounded: bool,
        source: Box<dyn Iterator<Item = SResult<Value>> + Send>,
    ) -> StreamVal {
        StreamVal {
            label: label.into(),
            bounded,
            source: Mutex::new(Some(source)),
            pending: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for StreamVal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamVal")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl Value {
    pub fn str(s: impl AsRef<str>) -> Value {
        Value::Str(Arc::from(s.as_ref()))
    }
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }
    pub fn record(r: Record) -> Value {
        Value::Record(Arc::new(r))
    }
    pub fn path(p: impl Into<PathBuf>) -> Value {
        Value::Path(Arc::new(p.into()))
    }
    pub fn bytes(b: impl Into<Vec<u8>>) -> Value {
        Value::Bytes(OutputBytes::from(b.into()))
    }
    pub fn os_path(p: OsString) -> Value {
        Value::Path(Arc::new(PathBuf::from(p)))
    }

    /// The type name used by `type_name`, match type patterns and error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Path(_) => "path",
            Value::Glob(_) => "glob",
            Value::Regex(_) => "regex",
            Value::Size(_) => "size",
            Value::Duration(_) => "duration",
            Value::DateTime(_) => "datetime",
            Value::Time(_) => "time",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Record(_) => "record",
            Value::Table(_) => "table",
            Value::Range(_) => "range",
            Value::Stream(_) => "stream",
            Value::Error(_) => "error",
            Value::Outcome(_) => "outcome",
            Value::Task(_) => "task",
            Value::Closure(_) => "closure",
            Value::Command(_) => "command",
            Value::Secret(_) => "secret",
        }
    }
}

/// Named and positional arguments of a method or namespace call, already evaluated.
#[derive(Clone, Debug, Default)]
pub struct Args {
    pub pos: Vec<Value>,
    pub named: Vec<(String, Value)>,
}

/// What value methods need from the evaluator that hosts them.
pub trait Host {
    /// Call a callable value (closure) with positional arguments.
    fn call(&mut self, f: &Value, args: Vec<Value>) -> SResult<Value>;
    /// Call with one argument (the hot path of `map`, `where`, `sort_by`...);
    /// hosts may override it to skip building an argument vector.
    fn call1(&mut self, f: &Value, arg: Value) -> SResult<Value> {
        self.call(f, vec![arg])
    }
    /// The session's current directory (relative paths resolve against it).
    fn cwd(&self) -> &Path;
    /// The session environment (for `os.env()`).
    fn env_vars(&self) -> Vec<(String, String)>;
    /// Host-injected configuration (`config.*`); empty when none.
    fn config(&self) -> Record;
    /// `Err(cancelled)` if the evaluation was interrupted; long loops call this.
    fn check_interrupt(&self) -> SResult<()>;
}
/// Whether `v` may own other values (the kinds a deep value nests through).
pub fn nests(v: &Value) -> bool {
    matches!(
        v,
        Value::List(_) | Value::Record(_) | Value::Table(_) | Value::Outcome(_)
    )
}

/// Move the nesting children `v` owns alone onto `out`, leaving `v` shallow.
/// Leaves and shared children stay where they are (they drop in one step).
fn take_children(v: &mut Value, out: &mut Vec<Value>) {
    let mut take = |x: &mut Value| {
        if nests(x) {
            out.push(std::mem::replace(x, Value::Null));
        }
    };
    match v {
        Value::List(l) => {
            if let Some(items) = Arc::get_mut(l) {
                items.iter_mut().for_each(&mut take);
            }
        }
        Value::Record(r) => {
            if let Some(r) = Arc::get_mut(r) {
                r.values_mut().for_each(&mut take);
            }
        }
        Value::Table(t) => {
            if let Some(rows) = Arc::get_mut(t) {
                for row in rows.iter_mut() {
                    if let Some(row) = Arc::get_mut(row) {
                        row.values_mut().for_each(&mut take);
                    }
                }
            }
        }
        Value::Outcome(o) => {
            if let Some(o) = Arc::get_mut(o) {
                if let Some(x) = o.out.as_mut() {
                    take(x);
                }
            }
        }
        _ => {}
    }
}

/// Dropping never recurses through nesting: a 100k-deep list is taken apart
/// with an explicit stack (docs/protocol.md §10), so no thread's stack can overflow.
impl Drop for Value {
    fn drop(&mut self) {
        if !nests(self) {
            return;
        }
        let mut stack = Vec::new();
        take_children(self, &mut stack);
        while let Some(mut v) = stack.pop() {
            take_children(&mut v, &mut stack);
            // `v` is shallow now: its own drop does not descend.
        }
    }
}
