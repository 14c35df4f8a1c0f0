//! Effect templates (`fs.read(cwd)`, `fs.read($paths|cwd)`,
//! `net.connect($remote|origin)`, `net.connect(@kube)`) and their expansion
//! into the concrete effects the planner checks against a policy
//! (docs/rules.md §21 vocabulary, JSON `{"kind": snake_case, ...}`).

use std::path::{Path, PathBuf};

/// A concrete effect: the policy's own vocabulary.
pub use shoal_policy::Effect;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    FsRead,
    FsWrite,
    FsDelete,
    NetConnect,
    ProcSpawn,
    EnvRead,
}

const KINDS: &[(&str, Kind)] = &[
    ("fs.read", Kind::FsRead),
    ("fs.write", Kind::FsWrite),
    ("fs.delete", Kind::FsDelete),
    ("net.connect", Kind::NetConnect),
    ("proc.spawn", Kind::ProcSpawn),
    ("env.read", Kind::EnvRead),
];

/// The argument of a template.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A literal: `cwd`, `cwd/.git`, `~/.kube/config`, `/etc/x`,
    /// `crates.io:443`, `@docker`, `test-binaries`.
    Lit(String),
    /// `$name`, with an optional literal used when it is unbound.
    Var { name: String, or: Option<String> },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    pub kind: Kind,
    pub arg: Arg,
    pub text: String,
}

impl Template {
    pub fn parse(s: &str) -> Result<Template, String> {
        let bad = || format!("bad effect template `{s}` (expected e.g. `fs.read(cwd)`)");
        let open = s.find('(').ok_or_else(bad)?;
        let inner = s[open + 1..].strip_suffix(')').ok_or_else(bad)?.trim();
        let kname = s[..open].trim();
        let kind = KINDS
            .iter()
            .find(|(n, _)| *n == kname)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                format!(
                    "unknown effect `{kname}` (one of {})",
                    KINDS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                )
            })?;
        if inner.is_empty() || inner.contains(['(', ')', ',', ' ']) {
            return Err(bad());
        }
        let arg = match inner.strip_prefix('$') {
            Some(v) => {
                let (name, or) = match v.split_once('|') {
                    Some((n, o)) => (n, Some(o.to_string())),
                    None => (v, None),
                };
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(bad());
                }
                Arg::Var {
                    name: name.to_string(),
                    or,
                }
            }
            None => {
                if let Some(e) = inner.strip_prefix('@') {
                    if !matches!(e, "docker" | "kube") {
                        return Err(format!("unknown endpoint `@{e}` (one of @docker, @kube)"));
                    }
                    if kind != Kind::NetConnect {
                        return Err(format!("`@{e}` is an endpoint for net.connect"));
                    }
                }
                if kind == Kind::NetConnect && !inner.starts_with('@') {
                    split_host_port(inner).ok_or_else(|| format!("`{inner}` is not host:port"))?;
                }
                Arg::Lit(inner.to_string())
            }
        };
        Ok(Template {
            kind,
            arg,
            text: s.to_string(),
        })
    }

    /// The variables the template reads.
    pub fn vars(&self) -> Option<&str> {
        match &self.arg {
            Arg::Var { name, .. } => Some(name),
            Arg::Lit(_) => None,
        }
    }
}

/// What expansion needs to know about the invocation.
pub struct Scope<'a> {
    pub cwd: &'a Path,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Values bound to positional, flag and parameter names.
    pub bound: &'a dyn Fn(&str) -> Vec<String>,
}

