//! Event payloads (docs/rules.md §19). Most events carry JSON; the three every
//! exec publishes (`journal`, `session.transcript`, `render`) stay typed until
//! something reads them: serialized straight to bytes where they are stored or
//! sent (the journal, a kernel `event` frame), turned into JSON only for a
//! reader that wants a value. An exec thus builds no JSON map for its events
//! (each tagged map cost about two thousand instructions and five allocations).
//!
//! The typed forms serialize to exactly the tagged wire shapes
//! (docs/rules.md §15) that [`Payload::to_json`] gives, key order included.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value as Json;

/// One event's payload.
#[derive(Debug, Clone)]
pub enum Payload {
    Json(Json),
    /// `journal`: a journaled exec, `{entry_id, head, ok, principal}`.
    Entry {
        entry_id: u64,
        head: String,
        ok: bool,
        principal: String,
    },
    /// `session.transcript`: `out:n` was stored, `{n, ref, summary}`.
    Transcript {
        n: u64,
        summary: Summary,
    },
    /// `render`: the bounded render of `out:n`, `{ref, render}`.
    Render {
        n: u64,
        render: String,
    },
    /// [`EXEC_CHANNEL`]: one exec as a live view shows it (published only
    /// while someone subscribes to the channel).
    Exec(Box<ExecView>),
}

/// The channel of [`Payload::Exec`]: what every client of a session runs,
/// for `shoal attach` and `shoal watch` (not durable).
pub const EXEC_CHANNEL: &str = "session.exec";
/// Lines of render an [`ExecView`] carries at most.
pub const VIEW_LINES: usize = 10;
/// Bytes of source an [`ExecView`] carries at most.
pub const VIEW_SRC: usize = 2000;

/// One exec of a session, everything a live view prints: who ran what, the
/// head of its render, and how it ended. Built from what the exec already has
/// (no extra call for a viewer to make).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecView {
    pub session: String,
    pub n: u64,
    pub src: String,
    pub principal: String,
    /// The client that ran it (`mcp: claude-code`, `cli`, `attach`, `task`).
    pub client: Option<std::sync::Arc<str>>,
    /// Its connection's id (0: none), so a viewer skips its own execs.
    pub conn: u64,
    pub ok: bool,
    /// An outcome's or a raised error's exit status.
    pub status: Option<i64>,
    /// A raised error's code (`div_zero`, `cmd_failed`, ...).
    pub code: Option<String>,
    /// At most [`VIEW_LINES`] lines of the render (a raised error: its message).
    pub head: String,
    /// Lines of the render not in `head`.
    pub more: u64,
}

impl ExecView {
    /// The first [`VIEW_LINES`] lines of `render` and how many more it has.
    pub fn head_of(render: &str) -> (String, u64) {
        let text = render.trim_end_matches('\n');
        // One copy: the head is a prefix of the render.
        match text.match_indices('\n').nth(VIEW_LINES - 1) {
            None => (text.to_string(), 0),
            Some((cut, _)) => {
                let more = text[cut..].bytes().filter(|b| *b == b'\n').count() as u64;
                (text[..cut].to_string(), more)
            }
        }
    }

    /// `src` cut to at most [`VIEW_SRC`] bytes (on a char boundary, `…` marks a cut).
    pub fn src_of(src: &str) -> String {
        if src.len() <= VIEW_SRC {
            return src.to_string();
        }
        let mut end = VIEW_SRC;
        while !src.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &src[..end])
    }
}

/// What `session.transcript` says of a value: `{type, ok, cmd}` for an
/// outcome, `{type, n}` for a list or table, `{type}` otherwise (an outcome's
/// fields win when both are set).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub type_name: &'static str,
    /// An outcome's `ok` and `cmd`.
    pub outcome: Option<(bool, String)>,
    /// A list's or table's length.
    pub len: Option<usize>,
}

impl From<Json> for Payload {
    fn from(j: Json) -> Self {
        Payload::Json(j)
    }
}

