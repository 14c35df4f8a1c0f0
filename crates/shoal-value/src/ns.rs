//! Data namespaces `json yaml toml csv math os config` (docs/rules.md §11).
use std::sync::Arc;

use crate::{json, render, Args, Host, Record, SResult, ShoalError, Value};

/// Is `name` a namespace root (when not shadowed by a binding)?
pub fn is_namespace(name: &str) -> bool {
    matches!(
        name,
        "json" | "yaml" | "toml" | "csv" | "math" | "os" | "config"
    )
}

fn no_member(ns: &str, member: &str) -> ShoalError {
    ShoalError::field_missing(format!("unknown member `{member}` in namespace `{ns}`"))
}

fn text_arg<'a>(args: &'a Args, ns: &str, f: &str) -> SResult<&'a str> {
    match args.pos.first() {
        Some(Value::Str(s)) => Ok(s),
        Some(other) => Err(ShoalError::arg_error(format!(
            "{ns}.{f}() expects a str, got {}",
            other.type_name()
        ))),
        None => Err(ShoalError::arg_error(format!(
            "{ns}.{f}() requires a str argument"
        ))),
    }
}

fn value_arg<'a>(args: &'a Args, ns: &str, f: &str) -> SResult<&'a Value> {
    args.pos
        .first()
        .ok_or_else(|| ShoalError::arg_error(format!("{ns}.{f}() requires a value")))
}

/// `ns.member(args)`
pub fn call(host: &mut dyn Host, ns: &str, member: &str, args: Args) -> SResult<Value> {
    match ns {
        "json" => match member {
            "parse" => {
                let s = text_arg(&args, ns, member)?;
                // Parsed values take several times the text's size.
                crate::memory::reserve((s.len() as u64).saturating_mul(8))?;
                json::parse(s).ok_or_else(|| ShoalError::arg_error("json.parse(): invalid JSON"))
            }
            "stringify" => {
                let v = value_arg(&args, ns, member)?;
                let pretty = matches!(args.pos.get(1), Some(Value::Bool(true)))
                    || args
                        .named
                        .iter()
                        .any(|(k, v)| k == "pretty" && matches!(v, Value::Bool(true)));
                if let Some((k, _)) = args.named.iter().find(|(k, _)| k != "pretty") {
                    return Err(ShoalError::arg_error(format!("unknown argument `{k}`")));
                }
                json::materialise_check(v)?;
                Ok(Value::str(if pretty {
                    json::stringify_pretty(v)
                } else {
                    json::stringify(v)
                }))
            }
            _ => Err(no_member(ns, member)),
        },
        "yaml" => match member {
            "parse" => {
                let s = text_arg(&args, ns, member)?;
                let y: serde_norway::Value = serde_norway::from_str(s)
                    .map_err(|e| ShoalError::arg_error(format!("yaml.parse(): {e}")))?;
                let j = serde_json::to_value(y)
                    .map_err(|e| ShoalError::arg_error(format!("yaml.parse(): {e}")))?;
                Ok(json::from_json(&j))
            }
            "stringify" => {
                let v = value_arg(&args, ns, member)?;
                json::materialise_check(v)?;
                serde_norway::to_string(&json::to_json(v))
                    .map(Value::str)
                    .map_err(|e| ShoalError::arg_error(format!("yaml.stringify(): {e}")))
            }
            _ => Err(no_member(ns, member)),
        },
        "toml" => match member {
            "parse" => {
                let s = text_arg(&args, ns, member)?;
                let t: toml::Table = toml::from_str(s)
                    .map_err(|e| ShoalError::arg_error(format!("toml.parse(): {e}")))?;
                let j = serde_json::to_value(t)
                    .map_err(|e| ShoalError::arg_error(format!("toml.parse(): {e}")))?;
                Ok(json::from_json(&toml_dates(j)))
            }
            "stringify" => {
                let v = value_arg(&args, ns, member)?;
                json::materialise_check(v)?;
                let j = json::to_json(v);
                if !j.is_object() {
                    return Err(ShoalError::arg_error(format!(
                        "toml.stringify() needs a record at the top level, got {}",
                        v.type_name()
                    )));
                }
                let j = strip_nulls(j);
                toml::to_string(&j)
                    .map(Value::str)
                    .map_err(|e| ShoalError::arg_error(format!("toml.stringify(): {e}")))
            }
            _ => Err(no_member(ns, member)),
        },
        "csv" => match member {
            "parse" => csv_parse(text_arg(&args, ns, member)?),
            "stringify" => csv_stringify(value_arg(&args, ns, member)?),
            _ => Err(no_member(ns, member)),
        },
        "math" => math(ns, member, &args),
        "os" => os(host, member, &args),
        "config" => match member {
            "all" => {
                nullary(ns, member, &args)?;
                Ok(Value::record(host.config()))
            }
            "get" => {
                let k = text_arg(&args, ns, member)?;
                Ok(host.config().get(k).cloned().unwrap_or(Value::Null))
            }
            _ => Err(no_member(ns, member)),
        },
        _ => Err(ShoalError::field_missing(format!(
            "unknown namespace `{ns}`"
        ))),
    }
}

