//! Folding typed results into MCP `CallToolResult`s: bounded text for a model
//! to read (renders, warnings, error messages with hints, argument errors,
//! stderr), a resource link to the stored value, the structured content as
//! given. A result says what the fold needs of it through [`ToolOutput`];
//! its structured content is encoded once, straight from the typed value.
//! Pure: it never validates arguments and never reads a value.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value as Json;

use super::super::bound::{bound_text, MAX_TEXT};
use super::super::kernel::{CancelResult, GetResult, TaskRead, TaskResult, ValueRead};
use super::super::mcp_tasks::RelatedMeta;
use super::super::rpc::{self, RpcError};
use super::super::uri;
use super::outputs::{
    Applied, CapDecided, CapRequestResult, ExecAnswer, ExecResult, TaskStarted, WarningOut,
};

/// One item of a result's `content`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
    },
    /// The stored value the result addresses.
    ResourceLink {
        uri: String,
        name: String,
        #[serde(rename = "mimeType")]
        mime_type: &'static str,
    },
}

/// Who the server is (the handshake's `serverInfo`, the 2026-07-28 stamp).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerInfo {
    pub name: &'static str,
    pub title: &'static str,
    pub version: &'static str,
}

impl ServerInfo {
    pub const SHOAL: ServerInfo = ServerInfo {
        name: "shoal",
        title: "Shoal",
        version: env!("CARGO_PKG_VERSION"),
    };
}

/// A tool result's `_meta`: the task it belongs to (`tasks/result`), the
/// server (the 2026-07-28 stamp).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResultMeta {
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub related: Option<RelatedMeta>,
    #[serde(
        rename = "io.modelcontextprotocol/serverInfo",
        skip_serializing_if = "Option::is_none"
    )]
    pub server: Option<ServerInfo>,
}

/// A `CallToolResult`: the text and link a model reads, the structured
/// content, whether it failed; `resultType` and `_meta` when stamped.
#[derive(Clone, Debug, Serialize)]
pub struct CallToolResult<S> {
    pub content: Vec<Content>,
    #[serde(rename = "structuredContent")]
    pub structured_content: S,
    #[serde(rename = "isError")]
    pub is_error: bool,
    #[serde(rename = "resultType", skip_serializing_if = "Option::is_none")]
    pub result_type: Option<&'static str>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// A tool result as the daemon carries it to the reply frame: its
/// structured content already encoded.
pub type ToolResult = CallToolResult<Box<RawValue>>;

impl<S> CallToolResult<S> {
    /// Tie the result to task `related` (`tasks/result`).
    pub fn related(mut self, related: RelatedMeta) -> Self {
        self.meta.get_or_insert_with(Default::default).related = Some(related);
        self
    }

    /// The 2026-07-28 stamp: `resultType` (unless set) and the server.
    pub fn stamp(&mut self) {
        self.result_type.get_or_insert("complete");
        let meta = self.meta.get_or_insert_with(Default::default);
        meta.server.get_or_insert(ServerInfo::SHOAL);
    }
}

impl<S: Serialize> CallToolResult<S> {
    /// The structured content encoded: what travels to the frame.
    pub fn encoded(self) -> Result<ToolResult, RpcError> {
        let structured_content = serde_json::value::to_raw_value(&self.structured_content)
            .map_err(|e| RpcError::internal(e.to_string()))?;
        Ok(CallToolResult {
            content: self.content,
            structured_content,
            is_error: self.is_error,
            result_type: self.result_type,
            meta: self.meta,
        })
    }
}

/// What an MCP request answers: a tool result, or a result its handler
/// builds as JSON (lists, reads, a task handle, an `input_required` round).
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum McpResult {
    Tool(Box<ToolResult>),
    Json(Json),
}

impl From<ToolResult> for McpResult {
    fn from(r: ToolResult) -> Self {
        McpResult::Tool(Box::new(r))
    }
}

impl From<Json> for McpResult {
    fn from(v: Json) -> Self {
        McpResult::Json(v)
    }
}

/// The stored value a result addresses: its URI and the name a client shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link<'a> {
    pub uri: Cow<'a, str>,
    pub name: Cow<'a, str>,
}

/// What the fold reads of a typed result; the rest is its structured content.
pub trait ToolOutput: Serialize {
    /// The text a model reads (a render); `None`: the result's own JSON, pretty.
    fn text(&self) -> Option<Cow<'_, str>> {
        None
    }
    /// The stored value it addresses.
    fn link(&self) -> Option<Link<'_>> {
        None
    }
    /// Likely bash habits in its source, one text line each.
    fn warnings(&self) -> &[WarningOut] {
        &[]
    }
}

