//! Result and error shapes of the kernel methods that evaluate (`exec`,
//! `value.get`), shared by the kernel and MCP connections.

use serde_json::{json, Value as Json};

use base64::Engine as _;

use super::bound::{head_tail, lines_of, text_for, LinesRef};
use super::elide::{self, Budget, HARD_CAP};
use super::rpc::{self, RpcError, BAD_PATH_OR_SLICE, PARSE_ERROR, RAISED};
use super::valpath;

mod params;
mod replies;
mod request;
mod results;
mod status;
mod table;
mod tasks;
pub use params::*;
pub use replies::*;
pub use request::*;
pub use results::*;
use shoal_lang::{ParseError, Warning};
use shoal_value::{render, ShoalError, Value};
pub use status::*;
pub use table::{kernel_schemas, methods};
pub use tasks::*;

pub use shoal_journal::ref_name;

/// A stored value the journal could not read back: `UNKNOWN_REF` with the ref and `code: journal`.
pub fn stored_value_unreadable(n: u64, error: &dyn std::fmt::Display) -> RpcError {
    RpcError::new(super::rpc::UNKNOWN_REF, error.to_string())
        .with_data(serde_json::json!({"ref": ref_name(n), "code": "journal"}))
}

/// Items of a list or table rendered for an exec's reply and the journal;
/// past it the render says how many more there are.
pub const RENDER_MAX_ITEMS: usize = 2000;

/// The text of a value as an exec shows it (and as `shoal_get` numbers its
/// lines): the status line of an outcome that is not ok, the block render
/// (lists and tables cut at [`RENDER_MAX_ITEMS`]), the stderr section
/// (`value::shown`). Text bytes held in memory render whole (the block
/// render keeps the first 64 KiB): the caller cuts head plus tail, so the
/// end of a log is kept.
pub fn value_shown(v: &Value, layout: render::Layout) -> shoal_value::shown::Shown {
    let mut s = shoal_value::shown::shown(v, layout, RENDER_MAX_ITEMS);
    if let Some(t) = whole_text(v) {
        s.body = t;
    }
    s
}

/// [`value_shown`] as text; `reference` (`out:N`) is named by its notes.
pub fn value_render(v: &Value, layout: render::Layout, reference: &str) -> String {
    value_shown(v, layout).text(reference)
}

/// The whole text of an in-memory bytes value (an ok outcome's output
/// included) too large for the block render, when it is text.
fn whole_text(v: &Value) -> Option<String> {
    // An ok outcome shows its value (as the block render does).
    let mut shown = v;
    while let Value::Outcome(o) = shown {
        match &o.out {
            Some(out) if o.ok => shown = out,
            _ => break,
        }
    }
    let Value::Bytes(b) = shown else {
        return None;
    };
    if b.is_spilled() || b.len() <= render::BLOCK_BYTES_TEXT {
        return None;
    }
    let mut t = b
        .read_all()
        .ok()
        .and_then(|all| String::from_utf8(all.to_vec()).ok())
        .filter(|t| !t.contains('\0'))?;
    if t.ends_with('\n') {
        t.pop();
    }
    Some(t)
}

/// The layout `value.get`'s render uses: the terminal's width for a tty,
/// else text with cells whole (what the exec's note promises).
fn get_layout(view: &ValueView) -> render::Layout {
    if view.tty {
        render::Layout::terminal(view.width)
    } else {
        render::Layout {
            cell_cap: usize::MAX,
            ..render::Layout::text(view.width)
        }
    }
}

pub fn ref_uri(n: u64) -> String {
    format!("shoal://out/{n}")
}

/// Parse `out:N` or `shoal://out/N`.
pub fn parse_ref(s: &str) -> Option<u64> {
    let n = s
        .strip_prefix("out:")
        .or_else(|| s.strip_prefix("shoal://out/"))?;
    n.parse().ok().filter(|&n| n > 0)
}

/// `{ref, uri, value, render, elapsed_ms}`.
pub fn exec_result(n: u64, value: Json, render: String, elapsed_ms: f64) -> Json {
    // Built in place: `json!` would copy `value` through serde.
    let mut m = serde_json::Map::with_capacity(6);
    m.insert("ref".into(), Json::String(ref_name(n)));
    m.insert("uri".into(), Json::String(ref_uri(n)));
    m.insert("value".into(), value);
    m.insert("render".into(), Json::String(render));
    m.insert(
        "elapsed_ms".into(),
        Json::from(self::elapsed_ms(elapsed_ms)),
    );
    Json::Object(m)
}

