//! Reef tool environments, minimal (docs/rules.md §11): `.reef.toml`
//! manifests discovered by walking up from the cwd constrain which binary a
//! bare command head resolves to; `reef.lock` beside a manifest pins paths and
//! blake3 hashes. No provider is available here, so nothing is installed:
//! a constrained tool resolves through its lock entry (hash-checked), or, for
//! the `"*"` constraint, to the ambient binary; otherwise it is unresolved.

use std::path::{Path, PathBuf};

use shoal_base::lookup;
use shoal_value::{ErrorCode, ShoalError};

/// A parsed manifest.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    pub dir: PathBuf,
    pub tools: Vec<(String, String)>,
    pub runners: Vec<(String, String)>,
}

/// One `[tool.NAME]` entry of a `reef.lock`.
#[derive(Debug, Clone, Default)]
pub struct LockEntry {
    pub name: String,
    pub version: Option<String>,
    pub provider: Option<String>,
    pub path: Option<PathBuf>,
    pub blake3: Option<String>,
}

/// How a command name resolves.
#[derive(Debug, Clone)]
pub enum Resolution {
    /// Not constrained: the ambient `PATH` (maybe not found).
    Ambient(Option<PathBuf>),
    /// Constrained and resolved.
    Reef {
        path: PathBuf,
        constraint: String,
        lock: Option<LockEntry>,
    },
    /// Constrained but not resolvable: the error code to raise.
    Unresolved {
        code: ErrorCode,
        constraint: Option<String>,
        detail: String,
    },
}

fn provider_err(msg: impl Into<String>) -> ShoalError {
    ShoalError::new(ErrorCode::ReefProvider, msg)
}

/// Parse a manifest file.
pub fn parse_manifest(path: &Path) -> Result<Manifest, ShoalError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| provider_err(format!("reading manifest {}: {e}", path.display())))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| provider_err(format!("parsing manifest {}: {e}", path.display())))?;
    let mut m = Manifest {
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        ..Default::default()
    };
    for (key, out) in [("tools", &mut m.tools), ("runners", &mut m.runners)] {
        match table.get(key) {
            None => {}
            Some(toml::Value::Table(t)) => {
                for (k, v) in t {
                    let s = match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    out.push((k.clone(), s));
                }
            }
            Some(_) => {
                return Err(provider_err(format!(
                    "manifest {}: `{key}` is not a table",
                    path.display()
                )));
            }
        }
    }
    Ok(m)
}

/// Manifests from `cwd` up to the root, nearest first. Unparsable manifests
/// are skipped here (commands that edit them report the parse error).
pub fn manifests(cwd: &Path) -> Vec<Manifest> {
    let mut out = Vec::new();
    let mut d = Some(cwd);
    while let Some(dir) = d {
        let f = dir.join(".reef.toml");
        if f.is_file() {
            if let Ok(m) = parse_manifest(&f) {
                out.push(m);
            }
        }
        d = dir.parent();
    }
    out
}

/// The nearest manifest file, parsed or not.
pub fn nearest_manifest_file(cwd: &Path) -> Option<PathBuf> {
    let mut d = Some(cwd);
    while let Some(dir) = d {
        let f = dir.join(".reef.toml");
        if f.is_file() {
            return Some(f);
        }
        d = dir.parent();
    }
    None
}

