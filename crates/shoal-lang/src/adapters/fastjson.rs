//! JSON straight into typed values: a serde visitor guided by the declared
//! type, with no intermediate `serde_json::Value` tree and no per-cell key
//! allocation.
//!
//! This is the fast path of the `json` and `ndjson` parsers. It produces
//! exactly what the tree path of [`super::parse`] produces when that
//! succeeds; whenever it meets anything else (a type mismatch, a syntax
//! error, several documents in a row, two columns reading one key) it gives
//! up with `None` and the tree path runs, so that failures keep one wording
//! and one line-numbering rule.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::parse::OutputSpec;
use super::types::{bool_word, datetime, from_text, row_template, Ty};
use shoal_value::{Record, Value};

/// The column a JSON key feeds, by declared column index.
struct Cols<'a> {
    cols: &'a [(String, Ty)],
    /// JSON key of each column (the `keys` mapping or the column's name).
    keys: Vec<&'a str>,
    /// Every row starts as a copy of this (the keys hashed once per table).
    template: Record,
}

impl<'a> Cols<'a> {
    fn new(cols: &'a [(String, Ty)], spec: &'a OutputSpec) -> Option<Cols<'a>> {
        let keys: Vec<&str> = cols
            .iter()
            .map(|(c, _)| {
                spec.keys
                    .iter()
                    .find(|(k, _)| k == c)
                    .map(|(_, v)| v.as_str())
                    .unwrap_or(c.as_str())
            })
            .collect();
        // Two columns reading one key: left to the tree path.
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].contains(k) {
                return None;
            }
        }
        // A row's columns seen so far are one bit each.
        if cols.len() > 64 {
            return None;
        }
        Some(Cols {
            cols,
            keys,
            template: row_template(cols),
        })
    }
}

/// Every table type reachable from `ty`, with its column keys; `None` when
/// one of them cannot use the fast path.
fn col_sets<'a>(ty: &'a Ty, spec: &'a OutputSpec, out: &mut Vec<Cols<'a>>) -> Option<()> {
    match ty {
        Ty::Nullable(t) | Ty::List(t) => col_sets(t, spec, out),
        Ty::Table(Some(cols)) => {
            out.push(Cols::new(cols, spec)?);
            for (_, t) in cols {
                col_sets(t, spec, out)?;
            }
            Some(())
        }
        _ => Some(()),
    }
}

struct Ctx<'a> {
    sets: Vec<Cols<'a>>,
    /// Object keys of untyped JSON, shared between the records that repeat them.
    keys: KeyCache,
}

/// The keys seen lately in untyped objects: an array of like objects makes
/// one allocation per distinct key, not one per key per object. Gives up
/// (plain allocation) when few keys repeat.
#[derive(Default)]
struct KeyCache(std::cell::RefCell<KeyCacheInner>);

#[derive(Default)]
struct KeyCacheInner {
    recent: Vec<shoal_value::Key>,
    next: usize,
    looked: u32,
    hits: u32,
}

impl KeyCache {
    const KEPT: usize = 32;

    fn key(&self, s: &str) -> shoal_value::Key {
        let mut c = self.0.borrow_mut();
        if c.looked >= 256 && c.hits < c.looked / 4 {
            return s.into();
        }
        c.looked = c.looked.saturating_add(1);
        if let Some(k) = c.recent.iter().find(|k| &***k == s) {
            let k = k.clone();
            c.hits = c.hits.saturating_add(1);
            return k;
        }
        let k: shoal_value::Key = s.into();
        if c.recent.len() < Self::KEPT {
            c.recent.push(k.clone());
        } else {
            let i = c.next;
            c.recent[i] = k.clone();
            c.next = (i + 1) % Self::KEPT;
        }
        k
    }
}

/// An object key through the [`KeyCache`] (borrowed from the input when it
/// has no escapes).
struct KeySeed<'k>(&'k KeyCache);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = shoal_value::Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = shoal_value::Key;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(self.0.key(s))
    }
}

