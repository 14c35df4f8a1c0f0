//! The runtime error value of the language (`error` type, docs/rules.md §13).
//!
//! Every failure the evaluator raises is a `ShoalError`; caught errors become
//! `Value::Error`. Codes are a closed enum so a typo cannot invent a code.

use std::fmt;
use std::sync::Arc;

/// Byte offsets `[start, end)` into the source text.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// Declares the codes once: the enum, its spelling, and the list of all.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, for parsing a stored or wire code back.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $text,)*
                }
            }
        }
    };
}

error_codes! {
    ParseError => "parse_error",
    TypeError => "type_error",
    ArgError => "arg_error",
    UndefinedVar => "undefined_var",
    FieldMissing => "field_missing",
    IndexRange => "index_range",
    DivZero => "div_zero",
    Overflow => "overflow",
    Utf8Error => "utf8_error",
    NotFound => "not_found",
    CmdFailed => "cmd_failed",
    Custom => "custom",
    NoMatches => "no_matches",
    FeedError => "feed_error",
    AssertFailed => "assert_failed",
    RecursionLimit => "recursion_limit",
    StreamConsumed => "stream_consumed",
    StreamUnbounded => "stream_unbounded",
    ChannelClosed => "channel_closed",
    Timeout => "timeout",
    IoError => "io_error",
    Permission => "permission",
    NetError => "net_error",
    RunnerNotFound => "runner_not_found",
    ReefUnlocked => "reef_unlocked",
    ReefDrift => "reef_drift",
    ReefConflict => "reef_conflict",
    ReefNotFound => "reef_not_found",
    ReefProvider => "reef_provider",
    StaleUndo => "stale_undo",
    SpawnDenied => "spawn_denied",
    /// A `[limits]` quota (session memory, spill bytes, ...) was reached.
    ResourceLimit => "resource_limit",
    /// An adapter could not parse its tool's output (names the adapter and the line).
    AdapterParse => "adapter_parse",
    /// Evaluation interrupted (cancellation from another thread).
    Cancelled => "cancelled",
    /// Leash refused an effect at the site that makes it (docs/rules.md §21).
    PolicyDenied => "policy_denied",
}

impl ErrorCode {
    /// The code spelled `s` (`"div_zero"`), if there is one.
    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A raised error: code, message, optional hint, and for `cmd_failed` the exit
/// status and captured stderr.
#[derive(Clone, Debug, PartialEq)]
pub struct ShoalError {
    pub code: ErrorCode,
    pub msg: String,
    pub hint: Option<String>,
    pub status: Option<i64>,
    pub stderr: Option<Arc<[u8]>>,
    pub span: Option<Span>,
}

impl ShoalError {
    pub fn new(code: ErrorCode, msg: impl Into<String>) -> ShoalError {
        ShoalError {
            code,
            msg: msg.into(),
            hint: None,
            status: None,
            stderr: None,
            span: None,
        }
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> ShoalError {
        self.hint = Some(hint.into());
        self
    }
    pub fn with_span(mut self, span: Span) -> ShoalError {
        if self.span.is_none() {
            self.span = Some(span);
        }
        self
    }
    pub fn type_error(msg: impl Into<String>) -> ShoalError {
        ShoalError::new(ErrorCode::TypeError, msg)
    }
    pub fn arg_error(msg: impl Into<String>) -> ShoalError {
        ShoalError::new(ErrorCode::ArgError, msg)
    }
    pub fn field_missing(msg: impl Into<String>) -> ShoalError {
        ShoalError::new(ErrorCode::FieldMissing, msg)
    }
    pub fn custom(msg: impl Into<String>) -> ShoalError {
        ShoalError::new(ErrorCode::Custom, msg)
    }
    pub fn not_found(msg: impl Into<String>) -> ShoalError {
        ShoalError::new(ErrorCode::NotFound, msg)
    }
    pub fn overflow(msg: impl Into<String>) -> ShoalError {
        ShoalError::new(ErrorCode::Overflow, msg)
    }
    pub fn div_zero() -> ShoalError {
        ShoalError::new(ErrorCode::DivZero, "division by zero")
    }
}

impl fmt::Display for ShoalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.msg)
    }
}

impl std::error::Error for ShoalError {}

pub type SResult<T> = Result<T, ShoalError>;

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn every_code_parses_back() {
        assert_eq!(ErrorCode::ALL.len(), 35);
        for &c in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(c.as_str()), Some(c));
        }
        assert_eq!(ErrorCode::parse("no_such_code"), None);
    }
}