/// An exec's `elapsed_ms` as replies carry it: rounded to the microsecond.
pub fn elapsed_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// The `warnings` list of an exec (`[{code, message, span, hint}]`).
pub fn warnings_json(ws: &[Warning]) -> Json {
    Json::Array(
        ws.iter()
            .map(|w| {
                json!({
                    "code": w.code,
                    "message": w.message,
                    "span": {"start": w.span.start, "end": w.span.end},
                    "hint": w.hint,
                })
            })
            .collect(),
    )
}

/// Add a non-empty `warnings` list to an exec result or error data object.
pub fn with_warnings(mut obj: Json, ws: &[Warning]) -> Json {
    if !ws.is_empty() {
        if let Some(m) = obj.as_object_mut() {
            m.insert("warnings".into(), warnings_json(ws));
        }
    }
    obj
}

/// `-32001` with `{span, hint}`.
pub fn parse_error(e: &ParseError) -> RpcError {
    RpcError::new(PARSE_ERROR, e.msg.clone())
        .with_data(json!({"span": {"start": e.span.start, "end": e.span.end}, "hint": e.hint}))
}

/// `-32002` with `{code, span, hint, status, stderr, ref, uri}`; the error is stored as `out:N`.
/// A reached `[limits]` quota (`resource_limit`) is `-32040` with the same data.
pub fn raised(e: &ShoalError, n: u64) -> RpcError {
    let code = match e.code {
        shoal_value::ErrorCode::ResourceLimit => rpc::RESOURCE_LIMIT,
        shoal_value::ErrorCode::PolicyDenied => rpc::LEASH_DENIED,
        _ => RAISED,
    };
    RpcError::new(code, e.msg.clone()).with_data(json!({
        "code": e.code.as_str(),
        "span": e.span.map(|s| json!({"start": s.start, "end": s.end})),
        "hint": e.hint,
        "status": e.status,
        // Bounded like everything else (docs/protocol.md §3); the whole stderr is at `?path=stderr`.
        "stderr": e.stderr.as_ref().map(|s| {
            let head = &s[..s.len().min(Budget::default().max_bytes + 1)];
            let text = String::from_utf8_lossy(head);
            if s.len() <= Budget::default().max_bytes {
                text.into_owned()
            } else {
                let uri = elide::with_path(&ref_uri(n), "stderr");
                let t = super::bound::bound_text(&text, Budget::default().max_bytes, Some(&uri));
                if t.len() == text.len() {
                    format!("{text}\n…(more, fetch via {uri})")
                } else {
                    t
                }
            }
        }),
        "ref": ref_name(n),
        "uri": ref_uri(n),
    }))
}

/// `value.get` formats (docs/protocol.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetFormat {
    Json,
    Render,
    Raw,
    Inline,
}

/// A decoded `value.get` request (everything but the ref).
#[derive(Clone, Debug, PartialEq)]
pub struct GetRequest {
    pub path: Option<String>,
    pub slice: Option<(usize, usize)>,
    /// `lines: [a, b]`: lines a..=b (1-based) of the value's text, as text.
    pub lines: Option<(usize, usize)>,
    pub elide: Budget,
    /// `elide.max_bytes` as given (bounds `raw`; default the hard cap).
    pub raw_limit: usize,
    pub format: GetFormat,
}

impl Default for GetRequest {
    fn default() -> Self {
        GetRequest {
            path: None,
            slice: None,
            lines: None,
            elide: Budget::default(),
            raw_limit: HARD_CAP,
            format: GetFormat::Json,
        }
    }
}

/// A `value.get` request from its parts (the kernel method and `shoal_get`
/// both end here): `lines` selects text, so it goes with the render only.
pub fn get_request(
    path: Option<String>,
    slice: Option<(usize, usize)>,
    lines: Option<(usize, usize)>,
    elide: Budget,
    raw_limit: usize,
    format: Option<&str>,
) -> Result<GetRequest, RpcError> {
    let format = match format {
        None if lines.is_some() => GetFormat::Render,
        Some("json" | "raw" | "inline") if lines.is_some() => {
            return Err(RpcError::invalid_params(
                "lines returns text: use it without format (or with format: \"render\")",
            ))
        }
        None | Some("json") => GetFormat::Json,
        Some("render") => GetFormat::Render,
        Some("inline") => GetFormat::Inline,
        Some("raw") => GetFormat::Raw,
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "format must be json, render, raw or inline (got {other:?})"
            )))
        }
    };
    Ok(GetRequest {
        path: path.filter(|s| !s.is_empty()),
        slice,
        lines,
        elide,
        raw_limit,
        format,
    })
}

