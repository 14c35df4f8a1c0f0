//! Bearer tokens (docs/rules.md §21): stored as keyed
//! BLAKE3 digests in a 0600 file of the state dir, opened without following
//! symlinks. The daemon re-reads the file when it changes, so a revoke takes
//! effect on the next call, without a restart; [`Store::standing`] tells it which
//! principals still hold a valid token (the others' work is ended) and when the
//! next one expires.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use base64::Engine;
use serde::{Deserialize, Serialize};

use shoal_base::sync::Locked;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub id: String,
    pub principal: String,
    pub created_ns: i64,
    pub expires_ns: Option<i64>,
    pub revoked_ns: Option<i64>,
    pub digest: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct File {
    version: u32,
    /// Standard base64 of the 32-byte digest key.
    key: String,
    tokens: Vec<Entry>,
}

type Stamp = (u64, u64, i64, i64, u64);

/// Told when [`Store::validate`] finds the file changed and reads it again.
type OnReload = Box<dyn Fn() + Send + Sync>;

pub struct Store {
    path: PathBuf,
    cache: Mutex<Option<(Stamp, File)>>,
    on_reload: OnceLock<OnReload>,
}

/// The principals that hold a valid (unrevoked, unexpired) token at one
/// moment, and when the first of those tokens expires.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Standing {
    pub valid: BTreeSet<String>,
    pub next_expiry_ns: Option<i64>,
}

impl Standing {
    fn of(file: Option<&File>, now: i64) -> Standing {
        let mut s = Standing::default();
        for t in file.map(|f| f.tokens.as_slice()).unwrap_or_default() {
            if t.revoked_ns.is_some() || t.expires_ns.is_some_and(|e| e <= now) {
                continue;
            }
            s.valid.insert(t.principal.clone());
            if let Some(e) = t.expires_ns {
                s.next_expiry_ns = Some(s.next_expiry_ns.map_or(e, |n| n.min(e)));
            }
        }
        s
    }
}

/// Largest token file accepted (a bound on what the daemon reads).
const MAX_FILE: u64 = 4 << 20;

fn now_ns() -> i64 {
    shoal_base::now_ns()
}

/// 32 bytes from the OS's random source (`getrandom(2)`).
fn random32() -> Result<[u8; 32], String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| format!("no random bytes from the OS: {e}"))?;
    Ok(b)
}

fn digest(key: &[u8; 32], bearer: &str) -> String {
    blake3::keyed_hash(key, bearer.as_bytes())
        .to_hex()
        .to_string()
}

fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl File {
    fn key(&self) -> Result<[u8; 32], String> {
        let k = base64::engine::general_purpose::STANDARD
            .decode(&self.key)
            .map_err(|e| format!("token store key: {e}"))?;
        k.try_into()
            .map_err(|_| "token store key is not 32 bytes".to_string())
    }
}

impl Store {
    pub fn new(path: PathBuf) -> Store {
        Store {
            path,
            cache: Mutex::new(None),
            on_reload: OnceLock::new(),
        }
    }

    /// Call `f` (once set, for good) each time [`Store::validate`] reads the
    /// file again because it changed: the daemon then checks who still holds
    /// a valid token ([`Store::standing`]).
    pub fn on_reload(&self, f: OnReload) {
        let _ = self.on_reload.set(f);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read the file (`None` when it does not exist). Refuses symlinks,
    /// other owners and oversized files; a wrong mode is repaired.
    fn read(&self) -> Result<Option<(Stamp, File)>, String> {
        let f = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", self.path.display())),
        };
        let md = f
            .metadata()
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        if !md.is_file() || md.uid() != shoal_base::paths::euid() {
            return Err(format!(
                "{}: not a regular file owned by this user",
                self.path.display()
            ));
        }
        if md.len() > MAX_FILE {
            return Err(format!("{}: larger than 4 MiB", self.path.display()));
        }
        if md.mode() & 0o077 != 0 {
            let _ = f.set_permissions(std::fs::Permissions::from_mode(0o600));
        }
        let stamp = (md.dev(), md.ino(), md.mtime(), md.mtime_nsec(), md.len());
        let mut text = String::new();
        f.take(MAX_FILE)
            .read_to_string(&mut text)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        let file: File =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", self.path.display()))?;
        Ok(Some((stamp, file)))
    }

    fn stamp(&self) -> Option<Stamp> {
        let md = std::fs::symlink_metadata(&self.path).ok()?;
        Some((md.dev(), md.ino(), md.mtime(), md.mtime_nsec(), md.len()))
    }