/// The lock entries beside a manifest.
pub fn read_lock(dir: &Path) -> Vec<LockEntry> {
    let Ok(text) = std::fs::read_to_string(dir.join("reef.lock")) else {
        return Vec::new();
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(toml::Value::Table(tools)) = table.get("tool") {
        for (name, v) in tools {
            let toml::Value::Table(t) = v else { continue };
            let s = |k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
            out.push(LockEntry {
                name: s("name").unwrap_or_else(|| name.clone()),
                version: s("version"),
                provider: s("provider"),
                path: s("path").map(PathBuf::from),
                blake3: s("blake3"),
            });
        }
    }
    out
}

/// blake3 hex of a file.
pub fn hash_file(p: &Path) -> Option<String> {
    let bytes = std::fs::read(p).ok()?;
    Some(blake3::hash(&bytes).to_hex().to_string())
}

/// Does the file at `path` match the locked hash?
pub fn lock_matches(entry: &LockEntry) -> bool {
    match (&entry.path, &entry.blake3) {
        (Some(p), Some(h)) => match hash_file(p) {
            Some(actual) => !h.is_empty() && actual.starts_with(h.as_str()),
            None => false,
        },
        _ => false,
    }
}

/// Which runner a manifest assigns to a script extension.
pub fn runner_for_ext(cwd: &Path, ext: &str) -> Option<String> {
    manifests(cwd).into_iter().find_map(|m| {
        m.runners
            .into_iter()
            .find(|(k, _)| k == ext)
            .map(|(_, v)| v)
    })
}

/// Resolve `name` under the dynamic constraints (innermost `with reef:`
/// first) and the manifests above `cwd`.
pub fn resolve(
    name: &str,
    cwd: &Path,
    path_var: Option<&str>,
    dynamic: &[Vec<(String, String)>],
) -> Resolution {
    let ambient = || lookup::find_program(name, path_var, cwd);
    let dyn_constraint = dynamic.iter().rev().find_map(|scope| {
        scope
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    });
    let ms = manifests(cwd);
    let (constraint, lock_dir) = match dyn_constraint {
        Some(c) => (c, None),
        None => {
            let hits: Vec<(String, PathBuf)> = ms
                .iter()
                .filter_map(|m| {
                    m.tools
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| (v.clone(), m.dir.clone()))
                })
                .collect();
            let Some((first, dir)) = hits.first().cloned() else {
                return Resolution::Ambient(ambient());
            };
            if hits.iter().any(|(c, _)| *c != first) {
                let all: Vec<String> = hits
                    .iter()
                    .map(|(c, d)| format!("{c:?} in {}", d.display()))
                    .collect();
                return Resolution::Unresolved {
                    code: ErrorCode::ReefConflict,
                    constraint: Some(first),
                    detail: format!("`{name}` has conflicting constraints: {}", all.join(", ")),
                };
            }
            (first, Some(dir))
        }
    };
    if let Some(dir) = &lock_dir {
        if let Some(entry) = read_lock(dir).into_iter().find(|e| e.name == name) {
            if lock_matches(&entry) {
                let path = entry.path.clone().unwrap_or_default();
                return Resolution::Reef {
                    path,
                    constraint,
                    lock: Some(entry),
                };
            }
            return Resolution::Unresolved {
                code: ErrorCode::ReefDrift,
                constraint: Some(constraint),
                detail: format!("`{name}` no longer matches its reef.lock hash"),
            };
        }
    }
    if constraint == "*" {
        if let Some(p) = ambient() {
            return Resolution::Reef {
                path: p,
                constraint,
                lock: None,
            };
        }
        return Resolution::Unresolved {
            code: ErrorCode::ReefNotFound,
            constraint: Some(constraint),
            detail: format!("`{name}` is constrained but not installed"),
        };
    }
    Resolution::Unresolved {
        code: ErrorCode::ReefUnlocked,
        constraint: Some(constraint.clone()),
        detail: format!(
            "`{name}` is constrained to {constraint:?} but not locked; run `reef lock`"
        ),
    }
}

/// The `which` scope label of a resolution.
pub fn scope_label(r: &Resolution) -> String {
    match r {
        Resolution::Ambient(_) => "ambient".into(),
        Resolution::Reef { .. } => "reef".into(),
        Resolution::Unresolved { code, .. } => format!("unresolved: {}", code.as_str()),
    }
}

/// Validate a `TOOL@VERSION` spec.
pub fn parse_spec(spec: &str) -> Result<(String, String), ShoalError> {
    match spec.split_once('@') {
        Some((t, v)) if !t.is_empty() && !v.is_empty() => Ok((t.to_string(), v.to_string())),
        _ => Err(ShoalError::arg_error(format!(
            "reef add expects TOOL@VERSION, found `{spec}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(
            root.join(".reef.toml"),
            "[tools]\nsh = \"*\"\nfake = \"18\"\n",
        )
        .unwrap();
        let path = Some("/bin:/usr/bin");
        assert!(matches!(
            resolve("sh", &root.join("sub"), path, &[]),
            Resolution::Reef { .. }
        ));
        assert!(matches!(
            resolve("ls", root, path, &[]),
            Resolution::Ambient(Some(_))
        ));
        assert!(matches!(
            resolve("fake", root, path, &[]),
            Resolution::Unresolved {
                code: ErrorCode::ReefUnlocked,
                ..
            }
        ));
        std::fs::write(root.join("sub/.reef.toml"), "[tools]\nfake = \"22\"\n").unwrap();
        assert!(matches!(
            resolve("fake", &root.join("sub"), path, &[]),
            Resolution::Unresolved {
                code: ErrorCode::ReefConflict,
                ..
            }
        ));
        std::fs::write(root.join("bin"), "x").unwrap();
        let h = hash_file(&root.join("bin")).unwrap();
        std::fs::write(
            root.join("reef.lock"),
            format!(
                "[tool.fake]\nname = \"fake\"\npath = \"{}\"\nblake3 = \"{h}\"\n",
                root.join("bin").display()
            ),
        )
        .unwrap();
        assert!(matches!(
            resolve("fake", root, path, &[]),
            Resolution::Reef { .. }
        ));
        std::fs::write(root.join("bin"), "changed").unwrap();
        assert!(matches!(
            resolve("fake", root, path, &[]),
            Resolution::Unresolved {
                code: ErrorCode::ReefDrift,
                ..
            }
        ));
        let dynamic = vec![vec![("zz-tool".to_string(), "1".to_string())]];
        assert!(matches!(
            resolve("zz-tool", root, path, &dynamic),
            Resolution::Unresolved {
                code: ErrorCode::ReefUnlocked,
                ..
            }
        ));
        assert!(parse_spec("a@1").is_ok());
        assert!(parse_spec("a@").is_err());
        assert!(parse_spec("@1").is_err());
    }
}