impl Ctx<'_> {
    fn cols_of(&self, cols: &[(String, Ty)]) -> &Cols<'_> {
        // Identity of the column slice: each table type has its own.
        self.sets
            .iter()
            .find(|s| std::ptr::eq(s.cols, cols))
            .expect("every reachable table type has its column set")
    }
}

/// Parse one whole document by `spec` (after its `select` path); `None`
/// whenever the tree path must decide.
pub fn document(spec: &OutputSpec, bytes: &[u8]) -> Option<Value> {
    let mut sets = Vec::new();
    col_sets(&spec.ty, spec, &mut sets)?;
    let ctx = Ctx {
        sets,
        keys: KeyCache::default(),
    };
    // UTF-8 checked once for the whole output, not string by string.
    match std::str::from_utf8(bytes) {
        Ok(text) => whole(spec, &ctx, serde_json::Deserializer::from_str(text)),
        Err(_) => whole(spec, &ctx, serde_json::Deserializer::from_slice(bytes)),
    }
}

fn whole<'de, R: serde_json::de::Read<'de>>(
    spec: &OutputSpec,
    ctx: &Ctx<'_>,
    mut de: serde_json::Deserializer<R>,
) -> Option<Value> {
    let v = Select {
        path: &spec.select,
        leaf: Typed {
            ty: &spec.ty,
            ctx,
            top: true,
        },
    }
    .deserialize(&mut de)
    .ok()?;
    // Trailing data (several documents): the tree path joins them.
    de.end().ok()?;
    Some(v)
}

/// `ndjson`: one document per non-blank line, items of a table or list.
pub fn ndjson(spec: &OutputSpec, bytes: &[u8]) -> Option<Value> {
    let mut sets = Vec::new();
    col_sets(&spec.ty, spec, &mut sets)?;
    let ctx = Ctx {
        sets,
        keys: KeyCache::default(),
    };
    let item_ty = match &spec.ty {
        Ty::List(t) => &**t,
        Ty::Table(_) => &spec.ty,
        _ => return None,
    };
    // UTF-8 checked once: the lines of valid text are valid text.
    let text = std::str::from_utf8(bytes).ok();
    let mut items = Vec::new();
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if !body.is_empty() {
        let mut at = 0;
        for line in body.split(|b| *b == b'\n') {
            let range = at..at + line.len();
            at = range.end + 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let v = match text.and_then(|t| t.get(range)) {
                Some(l) => item(item_ty, &ctx, serde_json::Deserializer::from_str(l))?,
                None => item(item_ty, &ctx, serde_json::Deserializer::from_slice(line))?,
            };
            items.push(v);
        }
    }
    Some(match &spec.ty {
        Ty::Table(_) => Value::Table(Arc::new(
            items
                .into_iter()
                .filter_map(|it| match it {
                    Item::Row(r) => Some(r),
                    Item::Other(_) => None,
                })
                .collect(),
        )),
        _ => Value::list(items.into_iter().map(Item::into_value).collect()),
    })
}

/// One line of `ndjson` as an item of `item_ty` (a table's rows bare).
fn item<'de, R: serde_json::de::Read<'de>>(
    item_ty: &Ty,
    ctx: &Ctx<'_>,
    mut de: serde_json::Deserializer<R>,
) -> Option<Item> {
    let v = match item_ty {
        Ty::Table(Some(cols)) => Row {
            cols: ctx.cols_of(cols),
            ctx,
        }
        .deserialize(&mut de)
        .ok()
        .map(|r| Item::Row(Arc::new(r)))?,
        Ty::Table(None) => match Element(&ctx.keys).deserialize(&mut de).ok()? {
            it @ Item::Row(_) => it,
            Item::Other(_) => return None,
        },
        t => Item::Other(
            Typed {
                ty: t,
                ctx,
                top: false,
            }
            .deserialize(&mut de)
            .ok()?,
        ),
    };
    de.end().ok()?;
    Some(v)
}

