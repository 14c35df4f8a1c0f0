//! MCP resources: `resources/list` pages (fixed roots, then transcript refs
//! newest first), `resources/templates/list`, `resources/read` results,
//! which URIs are subscribable and to which channel, and the hard-capped
//! journal, events and blob answers. Pure: it builds answers from what the
//! caller read; it never reads a value, the journal or the bus itself.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use super::super::bound::{bound_text, MAX_TEXT};
use super::super::kernel::BlobRead;
use super::super::rpc::RpcError;
use super::super::uri;
use super::{Caps, CARD_URI};

/// Transcript refs per `resources/list` page.
pub const RESOURCES_PAGE: u64 = 100;

/// A `resources/list` page (docs/protocol.md §9): `cursor` is `None` for the first
/// page, which starts with the fixed roots; refs go newest first, from
/// `last_ref` down, [`RESOURCES_PAGE`] at a time, and `nextCursor` names the
/// next ref below the page, so refs created meanwhile never shift a page.
pub fn resources_page(
    caps: Caps,
    last_ref: u64,
    cursor: Option<&str>,
) -> Result<ResourcesPage, RpcError> {
    let (fixed, top) = match cursor {
        None => (true, last_ref),
        Some(c) => {
            let n = c
                .strip_prefix("out<=")
                .and_then(|n| n.parse::<u64>().ok())
                .filter(|n| *n <= last_ref)
                .ok_or_else(|| {
                    RpcError::invalid_params(format!("invalid cursor {c:?}"))
                        .with_data(json!({"cursor": c}))
                })?;
            (false, n)
        }
    };
    let bottom = top.saturating_sub(RESOURCES_PAGE - 1).max(1);
    let refs: Vec<u64> = if top == 0 {
        Vec::new()
    } else {
        (bottom..=top).rev().collect()
    };
    Ok(ResourcesPage {
        resources: resources(caps, fixed, &refs),
        next_cursor: (bottom > 1 && top > 0).then(|| format!("out<={}", bottom - 1)),
    })
}

/// `resources/list` params.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ResourcesListParams {
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `resources/read`, `resources/subscribe`, `resources/unsubscribe` params.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ResourceUriParams {
    pub uri: String,
}

/// A `resources/list` page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesPage {
    pub resources: Vec<Resource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A `resources/list` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    pub uri: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'static str>,
    pub description: String,
    pub mime_type: &'static str,
}

impl Resource {
    /// A JSON resource without a title.
    pub fn json(
        uri: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Resource {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: description.into(),
            mime_type: "application/json",
        }
    }
}

/// `resources/list` entries: the fixed roots (when `fixed`) plus `out_refs`.
fn resources(caps: Caps, fixed: bool, out_refs: &[u64]) -> Vec<Resource> {
    let mut v = Vec::new();
    if fixed {
        v.push(Resource {
            uri: CARD_URI.into(),
            name: "language".into(),
            title: Some("The Shoal language card"),
            description: "How to use Shoal as an agent (also the prompt shoal_language)".into(),
            mime_type: "text/markdown",
        });
    }
    if fixed && caps.journal {
        v.push(Resource::json(
            "shoal://journal",
            "journal",
            "The execution journal, newest first (subscribable)",
        ));
    }
    if fixed {
        v.push(Resource::json(
            "shoal://session/cwd",
            "cwd",
            "The session's working directory",
        ));
        v.push(Resource::json(
            "shoal://session/env",
            "env",
            "The session's environment variables",
        ));
    }
    for n in out_refs {
        v.push(Resource::json(
            super::super::kernel::ref_uri(*n),
            super::super::kernel::ref_name(*n),
            "A transcript value",
        ));
    }
    v
}
/// `resources/templates/list`.
pub fn resource_templates(caps: Caps) -> Json {
    super::result_json(ResourceTemplates {
        resource_templates: templates(caps),
    })
}

/// The `resources/templates/list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplates {
    pub resource_templates: Vec<ResourceTemplate>,
}

/// A `resources/templates/list` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    pub uri_template: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub mime_type: &'static str,
}

impl ResourceTemplate {
    /// A template of JSON resources.
    pub fn json(uri_template: &'static str, name: &'static str, description: &'static str) -> Self {
        ResourceTemplate {
            uri_template,
            name,
            description,
            mime_type: "application/json",
        }
    }
}