    /// Read the file again into `cache` when it changed (a file that cannot
    /// be read leaves no tokens: every bearer is refused). `Err` with the
    /// reason when it could not be read; `Ok(true)` when what it holds now
    /// came from another version of the file than before.
    fn refresh(&self, cache: &mut Option<(Stamp, File)>) -> Result<bool, String> {
        let fresh = matches!((&*cache, self.stamp()), (Some((s, _)), Some(now)) if *s == now);
        if fresh {
            return Ok(false);
        }
        let before = cache.as_ref().map(|(s, _)| *s);
        let read = self.read();
        *cache = read.as_ref().ok().cloned().flatten();
        read.map(|_| cache.as_ref().map(|(s, _)| *s) != before)
    }

    /// The principal of a valid (known, unexpired, unrevoked) bearer.
    pub fn validate(&self, bearer: &str) -> Option<String> {
        let (reloaded, found) = {
            let mut cache = self.cache.locked();
            let reloaded = self.refresh(&mut cache).unwrap_or(false);
            let found = cache.as_ref().and_then(|(_, file)| {
                let key = file.key().ok()?;
                let d = digest(&key, bearer);
                let now = now_ns();
                file.tokens
                    .iter()
                    .find(|t| ct_eq(&t.digest, &d))
                    .filter(|t| t.revoked_ns.is_none() && t.expires_ns.is_none_or(|e| e > now))
                    .map(|t| t.principal.clone())
            });
            (reloaded, found)
        };
        if reloaded {
            if let Some(f) = self.on_reload.get() {
                f();
            }
        }
        found
    }

    /// Who holds a valid token now (the file read again if it changed), and
    /// when the first of them expires. `Err` when the file cannot be read
    /// (a missing file holds no tokens: every principal's are gone).
    pub fn standing(&self) -> Result<Standing, String> {
        let mut cache = self.cache.locked();
        self.refresh(&mut cache)?;
        Ok(Standing::of(cache.as_ref().map(|(_, f)| f), now_ns()))
    }

    fn write(&self, file: &File) -> Result<(), String> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        // The state dir: private (0700), like the daemon makes it.
        shoal_base::paths::private_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp = dir.join(format!(".tokens.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        // 0600 whatever the umask.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        let text = serde_json::to_string_pretty(file).map_err(|e| e.to_string())?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| format!("{}: {e}", self.path.display()))
    }

    fn load_or_new(&self) -> Result<File, String> {
        match self.read()? {
            Some((_, f)) => Ok(f),
            None => Ok(File {
                version: 1,
                key: base64::engine::general_purpose::STANDARD.encode(random32()?),
                tokens: Vec::new(),
            }),
        }
    }

    /// A new token for `principal`; returns its entry and the bearer (shown once).
    pub fn create(
        &self,
        principal: &str,
        ttl: Option<std::time::Duration>,
    ) -> Result<(Entry, String), String> {
        if principal.starts_with("uid:") {
            return Err("uid: principals are the socket's own; pick another name".into());
        }
        self.create_any(principal, ttl)
    }

    /// A token whose principal is the local user (`uid:N`, `shoal token create --local`):
    /// what the socket grants its own uid, for clients that connect over HTTP.
    pub fn create_local(
        &self,
        ttl: Option<std::time::Duration>,
    ) -> Result<(Entry, String), String> {
        self.create_any(&crate::local_principal(), ttl)
    }

    fn create_any(
        &self,
        principal: &str,
        ttl: Option<std::time::Duration>,
    ) -> Result<(Entry, String), String> {
        if principal.is_empty() || principal.len() > 256 || principal.chars().any(char::is_control)
        {
            return Err("a principal is 1..=256 printable characters".into());
        }
        // A token's sessions are named NAME@PRINCIPAL: with `@` in principal
        // names, `default@x` of principal `b` would be `default` of `x@b`.
        if principal.contains('@') {
            return Err(format!("a principal name has no '@' (got {principal:?})"));
        }
        let mut file = self.load_or_new()?;
        let key = file.key()?;
        let bearer = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random32()?);
        let d = digest(&key, &bearer);
        let now = now_ns();
        let entry = Entry {
            id: d[..16].to_string(),
            principal: principal.to_string(),
            created_ns: now,
            expires_ns: ttl.map(|t| now.saturating_add(t.as_nanos().min(i64::MAX as u128) as i64)),
            revoked_ns: None,
            digest: d,
        };
        file.tokens.push(entry.clone());
        self.write(&file)?;
        Ok((entry, bearer))
    }