impl Payload {
    /// About the bytes the payload holds: its JSON's length for a JSON
    /// payload (a client's, bounded where it is published), its strings and a
    /// fixed part for the typed ones (nothing is encoded to count them).
    pub fn approx_bytes(&self) -> usize {
        const FIXED: usize = 64;
        match self {
            Payload::Json(j) => {
                let mut n = shoal_base::count::ByteCount::default();
                let _ = serde_json::to_writer(&mut n, j);
                n.0
            }
            Payload::Entry {
                head, principal, ..
            } => FIXED + head.len() + principal.len(),
            Payload::Transcript { summary, .. } => {
                FIXED + summary.outcome.as_ref().map_or(0, |(_, cmd)| cmd.len())
            }
            Payload::Render { render, .. } => FIXED + render.len(),
            Payload::Exec(v) => {
                FIXED
                    + v.session.len()
                    + v.src.len()
                    + v.principal.len()
                    + v.head.len()
                    + v.code.as_ref().map_or(0, String::len)
                    + v.client.as_ref().map_or(0, |c| c.len())
            }
        }
    }

    /// The payload as a JSON value (borrowed when it is one already).
    pub fn to_json(&self) -> Cow<'_, Json> {
        match self {
            Payload::Json(j) => Cow::Borrowed(j),
            typed => Cow::Owned(serde_json::to_value(typed).unwrap_or(Json::Null)),
        }
    }
}

/// Equal when their JSON forms are (a typed payload equals its JSON).
impl PartialEq for Payload {
    fn eq(&self, o: &Self) -> bool {
        self.to_json() == o.to_json()
    }
}

/// `{"$": tag, "v": value}`.
struct Tagged<'a, T: ?Sized>(&'static str, &'a T);

impl<T: Serialize + ?Sized> Serialize for Tagged<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("$", self.0)?;
        m.serialize_entry("v", self.1)?;
        m.end()
    }
}

/// One field of a typed payload, in its tagged encoding.
enum Field<'a> {
    Str(&'a str),
    Int(u64),
    Bool(bool),
    Summary(&'a Summary),
    Null,
    SInt(i64),
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Str(x) => Tagged("str", *x).serialize(s),
            Field::Int(x) => Tagged("int", x).serialize(s),
            Field::Bool(x) => Tagged("bool", x).serialize(s),
            Field::Summary(x) => x.serialize(s),
            Field::Null => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("$", "null")?;
                m.end()
            }
            Field::SInt(x) => Tagged("int", x).serialize(s),
        }
    }
}

/// A tagged record of `fields`, in order: `{"$": "record", "v": {…}}`.
struct Record<'a>(&'a [(&'static str, Field<'a>)]);

impl Serialize for Record<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Tagged("record", &Fields(self.0)).serialize(s)
    }
}

struct Fields<'a>(&'a [(&'static str, Field<'a>)]);