fn templates(caps: Caps) -> Vec<ResourceTemplate> {
    let t = ResourceTemplate::json;
    let mut v = vec![
        t(
            "shoal://out/{n}{?path,slice,format}",
            "transcript-value",
            "A transcript value; slice=A..B",
        ),
        t(
            "shoal://session/{view}",
            "session-view",
            "Session views: cwd, env",
        ),
        {
            let (uri, name, description) = super::super::mcp_pty::TEMPLATE;
            t(uri, name, description)
        },
        t(
            "shoal://task/{n}",
            "task",
            "A background task's record (state, src, elapsed_ms, result_ref); subscribable",
        ),
        t(
            "shoal://task/{n}/out",
            "task-output",
            "A finished background task's value",
        ),
    ];
    if caps.journal {
        v.push(t(
            "shoal://val/{hash}",
            "content-value",
            "A content-addressed journal output",
        ));
        v.push(t(
            "shoal://journal{?since,until,head,principal,ok,effects,limit}",
            "journal",
            "Journal entries, newest first",
        ));
    }
    if caps.events {
        v.push(t(
            "shoal://events/{channel}{?since,limit}",
            "events",
            "Events of a channel (subscribable)",
        ));
    }
    v
}

/// A `resources/read` result: `render`/`raw`/`inline`
/// strings as `text/plain`, else pretty JSON of `payload`, bounded.
pub fn read_result(uri: &str, result: &Json) -> Json {
    super::result_json(read_contents(uri, result))
}

/// [`read_result`], typed.
pub fn read_contents<'a>(uri: &'a str, result: &'a Json) -> ReadResult<'a> {
    for k in ["render", "raw", "inline"] {
        if let Some(s) = result.get(k).and_then(Json::as_str) {
            return ReadResult::one(
                uri,
                "text/plain",
                bound_text(s, MAX_TEXT, Some(uri)),
                Some(result),
            );
        }
    }
    let payload = result.get("value").unwrap_or(result);
    let text = bound_text(
        &serde_json::to_string_pretty(payload).unwrap_or_default(),
        MAX_TEXT,
        Some(uri),
    );
    ReadResult::one(uri, "application/json", text, Some(payload))
}

/// A `resources/read` result: one text content, and the value read as
/// `structuredContent` (not for the language card).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResult<'a> {
    pub contents: Vec<TextResource<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<&'a Json>,
}

/// A text content of a `resources/read` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TextResource<'a> {
    pub uri: &'a str,
    pub mime_type: &'static str,
    pub text: Cow<'a, str>,
}

impl<'a> ReadResult<'a> {
    pub fn one(
        uri: &'a str,
        mime_type: &'static str,
        text: impl Into<Cow<'a, str>>,
        structured: Option<&'a Json>,
    ) -> Self {
        ReadResult {
            contents: vec![TextResource {
                uri,
                mime_type,
                text: text.into(),
            }],
            structured_content: structured,
        }
    }
}

/// `shoal://session/cwd`: the session's working directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionCwd {
    pub display: String,
}

/// `shoal://session/env`: the variables the caller may read (at most
/// [`SessionEnv::MAX`]), their names sorted beside them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionEnv {
    pub granted: bool,
    pub names: Vec<String>,
    /// Name to value (a JSON object in the order given).
    pub env: serde_json::Map<String, Json>,
}

impl SessionEnv {
    pub const MAX: usize = 4096;

    /// The first [`SessionEnv::MAX`] of `pairs`, in their order.
    pub fn of(pairs: Vec<(String, String)>) -> Self {
        let env: serde_json::Map<String, Json> = pairs
            .into_iter()
            .take(Self::MAX)
            .map(|(k, v)| (k, Json::String(v)))
            .collect();
        let mut names: Vec<String> = env.keys().cloned().collect();
        names.sort();
        SessionEnv {
            granted: true,
            names,
            env,
        }
    }
}

/// The channel a subscribable URI watches (docs/protocol.md §2): `shoal://events/{ch}`
/// → `ch`, `shoal://journal` → `journal`.
pub fn subscription_channel(u: &str) -> Result<String, String> {
    let p = uri::parse(u)?;
    match (p.root.as_str(), p.segs.first()) {
        ("events", Some(ch)) => Ok(ch.clone()),
        ("journal", None) => Ok("journal".into()),
        ("jobs", None) => Ok("jobs".into()),
        ("task", Some(n)) if n.parse::<u64>().is_ok_and(|n| n > 0) && p.segs.len() <= 2 => {
            Ok(format!("task.{n}"))
        }
        _ => Err(format!(
            "only shoal://events/{{channel}}, shoal://journal, shoal://jobs and shoal://task/{{n}} are subscribable (got {u})"
        )),
    }
}