    pub fn list(&self) -> Result<Vec<Entry>, String> {
        Ok(self.read()?.map(|(_, f)| f.tokens).unwrap_or_default())
    }

    /// Revoke by id or by the bearer itself; returns the id.
    pub fn revoke(&self, what: &str) -> Result<String, String> {
        let mut file = self.read()?.map(|(_, f)| f).ok_or("no tokens exist")?;
        let key = file.key()?;
        let d = digest(&key, what);
        let now = now_ns();
        let t = file
            .tokens
            .iter_mut()
            .find(|t| t.id == what || ct_eq(&t.digest, &d))
            .ok_or_else(|| format!("no token {what:?}"))?;
        if t.revoked_ns.is_none() {
            t.revoked_ns = Some(now);
        }
        let id = t.id.clone();
        self.write(&file)?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_validate_revoke() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path().join("tokens.json"));
        let (e, bearer) = s.create("agent:a", None).unwrap();
        assert_eq!(bearer.len(), 43);
        let mode = std::fs::metadata(s.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A state dir the store creates is private.
        let nested = Store::new(d.path().join("new/state/tokens.json"));
        nested.create("agent:n", None).unwrap();
        let dmode = std::fs::metadata(d.path().join("new/state"))
            .unwrap()
            .mode()
            & 0o777;
        assert_eq!(dmode, 0o700);
        assert!(!std::fs::read_to_string(s.path()).unwrap().contains(&bearer));
        assert_eq!(s.validate(&bearer).as_deref(), Some("agent:a"));
        assert_eq!(s.validate("nope"), None);
        let other = Store::new(s.path().to_path_buf());
        other.revoke(&e.id).unwrap();
        assert_eq!(s.validate(&bearer), None);
        let (_, b2) = s
            .create("agent:b", Some(std::time::Duration::from_secs(3600)))
            .unwrap();
        assert_eq!(s.validate(&b2).as_deref(), Some("agent:b"));
        assert!(s.create("uid:5", None).is_err());
        let (e, b3) = s.create_local(None).unwrap();
        assert_eq!(e.principal, crate::local_principal());
        assert_eq!(s.validate(&b3), Some(crate::local_principal()));
    }

    #[test]
    fn standing_names_who_holds_a_valid_token() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path().join("tokens.json"));
        // No file: nobody.
        assert_eq!(s.standing().unwrap(), Standing::default());
        let reloads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = reloads.clone();
        s.on_reload(Box::new(move || {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
        let (a1, _) = s.create("agent:a", None).unwrap();
        let (_, b1) = s.create("agent:a", None).unwrap();
        let hour = std::time::Duration::from_secs(3600);
        let (e, _) = s.create("agent:b", Some(hour)).unwrap();
        let (_, _) = s.create("agent:b", Some(hour * 2)).unwrap();
        let st = s.standing().unwrap();
        assert_eq!(
            st.valid.iter().map(String::as_str).collect::<Vec<_>>(),
            ["agent:a", "agent:b"]
        );
        assert_eq!(st.next_expiry_ns, e.expires_ns);
        // One of agent:a's two tokens revoked: it still holds the other.
        Store::new(s.path().to_path_buf()).revoke(&a1.id).unwrap();
        assert!(s.standing().unwrap().valid.contains("agent:a"));
        // A validate that reads the changed file tells the daemon.
        let before = reloads.load(std::sync::atomic::Ordering::SeqCst);
        Store::new(s.path().to_path_buf()).revoke(&b1).unwrap();
        assert_eq!(s.validate(&b1), None);
        assert_eq!(
            reloads.load(std::sync::atomic::Ordering::SeqCst),
            before + 1
        );
        assert!(!s.standing().unwrap().valid.contains("agent:a"));
        // An expired token counts for nobody.
        let (_, _) = s
            .create("agent:c", Some(std::time::Duration::ZERO))
            .unwrap();
        assert!(!s.standing().unwrap().valid.contains("agent:c"));
    }

    #[test]
    fn symlinks_are_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("real"), "{}").unwrap();
        std::os::unix::fs::symlink(d.path().join("real"), d.path().join("tokens.json")).unwrap();
        let s = Store::new(d.path().join("tokens.json"));
        assert!(s.list().is_err());
        assert_eq!(s.validate("x"), None);
    }
}
