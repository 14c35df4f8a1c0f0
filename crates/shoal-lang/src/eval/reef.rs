//! The `reef` command, `which` resolution records and the constraint check
//! on spawns (docs/rules.md §11, minimal: no tool providers).

use std::path::PathBuf;
use std::sync::Arc;

use crate::eval::{EResult, Interp};
use crate::shell::reef::{self, Resolution};
use shoal_value::{ErrorCode, Outcome, Record, ShoalError, Value};

fn table(rows: Vec<Record>) -> Value {
    Value::Table(Arc::new(rows.into_iter().map(Arc::new).collect()))
}

fn opt_str(s: Option<&String>) -> Value {
    s.map(Value::str).unwrap_or(Value::Null)
}

fn wrap(head: &str, out: Value) -> Value {
    Value::Outcome(Arc::new(Outcome {
        status: Some(0),
        ok: true,
        signal: None,
        dur_ns: 0,
        pid: 0,
        cmd: head.to_string(),
        stdout: shoal_value::OutputBytes::from(shoal_value::render::redirect_bytes(&out)),
        stderr: shoal_value::OutputBytes::empty(),
        out: Some(out),
        span: None,
        truncated: false,
        typed: None,
    }))
}

impl Interp {
    pub(crate) fn resolve_tool(&self, name: &str) -> Resolution {
        reef::resolve(
            name,
            &self.cwd,
            self.env.get("PATH").map(|s| s.as_str()),
            &self.reef_stack,
        )
    }

    /// The program a bare external head spawns, honouring reef constraints.
    pub(crate) fn program_for(
        &self,
        name: &str,
        path_var: Option<&str>,
    ) -> Result<Option<PathBuf>, ShoalError> {
        match reef::resolve(name, &self.cwd, path_var, &self.reef_stack) {
            Resolution::Ambient(p) => Ok(p),
            Resolution::Reef { path, .. } => Ok(Some(path)),
            Resolution::Unresolved { code, detail, .. } => Err(ShoalError::new(code, detail)),
        }
    }

    /// The `which` record of a name (`null` when not found anywhere).
    pub(crate) fn which_value(&self, name: &str) -> Value {
        let r = self.resolve_tool(name);
        let mut rec = Record::new();
        rec.insert("name".into(), Value::str(name));
        rec.insert("scope".into(), Value::str(reef::scope_label(&r)));
        let (constraint, version, path, hash8, provider) = match &r {
            Resolution::Ambient(None) => return Value::Null,
            Resolution::Ambient(Some(p)) => (None, None, Some(p.clone()), None, None),
            Resolution::Reef {
                path,
                constraint,
                lock,
            } => (
                Some(constraint.clone()),
                lock.as_ref().and_then(|l| l.version.clone()),
                Some(path.clone()),
                reef::hash_file(path).map(|h| h[..8].to_string()),
                lock.as_ref().and_then(|l| l.provider.clone()),
            ),
            Resolution::Unresolved { constraint, .. } => {
                (constraint.clone(), None, None, None, None)
            }
        };
        rec.insert("constraint".into(), opt_str(constraint.as_ref()));
        rec.insert("version".into(), opt_str(version.as_ref()));
        rec.insert("path".into(), path.map(Value::path).unwrap_or(Value::Null));
        rec.insert("hash8".into(), opt_str(hash8.as_ref()));
        rec.insert("provider".into(), opt_str(provider.as_ref()));
        rec.insert("chain".into(), Value::list(vec![]));
        Value::record(rec)
    }

    /// The `session.reef` snapshot.
    pub fn reef_snapshot(&self) -> serde_json::Value {
        let ms = reef::manifests(&self.cwd);
        let active = ms
            .first()
            .map(|m| m.dir.join(".reef.toml").to_string_lossy().into_owned());
        let mut names: Vec<String> = Vec::new();
        for scope in self.reef_stack.iter().rev() {
            names.extend(scope.iter().map(|(k, _)| k.clone()));
        }
        for m in &ms {
            names.extend(m.tools.iter().map(|(k, _)| k.clone()));
        }
        let mut seen = std::collections::HashSet::new();
        let mut bindings = Vec::new();
        for n in names {
            if !seen.insert(n.clone()) {
                continue;
            }
            let r = self.resolve_tool(&n);
            let (version, provider) = match &r {
                Resolution::Reef { lock: Some(l), .. } => (l.version.clone(), l.provider.clone()),
                _ => (None, None),
            };
            bindings.push(serde_json::json!({
                "tool": n,
                "version": version,
                "provider": provider,
                "scope": reef::scope_label(&r),
                "constrained": true,
            }));
        }
        serde_json::json!({ "active_scope": active, "bindings": bindings })
    }

