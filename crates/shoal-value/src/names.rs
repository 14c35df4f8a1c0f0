//! The names each type of value answers to, as methods or fields: the one list that method
//! dispatch, unknown-method suggestions and cross-type errors read. Data only: this module
//! imports nothing from the crate.

/// Every collection method name (for suggestions / cross-type errors).
pub const COLL: &[&str] = &[
    "len",
    "count",
    "is_empty",
    "first",
    "last",
    "take",
    "skip",
    "collect",
    "stream",
    "tee",
    "map",
    "where",
    "filter",
    "each",
    "reduce",
    "fold",
    "any",
    "all",
    "find",
    "flat_map",
    "sort",
    "sort_by",
    "reverse",
    "uniq",
    "sum",
    "min",
    "max",
    "flatten",
    "enumerate",
    "chunks",
    "zip",
    "group",
    "group_by",
    "join",
    "contains",
    "get",
];

pub const TEXT: &[&str] = &[
    "len",
    "count",
    "is_empty",
    "lines",
    "words",
    "chars",
    "trim",
    "trim_start",
    "trim_end",
    "upper",
    "lower",
    "split",
    "starts_with",
    "ends_with",
    "contains",
    "replace",
    "matches",
    "match",
    "parse_int",
    "parse_float",
    "take",
    "skip",
    "reverse",
    "stream",
];

pub const STREAM: &[&str] = &[
    "map",
    "where",
    "filter",
    "scan",
    "flat_map",
    "take",
    "take_until",
    "dedupe",
    "distinct",
    "debounce",
    "throttle",
    "window",
    "buffer",
    "enumerate",
    "merge",
    "zip",
    "each",
    "collect",
    "save",
    "append",
    "tee",
];

pub const ERROR_FIELDS: &[&str] = &["code", "msg", "hint", "stderr", "status"];

pub const DATETIME_FIELDS: &[&str] = &["year", "month", "day", "hour", "minute", "second"];

pub const NUMBER: &[&str] = &["abs", "round", "floor", "ceil"];

pub const RECORD: &[&str] = &[
    "keys", "values", "items", "len", "count", "is_empty", "get", "contains", "set", "merge",
];

pub const PATH: &[&str] = &[
    "name",
    "stem",
    "ext",
    "parent",
    "join",
    "abs",
    "read",
    "read_bytes",
    "lines",
    "exists",
    "is_dir",
    "is_file",
    "size",
    "modified",
];

pub const BYTES: &[&str] = &["len", "count", "is_empty", "stream"];

pub const DURATION: &[&str] = &["ago", "from_now"];

/// Methods every value answers to.
pub const UNIVERSAL: &[&str] = &[
    "tap",
    "also",
    "json",
    "save",
    "append",
    "str",
    "display",
    "feed",
    "pick",
    "type_name",
];