/// Walk down the `select` keys, then type the value found there.
struct Select<'a> {
    path: &'a [String],
    leaf: Typed<'a>,
}

impl<'de> DeserializeSeed<'de> for Select<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.path.is_empty() {
            return self.leaf.deserialize(d);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Select<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object to select from")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let want = self.path[0].as_str();
        let mut found = None;
        while let Some(hit) = m.next_key_seed(KeyIs(want))? {
            if hit {
                // A repeated key: the tree path keeps the last; so do we.
                found = Some(m.next_value_seed(Select {
                    path: &self.path[1..],
                    leaf: self.leaf,
                })?);
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        found.ok_or_else(|| de::Error::custom("no such key"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        let Ok(want) = self.path[0].parse::<usize>() else {
            return Err(de::Error::custom("not an index"));
        };
        let mut i = 0;
        let mut found = None;
        loop {
            if i == want {
                match s.next_element_seed(Select {
                    path: &self.path[1..],
                    leaf: self.leaf,
                })? {
                    Some(v) => found = Some(v),
                    None => break,
                }
            } else if s.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            i += 1;
        }
        found.ok_or_else(|| de::Error::custom("index out of range"))
    }
}

/// A map key compared with one wanted key.
struct KeyIs<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
        Ok(s == self.0)
    }
}

/// A map key as the index of the column it feeds; `next` is the column
/// after the last one found, tried first (keys usually come in order).
struct KeyCol<'a> {
    cols: &'a Cols<'a>,
    next: usize,
}

impl<'de> DeserializeSeed<'de> for KeyCol<'_> {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyCol<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Option<usize>, E> {
        let keys = &self.cols.keys;
        if keys.get(self.next) == Some(&s) {
            return Ok(Some(self.next));
        }
        Ok(keys.iter().position(|k| *k == s))
    }
}

fn mismatch<E: de::Error>() -> E {
    E::custom("type mismatch")
}

/// One object as a row of declared columns.
struct Row<'a> {
    cols: &'a Cols<'a>,
    ctx: &'a Ctx<'a>,
}

impl<'de> DeserializeSeed<'de> for Row<'_> {
    type Value = Record;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Record, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Row<'_> {
    type Value = Record;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Record, A::Error> {
        let mut r = self.cols.template.clone();
        let mut seen: u64 = 0;
        let mut next = 0;
        while let Some(k) = m.next_key_seed(KeyCol {
            cols: self.cols,
            next,
        })? {
            match k {
                Some(c) => {
                    // A repeated key keeps its last value, as in the tree.
                    r[c] = m.next_value_seed(Typed {
                        ty: &self.cols.cols[c].1,
                        ctx: self.ctx,
                        top: false,
                    })?;
                    seen |= 1 << c;
                    next = c + 1;
                }
                None => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        for (c, (_, t)) in self.cols.cols.iter().enumerate() {
            if seen & (1 << c) == 0 && !t.is_nullable() {
                return Err(de::Error::custom("missing field"));
            }
        }
        Ok(r)
    }
}

/// A value of a declared type (the rules of `types::from_json`).
#[derive(Clone, Copy)]
struct Typed<'a> {
    ty: &'a Ty,
    ctx: &'a Ctx<'a>,
    /// The document itself (a single object is a one-row table there).
    top: bool,
}

impl Typed<'_> {
    /// The type with a nullable wrapper removed.
    fn base(&self) -> &Ty {
        match self.ty {
            Ty::Nullable(t) => t,
            t => t,
        }
    }

    fn number<E: de::Error>(&self, n: Num) -> Result<Value, E> {
        Ok(match (self.base(), n) {
            (Ty::Value, Num::I(i)) => Value::Int(i),
            (Ty::Value, Num::U(u)) => match i64::try_from(u) {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Float(u as f64),
            },
            (Ty::Value, Num::F(f)) => Value::Float(f),
            (Ty::Str, n) => Value::str(n.text()),
            (Ty::Int, Num::I(i)) => Value::Int(i),
            (Ty::Int, Num::U(u)) => Value::Int(i64::try_from(u).map_err(|_| mismatch::<E>())?),
            (Ty::Float, Num::I(i)) => Value::Float(i as f64),
            (Ty::Float, Num::U(u)) => Value::Float(u as f64),
            (Ty::Float, Num::F(f)) => Value::Float(f),
            (Ty::DateTime, n @ (Num::I(_) | Num::U(_))) => {
                datetime(&n.text()).map_err(|_| mismatch::<E>())?
            }
            (Ty::Size, Num::U(u)) => Value::Size(u),
            (Ty::SizeKb, Num::U(u)) => Value::Size(u.checked_mul(1024).ok_or_else(mismatch)?),
            _ => return Err(mismatch()),
        })
    }
}

