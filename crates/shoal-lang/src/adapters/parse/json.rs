//! The JSON documents of the `json` and `ndjson` parsers through a
//! `serde_json` tree: the path for several documents in a row and for every
//! failure (the direct path of [`fastjson`] gives up on those).
//!
//! [`fastjson`]: crate::adapters::fastjson

use std::sync::Arc;

use serde_json::Value as J;

use super::{fail, Failure, OutputSpec};
use crate::adapters::types::{from_json, row_from_json, Ty};
use shoal_value::{Record, Value};

pub(super) fn parse_json(
    spec: &OutputSpec,
    bytes: &[u8],
    keys: &dyn Fn(&str) -> String,
    fast: bool,
) -> Result<Value, Failure> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(match &spec.ty {
            Ty::Table(_) => Value::Table(Arc::new(Vec::new())),
            Ty::List(_) => Value::list(Vec::new()),
            Ty::Record => Value::record(Record::new()),
            _ => Value::Null,
        });
    }
    if let Some(v) = fast
        .then(|| crate::adapters::fastjson::document(spec, bytes))
        .flatten()
    {
        return Ok(v);
    }
    // The tree path: several documents, and every failure (one wording, one
    // line rule for both paths).
    let mut j = json_documents(spec, bytes)?;
    for k in &spec.select {
        j = match j {
            J::Object(mut m) => match m.remove(k) {
                Some(v) => v,
                None => return fail(0, format!("the document has no key `{k}`")),
            },
            J::Array(a) if k.parse::<usize>().is_ok_and(|i| i < a.len()) => {
                let i: usize = k.parse().unwrap_or(0);
                a.into_iter().nth(i).unwrap_or(J::Null)
            }
            _ => return fail(0, format!("cannot select `{k}` from a non-object")),
        };
    }
    // A single object where a table is declared is a one-row table (go list).
    if let (Ty::Table(_), J::Object(_)) = (&spec.ty, &j) {
        j = J::Array(vec![j]);
    }
    match (&spec.ty, j) {
        (Ty::Table(_) | Ty::List(_), J::Array(items)) => {
            // Row-level errors name the line of the row when it is one per line.
            typed_items(&spec.ty, items.into_iter().map(|x| (0, x)).collect(), keys)
        }
        (ty, j) => from_json(&j, ty, keys).or_else(|e| fail(0, e)),
    }
}

/// One JSON document, or several in a row (`jq '.[]'`, `sqlite3` with two
/// statements, `go list` of several packages): several are a list for
/// `value`, their rows joined for a table, an error otherwise.
fn json_documents(spec: &OutputSpec, bytes: &[u8]) -> Result<J, Failure> {
    let line_of = |offset: usize| {
        bytes[..offset.min(bytes.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    };
    let mut docs = Vec::new();
    let mut it = serde_json::Deserializer::from_slice(bytes).into_iter::<J>();
    loop {
        let at = it.byte_offset();
        match it.next() {
            None => break,
            Some(Ok(d)) => docs.push(d),
            Some(Err(e)) => {
                let line = if e.line() > 0 { e.line() } else { line_of(at) };
                return fail(line, format!("not JSON: {e}"));
            }
        }
    }
    if docs.len() == 1 {
        return Ok(docs.pop().unwrap_or(J::Null));
    }
    match &spec.ty {
        Ty::Value => Ok(J::Array(docs)),
        Ty::Table(_) if spec.select.is_empty() => {
            let mut rows = Vec::new();
            for d in docs {
                match d {
                    J::Array(a) => rows.extend(a),
                    o @ J::Object(_) => rows.push(o),
                    _ => return fail(0, "several JSON documents that are not rows"),
                }
            }
            Ok(J::Array(rows))
        }
        t => fail(
            0,
            format!("{} JSON documents where one {t} is declared", docs.len()),
        ),
    }
}

pub(super) fn typed_items(
    ty: &Ty,
    items: Vec<(usize, J)>,
    keys: &dyn Fn(&str) -> String,
) -> Result<Value, Failure> {
    match ty {
        Ty::Table(Some(cols)) => {
            let mut rows = Vec::with_capacity(items.len());
            for (n, (line, j)) in items.iter().enumerate() {
                let r = row_from_json(j, cols, keys).or_else(|e| {
                    fail(
                        *line,
                        if *line == 0 {
                            format!("row {n}: {e}")
                        } else {
                            e
                        },
                    )
                })?;
                rows.push(Arc::new(r));
            }
            Ok(Value::Table(Arc::new(rows)))
        }
        Ty::Table(None) | Ty::List(_) => {
            let line = items.first().map(|x| x.0).unwrap_or(0);
            let arr = J::Array(items.into_iter().map(|x| x.1).collect());
            from_json(&arr, ty, keys).or_else(|e| fail(line, e))
        }
        other => fail(0, format!("cannot produce {other} from items")),
    }
}