impl Scope<'_> {
    fn home(&self) -> Option<PathBuf> {
        (self.env)("HOME").map(PathBuf::from)
    }

    fn path(&self, s: &str) -> String {
        let p = if s == "cwd" {
            self.cwd.to_path_buf()
        } else if let Some(rest) = s.strip_prefix("cwd/") {
            self.cwd.join(rest)
        } else if s == "gitdir" || s.starts_with("gitdir/") {
            let gd = git_dir(self.cwd).unwrap_or_else(|| self.cwd.join(".git"));
            match s.strip_prefix("gitdir/") {
                Some(rest) => gd.join(rest),
                None => gd,
            }
        } else if s == "~" {
            self.home().unwrap_or_else(|| PathBuf::from("~"))
        } else if let Some(rest) = s.strip_prefix("~/") {
            match self.home() {
                Some(h) => h.join(rest),
                None => PathBuf::from(s),
            }
        } else {
            self.cwd.join(s)
        };
        p.to_string_lossy().into_owned()
    }
}

/// Expand `templates` into concrete effects, de-duplicated in order.
pub fn expand(templates: &[Template], sc: &Scope) -> Vec<Effect> {
    let mut out: Vec<Effect> = Vec::new();
    let push = |e: Effect, out: &mut Vec<Effect>| {
        if !out.contains(&e) {
            out.push(e);
        }
    };
    for t in templates {
        let values: Vec<String> = match &t.arg {
            Arg::Lit(s) => vec![s.clone()],
            Arg::Var { name, or } => {
                let v = (sc.bound)(name);
                match (v.is_empty(), or) {
                    (false, _) => v,
                    (true, Some(o)) => vec![o.clone()],
                    (true, None) => Vec::new(),
                }
            }
        };
        if values.is_empty() {
            continue;
        }
        match t.kind {
            Kind::FsRead | Kind::FsWrite | Kind::FsDelete => {
                let paths: Vec<String> = values.iter().map(|v| sc.path(v)).collect();
                push(
                    match t.kind {
                        Kind::FsRead => Effect::FsRead { paths },
                        Kind::FsWrite => Effect::FsWrite { paths },
                        _ => Effect::FsDelete { paths },
                    },
                    &mut out,
                );
            }
            Kind::NetConnect => {
                for v in &values {
                    for e in endpoint(v, sc) {
                        push(e, &mut out);
                    }
                }
            }
            Kind::ProcSpawn => {
                for v in values {
                    let argv0 = if v.starts_with("cwd") || v.starts_with('~') {
                        sc.path(&v)
                    } else {
                        v
                    };
                    push(
                        Effect::ProcSpawn {
                            bin_hash: String::new(),
                            argv0,
                        },
                        &mut out,
                    );
                }
            }
            Kind::EnvRead => push(Effect::EnvRead { names: values }, &mut out),
        }
    }
    out
}

fn split_host_port(s: &str) -> Option<(String, u16)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once("]:")?;
        return Some((h.to_string(), p.parse().ok()?));
    }
    let (h, p) = s.rsplit_once(':')?;
    if h.is_empty() || h.contains(':') {
        return None;
    }
    Some((h.to_string(), p.parse().ok()?))
}

/// The endpoint of a URL, scp-like address, `host:port`, git remote name or
/// named endpoint. A local path is a write to that path.
fn endpoint(v: &str, sc: &Scope) -> Vec<Effect> {
    match v {
        "@docker" => return vec![docker(sc)],
        "@kube" => return vec![kube(sc)],
        _ => {}
    }
    if let Some(e) = url_endpoint(v, sc) {
        return vec![e];
    }
    if let Some((host, port)) = split_host_port(v) {
        return vec![Effect::NetConnect { host, port }];
    }
    // A git remote name: its configured URL(s).
    let urls = git_remote_urls(sc.cwd, v);
    if !urls.is_empty() {
        return urls.iter().filter_map(|u| url_endpoint(u, sc)).collect();
    }
    if v.contains('.') && !v.contains('/') {
        return vec![Effect::NetConnect {
            host: v.to_string(),
            port: 443,
        }];
    }
    vec![Effect::NetConnect {
        host: "*".into(),
        port: 443,
    }]
}