/// `ns.member` without a call (constants such as `math.pi`, `config.KEY`).
pub fn field(host: &mut dyn Host, ns: &str, member: &str) -> SResult<Value> {
    match (ns, member) {
        ("math", "pi") => Ok(Value::Float(std::f64::consts::PI)),
        ("math", "e") => Ok(Value::Float(std::f64::consts::E)),
        ("math", "tau") => Ok(Value::Float(std::f64::consts::TAU)),
        ("math", "inf") => Ok(Value::Float(f64::INFINITY)),
        ("math", "nan") => Ok(Value::Float(f64::NAN)),
        ("math", "sqrt2") => Ok(Value::Float(std::f64::consts::SQRT_2)),
        ("config", k) => Ok(host.config().get(k).cloned().unwrap_or(Value::Null)),
        (ns, m) => Err(ShoalError::field_missing(format!(
            "`{ns}.{m}` is not a field (namespace functions must be called)"
        ))),
    }
}

/// TOML datetimes serialize as `{"$__toml_private_datetime": "…"}`: make them strings.
fn toml_dates(j: serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match j {
        J::Object(m) => {
            if m.len() == 1 {
                if let Some(J::String(s)) = m.get("$__toml_private_datetime") {
                    return J::String(s.clone());
                }
            }
            J::Object(m.into_iter().map(|(k, v)| (k, toml_dates(v))).collect())
        }
        J::Array(a) => J::Array(a.into_iter().map(toml_dates).collect()),
        other => other,
    }
}

fn strip_nulls(j: serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match j {
        J::Object(m) => J::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        J::Array(a) => J::Array(a.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

fn csv_parse(s: &str) -> SResult<Value> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(s.as_bytes());
    let headers: Vec<crate::Key> = rdr
        .headers()
        .map_err(|e| ShoalError::arg_error(format!("csv.parse(): {e}")))?
        .iter()
        .map(Into::into)
        .collect();
    let mut rows = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| ShoalError::arg_error(format!("csv.parse(): {e}")))?;
        if rec.len() != headers.len() {
            return Err(ShoalError::arg_error("csv.parse(): ragged row"));
        }
        let r: Record = headers
            .iter()
            .cloned()
            .zip(rec.iter().map(Value::str))
            .collect();
        rows.push(Arc::new(r));
    }
    Ok(Value::Table(Arc::new(rows)))
}