impl Serialize for Fields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for Summary {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let ty = ("type", Field::Str(self.type_name));
        match (&self.outcome, self.len) {
            (Some((ok, cmd)), _) => {
                Record(&[ty, ("ok", Field::Bool(*ok)), ("cmd", Field::Str(cmd))]).serialize(s)
            }
            (None, Some(n)) => Record(&[ty, ("n", Field::Int(n as u64))]).serialize(s),
            (None, None) => Record(&[ty]).serialize(s),
        }
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::Json(j) => j.serialize(s),
            Payload::Entry {
                entry_id,
                head,
                ok,
                principal,
            } => Record(&[
                ("entry_id", Field::Int(*entry_id)),
                ("head", Field::Str(head)),
                ("ok", Field::Bool(*ok)),
                ("principal", Field::Str(principal)),
            ])
            .serialize(s),
            Payload::Transcript { n, summary } => {
                let r = crate::ref_name(*n);
                Record(&[
                    ("n", Field::Int(*n)),
                    ("ref", Field::Str(&r)),
                    ("summary", Field::Summary(summary)),
                ])
                .serialize(s)
            }
            Payload::Render { n, render } => {
                let r = crate::ref_name(*n);
                Record(&[("ref", Field::Str(&r)), ("render", Field::Str(render))]).serialize(s)
            }
            Payload::Exec(v) => {
                let r = crate::ref_name(v.n);
                Record(&[
                    ("session", Field::Str(&v.session)),
                    ("ref", Field::Str(&r)),
                    ("src", Field::Str(&v.src)),
                    ("principal", Field::Str(&v.principal)),
                    ("client", Field::Str(v.client.as_deref().unwrap_or(""))),
                    ("conn", Field::Int(v.conn)),
                    ("ok", Field::Bool(v.ok)),
                    ("status", v.status.map_or(Field::Null, Field::SInt)),
                    ("code", v.code.as_deref().map_or(Field::Null, Field::Str)),
                    ("head", Field::Str(&v.head)),
                    ("more", Field::Int(v.more)),
                ])
                .serialize(s)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tagged(t: &str, v: Json) -> Json {
        json!({"$": t, "v": v})
    }

    /// The typed payloads encode to the shapes the exec events always had,
    /// key order included (as bytes and as values).
    #[test]
    fn typed_payloads_match_their_tagged_json() {
        let cases = [
            (
                Payload::Entry {
                    entry_id: 7,
                    head: "ls".into(),
                    ok: true,
                    principal: "local".into(),
                },
                json!({"$": "record", "v": {
                    "entry_id": tagged("int", json!(7)),
                    "head": tagged("str", json!("ls")),
                    "ok": tagged("bool", json!(true)),
                    "principal": tagged("str", json!("local")),
                }}),
            ),
            (
                Payload::Transcript {
                    n: 3,
                    summary: Summary {
                        type_name: "outcome",
                        outcome: Some((false, "git \"x\"".into())),
                        len: None,
                    },
                },
                json!({"$": "record", "v": {
                    "n": tagged("int", json!(3)),
                    "ref": tagged("str", json!("out:3")),
                    "summary": {"$": "record", "v": {
                        "type": tagged("str", json!("outcome")),
                        "ok": tagged("bool", json!(false)),
                        "cmd": tagged("str", json!("git \"x\"")),
                    }},
                }}),
            ),
            (
                Payload::Transcript {
                    n: 4,
                    summary: Summary {
                        type_name: "list",
                        outcome: None,
                        len: Some(2),
                    },
                },
                json!({"$": "record", "v": {
                    "n": tagged("int", json!(4)),
                    "ref": tagged("str", json!("out:4")),
                    "summary": {"$": "record", "v": {
                        "type": tagged("str", json!("list")),
                        "n": tagged("int", json!(2)),
                    }},
                }}),
            ),
            (
                Payload::Render {
                    n: 5,
                    render: "42\n\u{1b}[1m".into(),
                },
                json!({"$": "record", "v": {
                    "ref": tagged("str", json!("out:5")),
                    "render": tagged("str", json!("42\n\u{1b}[1m")),
                }}),
            ),
        ];
        for (typed, want) in cases {
            assert_eq!(*typed.to_json(), want);
            assert_eq!(
                serde_json::to_vec(&typed).unwrap(),
                serde_json::to_vec(&want).unwrap()
            );
            assert_eq!(typed, Payload::Json(want));
        }
    }

    #[test]
    fn exec_views_keep_a_bounded_head() {
        let render: String = (1..=15).map(|i| format!("{i}\n")).collect();
        let (head, more) = ExecView::head_of(&render);
        assert_eq!(head.lines().count(), VIEW_LINES);
        assert_eq!(more, 5);
        assert_eq!(ExecView::head_of("42"), ("42".to_string(), 0));
        let long = "é".repeat(VIEW_SRC);
        let cut = ExecView::src_of(&long);
        assert!(cut.len() <= VIEW_SRC + '…'.len_utf8() && cut.ends_with('…'));
        let v = Payload::Exec(Box::new(ExecView {
            session: "s".into(),
            n: 3,
            src: "6 * 7".into(),
            principal: "local".into(),
            client: Some("mcp: x".into()),
            conn: 9,
            ok: true,
            status: None,
            code: None,
            head: "42".into(),
            more: 0,
        }));
        let j = v.to_json();
        assert_eq!(j["v"]["ref"], tagged("str", json!("out:3")));
        assert_eq!(j["v"]["status"], json!({"$": "null"}));
        assert_eq!(j["v"]["conn"], tagged("int", json!(9)));
    }

    #[test]
    fn json_payloads_pass_through() {
        let p = Payload::from(json!({"a": [1, "x"]}));
        assert!(matches!(p.to_json(), Cow::Borrowed(_)));
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"a":[1,"x"]}"#);
    }
}