fn url_endpoint(u: &str, sc: &Scope) -> Option<Effect> {
    if let Some((scheme, rest)) = u.split_once("://") {
        if scheme == "file" {
            return Some(Effect::FsWrite {
                paths: vec![sc.path(rest)],
            });
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let hostport = authority.rsplit_once('@').map(|x| x.1).unwrap_or(authority);
        let default = match scheme {
            "http" | "ws" => 80,
            "ssh" | "git+ssh" | "sftp" => 22,
            "git" => 9418,
            "ftp" => 21,
            _ => 443,
        };
        let (host, port) = split_host_port(hostport).unwrap_or((hostport.to_string(), default));
        if host.is_empty() {
            return None;
        }
        return Some(Effect::NetConnect { host, port });
    }
    if u.starts_with('/') || u.starts_with("./") || u.starts_with("../") {
        return Some(Effect::FsWrite {
            paths: vec![sc.path(u)],
        });
    }
    // scp-like `user@host:path`
    if let Some((left, _path)) = u.split_once(':') {
        if let Some((_, host)) = left.rsplit_once('@') {
            if !host.is_empty() && !host.contains('/') {
                return Some(Effect::NetConnect {
                    host: host.to_string(),
                    port: 22,
                });
            }
        }
    }
    None
}

fn docker(sc: &Scope) -> Effect {
    let host = (sc.env)("DOCKER_HOST").unwrap_or_else(|| "unix:///var/run/docker.sock".into());
    match host.strip_prefix("unix://") {
        Some(p) => Effect::FsWrite {
            paths: vec![p.to_string()],
        },
        None => {
            let h = host.replace("tcp://", "https://");
            url_endpoint(&h, sc).unwrap_or(Effect::NetConnect {
                host: "*".into(),
                port: 2376,
            })
        }
    }
}

/// The API server of the current kubeconfig context.
fn kube(sc: &Scope) -> Effect {
    let unknown = Effect::NetConnect {
        host: "*".into(),
        port: 6443,
    };
    let file = match (sc.env)("KUBECONFIG") {
        Some(k) => PathBuf::from(k.split(':').next().unwrap_or_default()),
        None => match sc.home() {
            Some(h) => h.join(".kube/config"),
            None => return unknown,
        },
    };
    let Some(text) = read_small(&file) else {
        return unknown;
    };
    let Ok(doc) = serde_norway::from_str::<serde_norway::Value>(&text) else {
        return unknown;
    };
    let current = doc.get("current-context").and_then(|c| c.as_str());
    let find = |list: &str, name: Option<&str>| -> Option<serde_norway::Value> {
        doc.get(list)?
            .as_sequence()?
            .iter()
            .find(|e| e.get("name").and_then(|n| n.as_str()) == name)
            .cloned()
    };
    let cluster = find("contexts", current).and_then(|c| {
        c.get("context")?
            .get("cluster")?
            .as_str()
            .map(str::to_string)
    });
    let server = find("clusters", cluster.as_deref()).and_then(|c| {
        c.get("cluster")?
            .get("server")?
            .as_str()
            .map(str::to_string)
    });
    server.and_then(|s| url_endpoint(&s, sc)).unwrap_or(unknown)
}

/// A config file of at most 1 MiB, or nothing (also when the principal
/// planning may not read it).
fn read_small(p: &Path) -> Option<String> {
    use std::io::Read;
    if !shoal_policy::run_gate::may_read(p) {
        return None;
    }
    let f = std::fs::File::open(p).ok()?;
    let mut s = String::new();
    f.take(1 << 20).read_to_string(&mut s).ok()?;
    Some(s)
}

/// The `.git` directory of the repository around `cwd` (a worktree's own
/// git directory for a linked worktree).
fn git_dir(cwd: &Path) -> Option<PathBuf> {
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        let dotgit = d.join(".git");
        if !shoal_policy::run_gate::may_read(&dotgit) {
            // Not looked at (its existence is a read of it): no repository known.
            return None;
        }
        match std::fs::symlink_metadata(&dotgit) {
            Ok(m) if m.is_dir() => return Some(dotgit),
            Ok(m) if m.is_file() => {
                let text = read_small(&dotgit)?;
                let gd = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
                return Some(if gd.is_absolute() { gd } else { d.join(gd) });
            }
            _ => dir = d.parent(),
        }
    }
    None
}