fn csv_stringify(v: &Value) -> SResult<Value> {
    let rows: Vec<Arc<Record>> = match v {
        Value::Table(t) => t.as_ref().clone(),
        Value::Record(r) => vec![r.clone()],
        Value::List(items) if items.iter().all(|x| matches!(x, Value::Record(_))) => items
            .iter()
            .filter_map(|x| match x {
                Value::Record(r) => Some(r.clone()),
                _ => None,
            })
            .collect(),
        other => {
            return Err(ShoalError::type_error(format!(
                "csv.stringify() needs a table, list of records or record, got {}",
                other.type_name()
            )))
        }
    };
    let header: Vec<crate::Key> = rows
        .first()
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default();
    let mut w = csv::Writer::from_writer(Vec::new());
    let err = |e: csv::Error| ShoalError::arg_error(format!("csv.stringify(): {e}"));
    if !header.is_empty() {
        w.write_record(header.iter().map(|k| k.as_bytes()))
            .map_err(err)?;
    }
    for r in &rows {
        let cells: Vec<String> = header
            .iter()
            .map(|k| match r.get(k) {
                None | Some(Value::Null) => String::new(),
                Some(Value::Str(s)) => s.to_string(),
                Some(other) => render::display(other),
            })
            .collect();
        w.write_record(&cells).map_err(err)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ShoalError::arg_error(format!("csv.stringify(): {e}")))?;
    Ok(Value::str(String::from_utf8_lossy(&bytes)))
}

fn nullary(ns: &str, member: &str, args: &Args) -> SResult<()> {
    if !args.pos.is_empty() || !args.named.is_empty() {
        return Err(ShoalError::arg_error(format!(
            "{ns}.{member}() takes no arguments"
        )));
    }
    Ok(())
}

fn num(args: &Args, i: usize, f: &str) -> SResult<f64> {
    match args.pos.get(i) {
        Some(Value::Int(n)) => Ok(*n as f64),
        Some(Value::Float(x)) => Ok(*x),
        Some(other) => Err(ShoalError::type_error(format!(
            "math.{f}() expects a number, got {}",
            other.type_name()
        ))),
        None => Err(ShoalError::arg_error(format!(
            "math.{f}() is missing an argument"
        ))),
    }
}

fn math(ns: &str, f: &str, args: &Args) -> SResult<Value> {
    if let Some((k, _)) = args.named.first() {
        return Err(ShoalError::arg_error(format!("unknown argument `{k}`")));
    }
    let unary: Option<fn(f64) -> f64> = match f {
        "sqrt" => Some(f64::sqrt),
        "cbrt" => Some(f64::cbrt),
        "sin" => Some(f64::sin),
        "cos" => Some(f64::cos),
        "tan" => Some(f64::tan),
        "asin" => Some(f64::asin),
        "acos" => Some(f64::acos),
        "atan" => Some(f64::atan),
        "ln" => Some(f64::ln),
        "log10" => Some(f64::log10),
        "log2" => Some(f64::log2),
        "exp" => Some(f64::exp),
        "floor" => Some(f64::floor),
        "ceil" => Some(f64::ceil),
        "round" => Some(f64::round),
        "trunc" => Some(f64::trunc),
        "abs" => Some(f64::abs),
        "sign" => Some(|x: f64| {
            if x.is_nan() {
                f64::NAN
            } else if x < 0.0 {
                -1.0
            } else {
                1.0
            }
        }),
        _ => None,
    };
    let arity_max = |n: usize| -> SResult<()> {
        if args.pos.len() > n {
            Err(ShoalError::arg_error(format!(
                "math.{f}() takes {n} argument(s), got {}",
                args.pos.len()
            )))
        } else {
            Ok(())
        }
    };
    if let Some(op) = unary {
        let x = num(args, 0, f)?;
        arity_max(1)?;
        return Ok(Value::Float(op(x)));
    }
    let r = match f {
        "atan2" => num(args, 0, f)?.atan2(num(args, 1, f)?),
        "log" => {
            let x = num(args, 0, f)?;
            x.log(num(args, 1, f)?)
        }
        "pow" => num(args, 0, f)?.powf(num(args, 1, f)?),
        "min" => num(args, 0, f)?.min(num(args, 1, f)?),
        "max" => num(args, 0, f)?.max(num(args, 1, f)?),
        "hypot" => num(args, 0, f)?.hypot(num(args, 1, f)?),
        "clamp" => {
            let (x, lo, hi) = (num(args, 0, f)?, num(args, 1, f)?, num(args, 2, f)?);
            if lo > hi || lo.is_nan() || hi.is_nan() {
                return Err(ShoalError::arg_error(format!(
                    "math.clamp(): lo ({}) > hi ({})",
                    render::float(lo),
                    render::float(hi)
                )));
            }
            arity_max(3)?;
            return Ok(Value::Float(x.clamp(lo, hi)));
        }
        _ => return Err(no_member(ns, f)),
    };
    arity_max(2)?;
    Ok(Value::Float(r))
}