/// What `value.get` selected, before any wire encoding: the typed answer of the session
/// supervisor, encoded by the connection with [`value_view_result`].
#[derive(Clone, Debug)]
pub struct ValueView {
    pub n: u64,
    pub selected: Selected,
    /// Where elision markers and bounded text point (reflects the path, not the slice).
    pub uri: String,
    pub format: GetFormat,
    /// The path asked for (named by the footer of a cut render).
    pub path: Option<String>,
    /// `lines: [a, b]` asked for.
    pub lines: Option<(usize, usize)>,
    pub elide: Budget,
    /// `format: "raw"`: at most this many bytes.
    pub raw_limit: usize,
    /// Keep ANSI escapes in a render.
    pub tty: bool,
    /// Column width of a block render.
    pub width: usize,
}

#[derive(Clone, Debug)]
pub enum Selected {
    /// The value at the path and slice asked for.
    Value(Value),
    /// A value restored from the journal whose stored JSON does not decode, answered as
    /// stored (only when nothing beyond the whole value, as JSON, was asked).
    Stored(Json),
}

/// `value.get` of a value read back from the journal (an `out:N` from before a daemon
/// restart): paths, slices and elision when the stored JSON decodes, else the stored JSON
/// itself when nothing beyond it was asked. `None`: the journal does not hold it. The one
/// restore path of both the session supervisor and the kernel connection.
pub fn restored_value_get(
    n: u64,
    got: shoal_journal::Result<Option<(Json, String)>>,
    req: &GetRequest,
    tty: bool,
    width: usize,
) -> Option<Result<ValueView, RpcError>> {
    let wire = match got {
        Ok(Some((wire, _render))) => wire,
        Ok(None) => return None,
        Err(shoal_journal::JournalError::Invalid(m)) => {
            return Some(Err(
                RpcError::new(rpc::UNKNOWN_REF, m).with_data(json!({"ref": ref_name(n)}))
            ))
        }
        Err(e) => return Some(Err(stored_value_unreadable(n, &e))),
    };
    Some(match super::wire::decode(&wire) {
        Some(v) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            value_get(&v, n, req, tty, width)
        }))
        .unwrap_or_else(|_| Err(RpcError::internal("value.get panicked on a restored value"))),
        None if req.path.is_none() && req.slice.is_none() && req.format == GetFormat::Json => {
            Ok(view(n, Selected::Stored(wire), ref_uri(n), req, tty, width))
        }
        None => Err(RpcError::new(
            BAD_PATH_OR_SLICE,
            "this value was restored from the journal and only its JSON form is available",
        )
        .with_data(json!({"ref": ref_name(n)}))),
    })
}

fn view(
    n: u64,
    selected: Selected,
    uri: String,
    req: &GetRequest,
    tty: bool,
    width: usize,
) -> ValueView {
    ValueView {
        n,
        selected,
        uri,
        format: req.format,
        path: req.path.clone(),
        lines: req.lines,
        elide: req.elide,
        raw_limit: req.raw_limit,
        tty,
        width,
    }
}

/// `value.get` on transcript value `out:n` (docs/rules.md §3): lookup → path → slice, and
/// the format checked; [`value_view_result`] then formats. The URI of an elided result
/// reflects the path, not the slice.
pub fn value_get(
    v: &Value,
    n: u64,
    req: &GetRequest,
    tty: bool,
    width: usize,
) -> Result<ValueView, RpcError> {
    let reference = ref_name(n);
    let mut uri = ref_uri(n);
    let mut v = v.clone();
    if let Some(path) = &req.path {
        let bad = |m: String| {
            RpcError::new(BAD_PATH_OR_SLICE, m).with_data(json!({"ref": reference, "path": path}))
        };
        let segs = valpath::parse(path).map_err(bad)?;
        v = valpath::apply(&v, &segs).map_err(bad)?;
        uri = format!("{uri}?path={path}");
    }
    if let Some((a, b)) = req.slice {
        v = valpath::slice(&v, a, b).map_err(|m| {
            RpcError::new(BAD_PATH_OR_SLICE, m).with_data(json!({"ref": reference}))
        })?;
    }
    if req.format == GetFormat::Raw && !matches!(v, Value::Str(_) | Value::Bytes(_)) {
        return Err(RpcError::new(
            BAD_PATH_OR_SLICE,
            format!(
                "raw format needs a str or bytes value, not {}",
                v.type_name()
            ),
        )
        .with_data(json!({"ref": reference})));
    }
    Ok(view(n, Selected::Value(v), uri, req, tty, width))
}