    /// `which [-a] NAME`.
    pub(crate) fn which_cmd(&self, vals: Vec<Value>, all: bool) -> EResult<Value> {
        let names: Vec<String> = vals
            .iter()
            .filter_map(|v| match v {
                Value::Str(s) if !s.starts_with('-') => Some(s.to_string()),
                Value::Path(p) => Some(p.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        if names.len() != 1 {
            return Err(ShoalError::arg_error("which expects exactly one name").into());
        }
        let name = &names[0];
        let out = if all {
            let mut rows = Vec::new();
            let path_var = self.env.get("PATH").cloned().unwrap_or_default();
            for dir in path_var.split(':') {
                if let Some(p) = shoal_base::lookup::find_program(name, Some(dir), &self.cwd) {
                    if let Value::Record(r) =
                        &crate::shell::builtins::which_record(name, Some(&p), "ambient")
                    {
                        rows.push(r.as_ref().clone());
                    }
                }
            }
            table(rows)
        } else {
            self.which_value(name)
        };
        Ok(wrap("which", out))
    }

    /// `reef [add SPEC | lock [--refresh] | fetch TOOL | doctor]`.
    pub(crate) fn reef_cmd(&mut self, args: Vec<Value>) -> EResult<Value> {
        let words: Vec<String> = args
            .iter()
            .map(|v| match v {
                Value::Str(s) => s.to_string(),
                other => shoal_value::render::display(other),
            })
            .collect();
        let sub = words.first().cloned().unwrap_or_default();
        let not_found = || {
            ShoalError::new(
                ErrorCode::ReefNotFound,
                format!(
                    "no .reef.toml found in {} or its parents",
                    self.cwd.display()
                ),
            )
        };
        match sub.as_str() {
            "" | "status" | "list" => {
                let mut rows = Vec::new();
                let mut seen = std::collections::HashSet::new();
                let mut names: Vec<String> = Vec::new();
                for scope in self.reef_stack.iter().rev() {
                    names.extend(scope.iter().map(|(k, _)| k.clone()));
                }
                for m in reef::manifests(&self.cwd) {
                    names.extend(m.tools.iter().map(|(k, _)| k.clone()));
                }
                for n in names {
                    if !seen.insert(n.clone()) {
                        continue;
                    }
                    if let Value::Record(r) = &self.which_value(&n) {
                        rows.push(r.as_ref().clone());
                    } else {
                        let mut r = Record::new();
                        r.insert("name".into(), Value::str(&n));
                        r.insert("scope".into(), Value::str("unresolved: reef_not_found"));
                        rows.push(r);
                    }
                }
                Ok(wrap("reef", table(rows)))
            }
            "add" => {
                let spec = words
                    .get(1)
                    .ok_or_else(|| ShoalError::arg_error("reef add expects TOOL@VERSION"))?;
                reef::parse_spec(spec)?;
                let file = reef::nearest_manifest_file(&self.cwd).ok_or_else(not_found)?;
                reef::parse_manifest(&file)?;
                Err(ShoalError::new(
                    ErrorCode::ReefProvider,
                    format!("reef add {spec}: no tool provider is available"),
                )
                .into())
            }
            "lock" | "fetch" => {
                let file = reef::nearest_manifest_file(&self.cwd).ok_or_else(not_found)?;
                reef::parse_manifest(&file)?;
                Err(ShoalError::new(
                    ErrorCode::ReefProvider,
                    format!("reef {sub}: no tool provider is available"),
                )
                .into())
            }
            "doctor" => {
                let ms = reef::manifests(&self.cwd);
                if ms.is_empty() {
                    return Err(not_found().into());
                }
                let mut rows = Vec::new();
                let row = |check: &str, status: &str, name: &str, detail: String| {
                    let mut r = Record::new();
                    r.insert("check".into(), Value::str(check));
                    r.insert("status".into(), Value::str(status));
                    r.insert("name".into(), Value::str(name));
                    r.insert("detail".into(), Value::str(detail));
                    r
                };
                let path_var = self.env.get("PATH").cloned();
                for m in &ms {
                    for e in reef::read_lock(&m.dir) {
                        let ok = reef::lock_matches(&e);
                        let p = e
                            .path
                            .as_ref()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default();
                        rows.push(row(
                            "lock_hash",
                            if ok { "ok" } else { "drift" },
                            &e.name,
                            if ok {
                                format!("{p} matches reef.lock")
                            } else {
                                format!("{p} does not match reef.lock")
                            },
                        ));
                        if let Some(amb) = shoal_base::lookup::find_program(
                            &e.name,
                            path_var.as_deref(),
                            &self.cwd,
                        ) {
                            if Some(&amb) != e.path.as_ref() {
                                rows.push(row(
                                    "shadowed_ambient",
                                    "warn",
                                    &e.name,
                                    format!(
                                        "ambient {} is shadowed by the locked {p}",
                                        amb.display()
                                    ),
                                ));
                            }
                        }
                    }
                    for (t, c) in &m.tools {
                        if let Resolution::Unresolved { code, detail, .. } = self.resolve_tool(t) {
                            if code != ErrorCode::ReefDrift {
                                let _ = c;
                                rows.push(row("resolve", code.as_str(), t, detail));
                            }
                        }
                    }
                }
                Ok(wrap("reef", table(rows)))
            }
            other => Err(
                ShoalError::arg_error(format!("reef: unknown subcommand `{other}`"))
                    .with_hint("reef [add TOOL@VER | lock [--refresh] | fetch TOOL | doctor]")
                    .into(),
            ),
        }
    }
}