fn os(host: &mut dyn Host, f: &str, args: &Args) -> SResult<Value> {
    let known = [
        "platform", "arch", "pid", "hostname", "username", "cpus", "uptime", "env",
    ];
    if !known.contains(&f) {
        return Err(no_member("os", f));
    }
    nullary("os", f, args)?;
    Ok(match f {
        "platform" => Value::str(match std::env::consts::OS {
            "macos" => "macos",
            other => other,
        }),
        "arch" => Value::str(std::env::consts::ARCH),
        "pid" => Value::Int(std::process::id() as i64),
        "hostname" => Value::str(hostname()),
        "username" => Value::str(username(host)),
        "cpus" => Value::Int(
            std::thread::available_parallelism()
                .map(|n| n.get() as i64)
                .unwrap_or(1),
        ),
        "uptime" => uptime().map(Value::Duration).unwrap_or(Value::Null),
        _ => Value::record(
            host.env_vars()
                .into_iter()
                .map(|(k, v)| (k.into(), Value::str(v)))
                .collect(),
        ),
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}

fn username(host: &dyn Host) -> String {
    for key in ["USER", "LOGNAME", "USERNAME"] {
        if let Some((_, v)) = host.env_vars().into_iter().find(|(k, _)| k == key) {
            if !v.is_empty() {
                return v;
            }
        }
        if let Ok(v) = std::env::var(key) {
            if !v.is_empty() {
                return v;
            }
        }
    }
    let uid = rustix::process::getuid().as_raw();
    if let Ok(passwd) = std::fs::read_to_string("/etc/passwd") {
        for line in passwd.lines() {
            let parts: Vec<&str> = line.split(':').collect();
            if parts.len() > 2 && parts[2] == uid.to_string() {
                return parts[0].to_string();
            }
        }
    }
    format!("uid{uid}")
}

fn uptime() -> Option<i64> {
    let s = std::fs::read_to_string("/proc/uptime").ok()?;
    let secs: f64 = s.split_whitespace().next()?.parse().ok()?;
    let ns = secs * 1e9;
    if ns.is_finite() && ns < 9.0e18 {
        Some(ns as i64)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    struct H(PathBuf);
    impl Host for H {
        fn call(&mut self, _f: &Value, _args: Vec<Value>) -> SResult<Value> {
            Err(ShoalError::type_error("no calls"))
        }
        fn cwd(&self) -> &Path {
            &self.0
        }
        fn env_vars(&self) -> Vec<(String, String)> {
            vec![("USER".into(), "me".into())]
        }
        fn config(&self) -> Record {
            Record::new()
        }
        fn check_interrupt(&self) -> SResult<()> {
            Ok(())
        }
    }

    fn c(ns: &str, m: &str, pos: Vec<Value>) -> String {
        let mut h = H(std::env::temp_dir());
        match call(&mut h, ns, m, Args { pos, named: vec![] }) {
            Ok(v) => render::inline(&v),
            Err(e) => format!("!{}", e.code),
        }
    }

    fn rec(pairs: &[(&str, Value)]) -> Value {
        Value::record(
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn namespaces() {
        let s = Value::str;
        let cases: Vec<(&str, &str, Vec<Value>, &str)> = vec![
            (
                "json",
                "parse",
                vec![s("{\"a\": {\"b\": 2}}")],
                "{a: {b: 2}}",
            ),
            ("json", "parse", vec![s("{not valid")], "!arg_error"),
            ("json", "parse", vec![Value::Int(5)], "!arg_error"),
            ("json", "parse", vec![], "!arg_error"),
            ("json", "stringify", vec![], "!arg_error"),
            ("yaml", "parse", vec![s("a: 1\nb: 2")], "{a: 1, b: 2}"),
            ("yaml", "parse", vec![s("- 1\n- 2")], "[1, 2]"),
            ("yaml", "parse", vec![s("a: [1, 2")], "!arg_error"),
            (
                "yaml",
                "stringify",
                vec![rec(&[("a", Value::Int(1))])],
                "\"a: 1\\n\"",
            ),
            ("toml", "parse", vec![s("[a]\nb = 1")], "{a: {b: 1}}"),
            ("toml", "parse", vec![s("not = = valid")], "!arg_error"),
            (
                "toml",
                "stringify",
                vec![Value::list(vec![Value::Int(1)])],
                "!arg_error",
            ),
            (
                "toml",
                "stringify",
                vec![rec(&[
                    ("t", rec(&[("x", Value::Int(1))])),
                    ("a", Value::list(vec![Value::Int(1), Value::Int(2)])),
                ])],
                "\"a = [1, 2]\\n\\n[t]\\nx = 1\\n\"",
            ),
            (
                "toml",
                "parse",
                vec![s("[[items]]\nname = \"x\"\n[[items]]\nname = \"y\"")],
                "{items: [{name: \"x\"}, {name: \"y\"}]}",
            ),
            ("csv", "parse", vec![s("a,b")], "[]"),
            ("csv", "parse", vec![s("a,b\n1")], "!arg_error"),
            (
                "csv",
                "parse",
                vec![s("a,b\n\"x,y\",2")],
                "[{a: \"x,y\", b: \"2\"}]",
            ),
            (
                "csv",
                "stringify",
                vec![Value::list(vec![rec(&[
                    ("a", s("1")),
                    ("b", Value::Int(2)),
                ])])],
                "\"a,b\\n1,2\\n\"",
            ),
            ("csv", "stringify", vec![Value::Int(1)], "!type_error"),
            ("math", "sqrt", vec![Value::Int(16)], "4"),
            (
                "math",
                "clamp",
                vec![Value::Int(5), Value::Int(10), Value::Int(0)],
                "!arg_error",
            ),
            ("math", "sign", vec![Value::Int(0)], "1"),
            ("math", "log", vec![Value::Int(8), Value::Int(2)], "3"),
            (
                "math",
                "atan2",
                vec![Value::Int(1), Value::Int(0)],
                "1.5707963267948966",
            ),
            ("math", "sqrt", vec![s("x")], "!type_error"),
            ("math", "sqrt", vec![], "!arg_error"),
            ("math", "frobnicate", vec![Value::Int(1)], "!field_missing"),
            ("math", "pi", vec![], "!field_missing"),
            ("os", "platform", vec![s("x")], "!arg_error"),
            ("os", "nope", vec![], "!field_missing"),
            ("config", "all", vec![], "{}"),
            (
                "toml",
                "stringify",
                vec![rec(&[
                    ("a", rec(&[("x", Value::Int(1))])),
                    ("b", Value::Int(2)),
                ])],
                "\"b = 2\\n\\n[a]\\nx = 1\\n\"",
            ),
            (
                "toml",
                "parse",
                vec![s("d = 1979-05-27T07:32:00Z")],
                "{d: \"1979-05-27T07:32:00Z\"}",
            ),
            ("config", "get", vec![s("render")], "null"),
        ];
        for (ns, m, pos, want) in cases {
            assert_eq!(c(ns, m, pos), want, "{ns}.{m}");
        }
        let mut h = H(std::env::temp_dir());
        assert_eq!(
            render::inline(&field(&mut h, "math", "pi").unwrap()),
            "3.141592653589793"
        );
        assert_eq!(
            field(&mut h, "json", "parse").unwrap_err().code,
            crate::ErrorCode::FieldMissing
        );
    }
}