/// The wire answer of `value.get` (the connections' one encoder of a [`ValueView`]),
/// typed: one of `value`, `render`,
/// `inline`, `raw`, `raw_base64`, and what bounds it.
pub fn value_view_result(view: &ValueView) -> Result<GetResult, RpcError> {
    let reference = ref_name(view.n);
    let v = match &view.selected {
        Selected::Stored(wire) => {
            return Ok(GetResult {
                value: Some(wire.clone()),
                ..GetResult::of(reference)
            })
        }
        Selected::Value(v) => v,
    };
    let uri = &view.uri;
    let at = LinesRef {
        reference: &reference,
        path: view.path.as_deref(),
    };
    Ok(match view.format {
        GetFormat::Json => {
            let j = elide::elide(v, &view.elide, uri);
            // A ref to the very URI asked for leads nowhere: the text comes
            // along, its marker naming the call for the lines it cuts.
            let loops = j.get("$") == Some(&json!("ref"))
                && j.get("uri").and_then(Json::as_str) == Some(uri.as_str());
            let render = loops.then(|| {
                let text = value_render(v, get_layout(view), &reference);
                let text = text_for(&text, view.tty);
                head_tail(&text, view.elide.text_limit(), at)
            });
            GetResult {
                value: Some(j),
                render,
                ..GetResult::of(reference.clone())
            }
        }
        GetFormat::Inline => {
            let s = render::inline(v);
            GetResult {
                inline: Some(super::bound::bound_text(&s, HARD_CAP, Some(uri))),
                ..GetResult::of(reference.clone())
            }
        }
        GetFormat::Render => {
            let r = value_render(v, get_layout(view), &reference);
            let text = text_for(&r, view.tty);
            match view.lines {
                None => GetResult {
                    render: Some(head_tail(&text, view.elide.text_limit(), at)),
                    ..GetResult::of(reference.clone())
                },
                Some((a, b)) => {
                    let limit = view.elide.max_text.unwrap_or(HARD_CAP);
                    let (t, last, n) = lines_of(&text, a, b, limit, at).map_err(|m| {
                        RpcError::new(BAD_PATH_OR_SLICE, m).with_data(json!({"ref": reference}))
                    })?;
                    GetResult {
                        render: Some(t),
                        lines: Some([a as u64, last as u64]),
                        total_lines: Some(n as u64),
                        truncated: (last < b.min(n)).then_some(true),
                        ..GetResult::of(reference.clone())
                    }
                }
            }
        }
        GetFormat::Raw => raw(v, reference, view.raw_limit),
    })
}

/// `format:"raw"`: str → `{raw}`, bytes → `{raw_base64}`, bounded to
/// `limit` bytes (`truncated`, `n` = total length; slice for the rest). Any other
/// type was refused by [`value_get`].
fn raw(v: &Value, reference: String, limit: usize) -> GetResult {
    let mut r = GetResult::of(reference);
    let (len, cut, unit) = match v {
        Value::Str(s) => {
            let mut cut = s.len().min(limit);
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            r.raw = Some(s[..cut].to_string());
            (s.len(), cut, "chars")
        }
        Value::Bytes(b) => {
            let head = b.head(limit);
            r.raw_base64 = Some(base64::engine::general_purpose::STANDARD.encode(&head));
            (b.len(), head.len(), "bytes")
        }
        _ => return r,
    };
    if cut < len {
        r.truncated = Some(true);
        r.n = Some(len as u64);
        r.hint = Some(format!(
            "raw is bounded; use slice (in {unit}) for the rest"
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs() {
        assert_eq!(parse_ref("out:12"), Some(12));
        assert_eq!(parse_ref("shoal://out/3"), Some(3));
        assert_eq!(parse_ref("out:0"), None);
        assert_eq!(parse_ref("task:1"), None);
    }
}