/// Keep the leading items of `items` whose encodings fit in the hard cap;
/// `(kept, dropped)`.
fn cap_items(items: Vec<Json>) -> (Vec<Json>, usize) {
    let mut used = 64;
    let total = items.len();
    let mut kept = Vec::new();
    for it in items {
        used += serde_json::to_vec(&it).map(|b| b.len()).unwrap_or(0) + 1;
        if used > super::super::elide::HARD_CAP {
            break;
        }
        kept.push(it);
    }
    let dropped = total - kept.len();
    (kept, dropped)
}

/// `shoal_journal` / `shoal://journal`: `{entries}`, bounded to the hard cap
/// (`truncated`, `more` when entries were left off: narrow with `limit`/`until`).
pub fn journal_result(entries: Vec<Json>) -> super::JournalResult {
    let (kept, dropped) = cap_items(entries);
    super::JournalResult {
        entries: kept
            .into_iter()
            .filter_map(|e| match e {
                Json::Object(m) => Some(m),
                _ => None,
            })
            .collect(),
        truncated: (dropped > 0).then_some(true),
        more: (dropped > 0).then_some(dropped as u64),
    }
}

/// `shoal://events/{ch}`: `{channel, events}`, bounded like the journal.
pub fn events_result(channel: &str, events: Vec<Json>) -> EventsResult {
    let (kept, dropped) = cap_items(events);
    EventsResult {
        channel: channel.to_string(),
        events: kept,
        truncated: (dropped > 0).then_some(true),
        more: (dropped > 0).then_some(dropped as u64),
    }
}

/// `shoal://events/{ch}`: the channel's events, oldest first.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EventsResult {
    pub channel: String,
    pub events: Vec<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<u64>,
}

/// A `blob.get` result bounded to the default byte budget: a stored value
/// over it becomes an elided `{"$":"ref"}` with a text head.
pub fn bounded_blob(blob: BlobRead, uri: &str) -> BlobRead {
    bounded_blob_max(blob, uri, super::super::elide::Budget::default().max_bytes)
}

/// [`bounded_blob`] with an explicit budget (`blob.get`'s `max_bytes`).
pub fn bounded_blob_max(blob: BlobRead, uri: &str, max_bytes: usize) -> BlobRead {
    let len = serde_json::to_vec(&blob).map(|b| b.len()).unwrap_or(0);
    if len <= max_bytes {
        return blob;
    }
    let v = &blob.value;
    let of = v.get("$").and_then(Json::as_str).unwrap_or("json");
    let head = serde_json::to_string_pretty(v).unwrap_or_default();
    let head: Vec<&str> = head.lines().take(10).collect();
    BlobRead {
        value: json!({
            "$": "ref", "uri": uri, "of": of, "n": len, "preview": {"$": "null"},
            "render_head": bound_text(&head.join("\n"), 2048, Some(uri)),
        }),
        hash: blob.hash,
    }
}

/// Parse `A..B` (`slice=` of an out URI).
pub fn parse_slice(s: &str) -> Option<(usize, usize)> {
    let (a, b) = s.split_once("..")?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_keep_their_wire_shape() {
        let t = resource_templates(Caps::default());
        assert_eq!(
            serde_json::to_string(&t["resourceTemplates"][0]).unwrap(),
            r#"{"uriTemplate":"shoal://out/{n}{?path,slice,format}","name":"transcript-value","description":"A transcript value; slice=A..B","mimeType":"application/json"}"#
        );
        assert_eq!(t["resourceTemplates"][2]["name"], "pty-screen");
        let all = resource_templates(Caps {
            journal: true,
            events: true,
        });
        assert_eq!(all["resourceTemplates"].as_array().unwrap().len(), 8);
        let page = super::super::result_json(resources_page(Caps::default(), 150, None).unwrap());
        assert_eq!(
            serde_json::to_string(&page["resources"][0]).unwrap(),
            r#"{"uri":"shoal://docs/language","name":"language","title":"The Shoal language card","description":"How to use Shoal as an agent (also the prompt shoal_language)","mimeType":"text/markdown"}"#
        );
        assert_eq!(page["nextCursor"], "out<=50");
        let last = super::super::result_json(
            resources_page(Caps::default(), 150, Some("out<=50")).unwrap(),
        );
        assert!(last.get("nextCursor").is_none(), "{last}");
        let env = SessionEnv::of(vec![("B".into(), "1".into()), ("A".into(), "2".into())]);
        assert_eq!(
            serde_json::to_string(&env).unwrap(),
            r#"{"granted":true,"names":["A","B"],"env":{"B":"1","A":"2"}}"#
        );
        let e = resources_page(Caps::default(), 150, Some("nope")).unwrap_err();
        assert_eq!(e.code, crate::rpc::INVALID_PARAMS);
    }
}