#[derive(Clone, Copy)]
enum Num {
    I(i64),
    U(u64),
    F(f64),
}

impl Num {
    /// serde_json's rendering of the number.
    fn text(self) -> String {
        match self {
            Num::I(i) => i.to_string(),
            Num::U(u) => u.to_string(),
            Num::F(f) => serde_json::Number::from_f64(f)
                .map(|n| n.to_string())
                .unwrap_or_default(),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Typed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if let Ty::Value = self.base() {
            return Generic(&self.ctx.keys).deserialize(d);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Typed<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.ty)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        match self.ty {
            Ty::Nullable(_) | Ty::Value => Ok(Value::Null),
            _ => Err(mismatch()),
        }
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        match self.base() {
            Ty::Bool | Ty::Value => Ok(Value::Bool(b)),
            Ty::Str => Ok(Value::str(if b { "true" } else { "false" })),
            _ => Err(mismatch()),
        }
    }
    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Value, E> {
        // serde_json visits non-negative integers as u64.
        match u64::try_from(i) {
            Ok(u) => self.number(Num::U(u)),
            Err(_) => self.number(Num::I(i)),
        }
    }
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        self.number(Num::U(u))
    }
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        self.number(Num::F(f))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        Ok(match self.base() {
            Ty::Str | Ty::Value => Value::str(s),
            Ty::Path => Value::path(s),
            Ty::Int => Value::Int(s.trim().parse::<i64>().map_err(|_| mismatch::<E>())?),
            t @ (Ty::Float | Ty::Size | Ty::SizeKb) => {
                from_text(s.as_bytes(), t).map_err(|_| mismatch::<E>())?
            }
            Ty::Bool => bool_word(s.trim()).ok_or_else(mismatch)?,
            Ty::DateTime => datetime(s.trim()).map_err(|_| mismatch::<E>())?,
            _ => return Err(mismatch()),
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        let cap = s.size_hint().unwrap_or(0).min(4096);
        match self.base() {
            Ty::List(inner) => {
                let mut out = Vec::with_capacity(cap);
                while let Some(v) = s.next_element_seed(Typed {
                    ty: inner,
                    ctx: self.ctx,
                    top: false,
                })? {
                    out.push(v);
                }
                Ok(Value::list(out))
            }
            Ty::Table(None) => {
                let mut out = Vec::with_capacity(cap);
                while let Some(it) = s.next_element_seed(Element(&self.ctx.keys))? {
                    match it {
                        Item::Row(r) => out.push(r),
                        Item::Other(_) => return Err(mismatch()),
                    }
                }
                Ok(Value::Table(Arc::new(out)))
            }
            Ty::Table(Some(cols)) => {
                let cols = self.ctx.cols_of(cols);
                let mut out = Vec::with_capacity(cap);
                while let Some(r) = s.next_element_seed(Row {
                    cols,
                    ctx: self.ctx,
                })? {
                    out.push(Arc::new(r));
                }
                Ok(Value::Table(Arc::new(out)))
            }
            _ => Err(mismatch()),
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Value, A::Error> {
        match self.base() {
            Ty::Record => Generic(&self.ctx.keys).visit_map(m),
            // A single object where a table is declared is a one-row table.
            Ty::Table(None) if self.top && matches!(self.ty, Ty::Table(_)) => {
                match &Generic(&self.ctx.keys).visit_map(m)? {
                    Value::Record(r) => Ok(Value::Table(Arc::new(vec![r.clone()]))),
                    _ => Err(mismatch()),
                }
            }
            Ty::Table(Some(cols)) if self.top && matches!(self.ty, Ty::Table(_)) => {
                let r = Row {
                    cols: self.ctx.cols_of(cols),
                    ctx: self.ctx,
                }
                .visit_map(m)?;
                Ok(Value::Table(Arc::new(vec![Arc::new(r)])))
            }
            _ => Err(mismatch()),
        }
    }
}

/// Any JSON as a value (the mapping of `value::json::from_json`: objects as
/// records with sorted keys, arrays of objects as tables).
struct Generic<'k>(&'k KeyCache);

impl<'de> DeserializeSeed<'de> for Generic<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Generic<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Int(i))
    }
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        Ok(match i64::try_from(u) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Float(u as f64),
        })
    }
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        Ok(Value::Float(f))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        Ok(Value::str(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        // Rows while every element is an object (a non-empty array of
        // objects is a table); items from the first element that is not.
        let mut rows = Vec::new();
        let mut items: Option<Vec<Value>> = None;
        while let Some(it) = s.next_element_seed(Element(self.0))? {
            match (it, &mut items) {
                (Item::Row(r), None) => rows.push(r),
                (it, Some(v)) => v.push(it.into_value()),
                (Item::Other(x), None) => {
                    let mut v: Vec<Value> = rows.drain(..).map(Value::Record).collect();
                    v.push(x);
                    items = Some(v);
                }
            }
        }
        Ok(match items {
            Some(v) => Value::list(v),
            None if rows.is_empty() => Value::list(Vec::new()),
            None => Value::Table(Arc::new(rows)),
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Value, A::Error> {
        Ok(Value::Record(Arc::new(generic_record(m, self.0)?)))
    }
}

/// An object as a record with sorted keys.
fn generic_record<'de, A: MapAccess<'de>>(mut m: A, keys: &KeyCache) -> Result<Record, A::Error> {
    let mut r = Record::with_capacity(m.size_hint().unwrap_or(0));
    while let Some(k) = m.next_key_seed(KeySeed(keys))? {
        let v = m.next_value_seed(Generic(keys))?;
        // A repeated key keeps its last value.
        r.insert(k, v);
    }
    // Sorted keys (sorting keeps the stored hashes: nothing is rehashed).
    if !r.keys().is_sorted() {
        r.sort_keys();
    }
    Ok(r)
}

/// An array element of any JSON: an object stays a bare row until the
/// array turns out not to be a table.
enum Item {
    Row(Arc<Record>),
    Other(Value),
}

impl Item {
    fn into_value(self) -> Value {
        match self {
            Item::Row(r) => Value::Record(r),
            Item::Other(v) => v,
        }
    }
}

/// [`Generic`] for one array element.
struct Element<'k>(&'k KeyCache);

impl<'de> DeserializeSeed<'de> for Element<'_> {
    type Value = Item;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Item, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Element<'_> {
    type Value = Item;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Item, E> {
        Generic(self.0).visit_unit().map(Item::Other)
    }
    fn visit_none<E: de::Error>(self) -> Result<Item, E> {
        Generic(self.0).visit_none().map(Item::Other)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Item, E> {
        Generic(self.0).visit_bool(b).map(Item::Other)
    }
    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Item, E> {
        Generic(self.0).visit_i64(i).map(Item::Other)
    }
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Item, E> {
        Generic(self.0).visit_u64(u).map(Item::Other)
    }
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Item, E> {
        Generic(self.0).visit_f64(f).map(Item::Other)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Item, E> {
        Generic(self.0).visit_str(s).map(Item::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Item, A::Error> {
        Generic(self.0).visit_seq(s).map(Item::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Item, A::Error> {
        Ok(Item::Row(Arc::new(generic_record(m, self.0)?)))
    }
}