/// The fold: bounded text (with the warnings), the link, the structured content.
pub fn tool_result<S: ToolOutput>(structured: S, is_error: bool) -> CallToolResult<S> {
    let link = structured.link();
    let uri = link.as_ref().map(|l| l.uri.as_ref());
    let mut text = match structured.text() {
        Some(t) => bound_text(&t, MAX_TEXT, uri),
        None => bound_text(
            &serde_json::to_string_pretty(&structured).unwrap_or_default(),
            MAX_TEXT,
            uri,
        ),
    };
    for w in structured.warnings() {
        text.push_str(&format!(
            "\nwarning[{}]: {} (hint: {})",
            w.code, w.message, w.hint
        ));
    }
    let mut content = Vec::with_capacity(2);
    content.push(Content::Text { text });
    if let Some(l) = link {
        content.push(Content::ResourceLink {
            uri: l.uri.into_owned(),
            name: l.name.into_owned(),
            mime_type: "application/json",
        });
    }
    CallToolResult {
        content,
        structured_content: structured,
        is_error,
        result_type: None,
        meta: None,
    }
}

/// A successful tool result, encoded (a result that does not encode is an
/// internal error result).
pub fn tool_success<S: ToolOutput>(structured: S) -> ToolResult {
    tool_result(structured, false)
        .encoded()
        .unwrap_or_else(|e| tool_error(&e))
}

/// A failed tool result carrying the error object `{code, message, data?}`;
/// linked when the error was stored (`data.uri` / `data.ref`).
pub fn tool_error(e: &RpcError) -> ToolResult {
    let r = tool_result(e, true);
    CallToolResult {
        // An error's members are strings, numbers and JSON values: it encodes.
        structured_content: serde_json::value::to_raw_value(e)
            .unwrap_or_else(|_| RawValue::NULL.to_owned()),
        content: r.content,
        is_error: true,
        result_type: None,
        meta: None,
    }
}

/// A tool's typed answer or its error, folded.
pub fn tool_answer<S: ToolOutput>(r: Result<S, RpcError>) -> ToolResult {
    match r {
        Ok(s) => tool_success(s),
        Err(e) => tool_error(&e),
    }
}

impl<T: ToolOutput + ?Sized> ToolOutput for &T {
    fn text(&self) -> Option<Cow<'_, str>> {
        (**self).text()
    }
    fn link(&self) -> Option<Link<'_>> {
        (**self).link()
    }
    fn warnings(&self) -> &[WarningOut] {
        (**self).warnings()
    }
}

impl<T: ToolOutput + ?Sized> ToolOutput for Box<T> {
    fn text(&self) -> Option<Cow<'_, str>> {
        (**self).text()
    }
    fn link(&self) -> Option<Link<'_>> {
        (**self).link()
    }
    fn warnings(&self) -> &[WarningOut] {
        (**self).warnings()
    }
}

/// A stored value's link, named by its ref.
fn stored<'a>(uri: &'a str, reference: &'a str) -> Option<Link<'a>> {
    Some(Link {
        uri: Cow::Borrowed(uri),
        name: Cow::Borrowed(reference),
    })
}

/// What a model reads for an exec whose render is empty (a command that
/// succeeded and printed nothing): an empty text reads as no answer at all.
pub const NO_OUTPUT: &str = "(no output)";

impl<V: Serialize> ToolOutput for ExecResult<V> {
    fn text(&self) -> Option<Cow<'_, str>> {
        if self.render.is_empty() {
            return Some(Cow::Borrowed(NO_OUTPUT));
        }
        Some(Cow::Borrowed(&self.render))
    }
    fn link(&self) -> Option<Link<'_>> {
        stored(&self.uri, &self.reference)
    }
    fn warnings(&self) -> &[WarningOut] {
        &self.warnings
    }
}

impl ToolOutput for TaskStarted {
    fn text(&self) -> Option<Cow<'_, str>> {
        self.render.as_deref().map(Cow::Borrowed)
    }
}

impl ToolOutput for ExecAnswer {
    fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            ExecAnswer::Ran(r) => r.text(),
            ExecAnswer::Task(t) => t.text(),
        }
    }
    fn link(&self) -> Option<Link<'_>> {
        match self {
            ExecAnswer::Ran(r) => r.link(),
            ExecAnswer::Task(t) => t.link(),
        }
    }
    fn warnings(&self) -> &[WarningOut] {
        match self {
            ExecAnswer::Ran(r) => r.warnings(),
            ExecAnswer::Task(t) => t.warnings(),
        }
    }
}