/// The git directory holding the config of the repository around `cwd`.
fn git_config_file(cwd: &Path) -> Option<PathBuf> {
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        let dotgit = d.join(".git");
        if !shoal_policy::run_gate::may_read(&dotgit) {
            return None;
        }
        let meta = std::fs::symlink_metadata(&dotgit).ok();
        match meta {
            Some(m) if m.is_dir() => return Some(dotgit.join("config")),
            Some(m) if m.is_file() => {
                // A worktree: `gitdir: PATH`, whose `commondir` holds the config.
                let text = read_small(&dotgit)?;
                let gd = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
                let gd = if gd.is_absolute() { gd } else { d.join(gd) };
                let common = read_small(&gd.join("commondir"))
                    .map(|c| {
                        let c = PathBuf::from(c.trim());
                        if c.is_absolute() {
                            c
                        } else {
                            gd.join(c)
                        }
                    })
                    .unwrap_or(gd);
                return Some(common.join("config"));
            }
            _ => dir = d.parent(),
        }
    }
    None
}

/// `remote.NAME.url` (and `pushurl`) from the repository's config.
pub fn git_remote_urls(cwd: &Path, name: &str) -> Vec<String> {
    let Some(text) = git_config_file(cwd).and_then(|f| read_small(&f)) else {
        return Vec::new();
    };
    let want = format!("[remote \"{name}\"]");
    let mut inside = false;
    let mut urls = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = t == want;
            continue;
        }
        if inside {
            if let Some((k, v)) = t.split_once('=') {
                let k = k.trim();
                if k.eq_ignore_ascii_case("url") || k.eq_ignore_ascii_case("pushurl") {
                    let v = v.trim().trim_matches('"').to_string();
                    if !urls.contains(&v) {
                        urls.push(v);
                    }
                }
            }
        }
    }
    urls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse() {
        assert!(Template::parse("fs.read(cwd)").is_ok());
        assert!(Template::parse("net.connect(crates.io:443)").is_ok());
        assert!(Template::parse("net.connect($remote|origin)").is_ok());
        assert!(Template::parse("net.connect(@kube)").is_ok());
        assert!(Template::parse("fs.frob(cwd)").is_err());
        assert!(Template::parse("fs.read(cwd").is_err());
        assert!(Template::parse("net.connect(crates.io)").is_err());
        assert!(Template::parse("fs.read(@kube)").is_err());
    }

    #[test]
    fn urls_and_scp_addresses() {
        let cwd = Path::new("/w");
        let env = |_: &str| None;
        let bound = |_: &str| Vec::new();
        let sc = Scope {
            cwd,
            env: &env,
            bound: &bound,
        };
        let nc = |h: &str, p: u16| Effect::NetConnect {
            host: h.into(),
            port: p,
        };
        assert_eq!(
            endpoint("https://github.com/a/b.git", &sc),
            [nc("github.com", 443)]
        );
        assert_eq!(
            endpoint("git@github.com:a/b.git", &sc),
            [nc("github.com", 22)]
        );
        assert_eq!(endpoint("ssh://git@host:2222/x", &sc), [nc("host", 2222)]);
        assert_eq!(
            endpoint("http://localhost:8080/x", &sc),
            [nc("localhost", 8080)]
        );
        assert_eq!(
            endpoint("../bare.git", &sc),
            [Effect::FsWrite {
                paths: vec!["/w/../bare.git".into()]
            }]
        );
        assert_eq!(endpoint("nowhere", &sc), [nc("*", 443)]);
    }
}