impl ToolOutput for Applied {
    fn text(&self) -> Option<Cow<'_, str>> {
        self.result.text()
    }
    fn link(&self) -> Option<Link<'_>> {
        self.result.link()
    }
    fn warnings(&self) -> &[WarningOut] {
        self.result.warnings()
    }
}

/// A view of a stored value: the render, inline or raw text asked for; the
/// value's own URI when it came back elided, else its ref's.
impl ToolOutput for GetResult {
    fn text(&self) -> Option<Cow<'_, str>> {
        [&self.render, &self.inline, &self.raw]
            .into_iter()
            .find_map(|t| t.as_deref().map(Cow::Borrowed))
    }
    fn link(&self) -> Option<Link<'_>> {
        let elided = self
            .value
            .as_ref()
            .and_then(|v| v.get("uri"))
            .and_then(Json::as_str);
        let uri = match elided {
            Some(u) => Cow::Borrowed(u),
            None => Cow::Owned(uri::ref_to_uri(&self.reference)?),
        };
        Some(Link {
            uri,
            name: Cow::Borrowed(&self.reference),
        })
    }
}

impl ToolOutput for TaskRead {
    fn text(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.render))
    }
    fn link(&self) -> Option<Link<'_>> {
        stored(&self.uri, &self.reference)
    }
}

impl ToolOutput for ValueRead {
    fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            ValueRead::Value(v) => v.text(),
            ValueRead::Task(t) => t.text(),
        }
    }
    fn link(&self) -> Option<Link<'_>> {
        match self {
            ValueRead::Value(v) => v.link(),
            ValueRead::Task(t) => t.link(),
        }
    }
}

/// Results a model reads as their JSON, pretty.
macro_rules! as_json {
    ($($t:ty),* $(,)?) => {
        $(impl ToolOutput for $t {})*
    };
}

as_json!(CancelResult, TaskResult, CapRequestResult, CapDecided,);

/// An error for a model: the message with its codes, the hint, argument
/// errors, a failed command's status and stderr; linked when a raised
/// error's value was stored.
impl ToolOutput for RpcError {
    fn text(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(error_text(self)))
    }
    fn link(&self) -> Option<Link<'_>> {
        if self.code != rpc::RAISED {
            return None;
        }
        let data = self.data.as_ref()?;
        let reference = data.get("ref").and_then(Json::as_str);
        let uri = match data.get("uri").and_then(Json::as_str) {
            Some(u) => Cow::Borrowed(u),
            None => Cow::Owned(
                reference
                    .filter(|r| r.starts_with("out:"))
                    .and_then(uri::ref_to_uri)?,
            ),
        };
        let name = match reference {
            Some(r) => Cow::Borrowed(r),
            None => uri.clone(),
        };
        Some(Link { uri, name })
    }
}

/// The text of an error result. `data` is the error's own JSON (each error
/// site shapes it): the members read here are the ones a model needs.
pub(super) fn error_text(e: &RpcError) -> String {
    let field = |k: &str| e.data.as_ref().and_then(|d| d.get(k));
    let (message, rpc_code) = (&e.message, e.code);
    let mut out = match field("code").and_then(Json::as_str) {
        Some(lang) => format!("error [{lang}, {rpc_code}]: {message}"),
        None => format!("error [{rpc_code}]: {message}"),
    };
    if let Some(hint) = field("hint").and_then(Json::as_str) {
        out.push_str("\nhint: ");
        out.push_str(hint);
    }
    // One bad argument is the message itself: listed only among several.
    for a in field("errors")
        .and_then(Json::as_array)
        .filter(|errs| errs.len() > 1)
        .into_iter()
        .flatten()
    {
        let path = a["path"]
            .as_str()
            .filter(|p| !p.is_empty())
            .unwrap_or("(arguments)");
        out.push_str(&format!(
            "\n  {path}: {}",
            a["message"].as_str().unwrap_or("")
        ));
    }
    if let Some(status) = field("status").filter(|s| !s.is_null()) {
        out.push_str(&format!("\nstatus: {status}"));
    }
    if let Some(stderr) = field("stderr")
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
    {
        // Its first lines and its last ones, as an outcome's text shows them.
        let bytes = shoal_value::output::OutputBytes::from(stderr);
        if let Some(section) = shoal_value::shown::stderr_section(&bytes) {
            out.push('\n');
            out.push_str(&section);
        }
    }
    out
}
