//! A principal's filesystem grants lowered to Landlock rules for its
//! spawned children (docs/rules.md §21; this kernel has ABI 7).
//!
//! Each grant glob is reduced to its longest glob-free prefix (`/**` is
//! `/`); roots that do not exist are dropped. Writes (create, write,
//! truncate, rename into) are confined to the `fs.write` roots and removals
//! to the `fs.delete` roots; reads and execution are confined to the
//! `fs.read` roots when that list is non-empty (an empty list leaves reads
//! to the verdict, or nothing could even be executed). Device ioctls
//! (`IoctlDev`, ABI 5+) go with writes, and are granted on the terminal and
//! null devices. The ruleset is built in the parent with the `landlock`
//! crate (which drops what an older kernel's ABI lacks); the child only
//! calls its `restrict_self` between fork and exec (no allocation there).
//!
//! Unix sockets: every token principal's children (hermetic or not) get a
//! seccomp filter under which `socket(AF_UNIX, ..)` fails with `EACCES`,
//! so they cannot reach the daemon's own socket (which admits their uid as
//! the permissive local principal) nor any other pathname unix socket; a
//! `shoal` client they run fails at once. `socketpair(2)` stays: its pair
//! is connected to itself and cannot connect elsewhere (a datagram pair can
//! still `sendto` a named datagram socket, never the daemon's stream
//! socket). Where Landlock is available a token principal's children always
//! get a Landlock domain, even when its grants are every path: that also
//! keeps them from ptrace-attaching to the daemon (or `pidfd_getfd`,
//! `/proc/PID/mem`) and, at ABI 6+, from signalling processes outside
//! their sandbox or reaching abstract unix sockets. The daemon opens its
//! listener and connections close-on-exec, so no socket is inherited.
//! The local uid principal is not confined. Where the filter cannot be
//! installed (no seccomp filters, an architecture other than x86_64 or
//! aarch64) a token principal's spawn is refused.
//!
//! Network: a `hermetic` principal's children may neither connect nor bind
//! any TCP port (Landlock ABI 4+), may not create sockets of any family (a
//! seccomp filter: so no UDP, unix, raw or netlink sockets either, and the
//! daemon's own socket is out of reach), and (ABI 6+) may not reach
//! abstract unix sockets or signal processes outside their sandbox; where
//! the kernel cannot enforce that, the spawn is refused. Sockets inherited
//! as open descriptors stay usable (the daemon passes none). A non-hermetic
//! principal whose `net_connect` grants all name a port may connect only to
//! those ports (any host: Landlock knows ports, not hosts; below ABI 4 the
//! port rules are left out). Not covered for non-hermetic principals: UDP,
//! raw sockets and other non-unix protocols.

use std::cell::RefCell;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    make_bitflags, Access, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, RestrictSelfError,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, ABI,
};

pub use super::grant_path::resolve_grant;
use super::grant_path::{link_dirs, open_grant, open_path, root_of};
use super::policy::{PathGlob, PrincipalPolicy};
use super::seccomp::{
    cloexec_from, filter_available, install_filter, AUDIT_ARCH, NO_ATTR, NO_SHARED, NO_UNIX, SEAL,
};

/// The newest ABI whose rights these rules name (scopes are ABI 6); on an
/// older kernel the crate leaves out what it lacks.
const TARGET: ABI = ABI::V6;

const READ: BitFlags<AccessFs> = make_bitflags!(AccessFs::{Execute | ReadFile | ReadDir});
const WRITE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{
    WriteFile | MakeChar | MakeDir | MakeReg | MakeSock | MakeFifo | MakeBlock | MakeSym
        | Refer | Truncate | IoctlDev
});
const DELETE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{RemoveDir | RemoveFile});
/// What the terminal and null devices are granted (an ioctl on a terminal
/// is `IoctlDev`).
const DEVICE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | WriteFile | IoctlDev});

/// The lowered grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    pub read: Option<Vec<PathBuf>>,
    pub write: Vec<PathBuf>,
    pub delete: Vec<PathBuf>,
    pub net: Net,
    /// A token principal's children: no `AF_UNIX` sockets (the socket
    /// filter), and a Landlock domain wherever the kernel has one.
    pub token: bool,
    /// The files a child may execute besides its own program and what runs
    /// it (`crate::exec_list`): a token's granted binaries, when its policy
    /// lets no other program run (`proc_spawn` without `"*"`, `opaque` not
    /// `"allow"`). `None`: whatever it may read.
    pub exec: Option<Vec<PathBuf>>,
    /// Where a token principal may have made a link ([`link_dirs`]): a link
    /// met there is never followed when a grant is opened again, so one
    /// token cannot point another's grant (or its own) elsewhere. Empty for
    /// the local user's rules (its links are its own).
    pub links: Vec<PathBuf>,
}

/// What a ruleset lets its process execute.
#[derive(Clone, Copy)]
enum Exec<'a> {
    /// As the rules say ([`Rules::exec`]), plus this program.
    Program(Option<&'a Path>),
    /// Whatever may be read (an evaluation thread, whose children confine
    /// themselves further).
    Readable,
}

/// What the children may do on the network.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Net {
    /// Not confined.
    #[default]
    Open,
    /// TCP connect only to these ports (bind not confined).
    ConnectPorts(Vec<u16>),
    /// `hermetic`: no TCP connect or bind at all; abstract unix sockets and
    /// signals scoped to the sandbox where the kernel can (ABI 6+).
    Sealed,
}

impl Net {
    /// The `net_connect` grants lowered: only when every grant names a port.
    fn of(p: &PrincipalPolicy) -> Net {
        if p.hermetic {
            return Net::Sealed;
        }
        let ports: Option<Vec<u16>> = p.net_connect.iter().map(|g| g.port).collect();
        match ports {
            Some(mut v) if !v.is_empty() => {
                v.sort_unstable();
                v.dedup();
                Net::ConnectPorts(v)
            }
            _ => Net::Open,
        }
    }

    /// What the OS enforces at Landlock ABI `abi`.
    pub fn enforced_at(&self, abi: i64) -> &'static str {
        match self {
            Net::ConnectPorts(_) if abi >= 4 => "tcp-connect-ports",
            Net::Sealed if abi >= 4 => "sealed",
            _ => "open",
        }
    }
}

fn roots(grants: &[PathGlob], home: Option<&str>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = grants
        .iter()
        .filter_map(|g| root_of(&g.expanded(home)))
        .filter(|p| p.exists())
        .collect();
    v.sort();
    v.dedup();
    v
}

impl Rules {
    /// `None` when the grants do not confine anything (every list grants
    /// `/` and the network is open).
    pub fn lower(p: &PrincipalPolicy, home: Option<&str>) -> Option<Rules> {
        let root = Path::new("/");
        let read = roots(&p.fs.read, home);
        let write = roots(&p.fs.write, home);
        let delete = roots(&p.fs.delete, home);
        let read = if read.is_empty() || read.iter().any(|r| r == root) {
            None
        } else {
            Some(read)
        };
        let open_write = write.iter().any(|r| r == root);
        let open_delete = delete.iter().any(|r| r == root);
        let net = Net::of(p);
        if read.is_none() && open_write && open_delete && net == Net::Open {
            return None;
        }
        Some(Rules {
            read,
            write,
            delete,
            net,
            token: false,
            exec: None,
            links: Vec::new(),
        })
    }

    /// The rules of a token principal (any principal but the local uid):
    /// its grants lowered, always with the unix socket filter, and always
    /// a confined read list: its read grants plus the system's program
    /// directories (`protected::system_reads`), so an empty `fs.read` grants
    /// no user file. The daemon's own directories and `/proc` are cut out
    /// of every list (`protected::carve_all`). `p` is `None` when the
    /// principal has no policy section (nothing is granted: its verdicts
    /// refuse every run anyway).
    pub fn for_token(p: Option<&PrincipalPolicy>, home: Option<&str>) -> Rules {
        let links = link_dirs(p, home);
        let (mut read, write, delete, net) = match p {
            None => (Vec::new(), Vec::new(), Vec::new(), Net::Open),
            Some(p) => {
                // A grant is followed through the operator's links only: one met where
                // any token may write (this one included) drops the grant.
                let resolve = |grants: &[PathGlob]| -> Vec<PathBuf> {
                    roots(grants, home)
                        .iter()
                        .filter_map(|r| resolve_grant(r, &links))
                        .collect()
                };
                (
                    resolve(&p.fs.read),
                    resolve(&p.fs.write),
                    resolve(&p.fs.delete),
                    Net::of(p),
                )
            }
        };
        read.extend(crate::protected::system_reads());
        let protected = crate::protected::protected();
        Rules {
            read: Some(crate::protected::carve_all(read, &protected)),
            write: crate::protected::carve_all(write, &protected),
            delete: crate::protected::carve_all(delete, &protected),
            net,
            token: true,
            exec: exec_only(p),
            links,
        }
    }

    /// Do these rules need Landlock itself (a path or a port is confined)?
    pub(super) fn needs_landlock(&self) -> bool {
        let root = Path::new("/");
        self.read.is_some()
            || !self.write.iter().any(|r| r == root)
            || !self.delete.iter().any(|r| r == root)
            || self.net != Net::Open
    }

    /// Who a refusal names.
    fn who(&self) -> &'static str {
        if self.net == Net::Sealed {
            "hermetic"
        } else {
            "token principal"
        }
    }

    /// The seccomp filter the children get, if any.
    fn filter(&self) -> Option<&'static [libc::sock_filter]> {
        if self.net == Net::Sealed {
            Some(&SEAL[..])
        } else if self.token {
            Some(&NO_UNIX[..])
        } else {
            None
        }
    }

    /// Can a kernel of Landlock ABI `abi` enforce these rules? (`Err`: why
    /// not; a spawn under them is refused.)
    pub fn enforceable_at(&self, abi: i64) -> Result<(), String> {
        if abi <= 0 && self.needs_landlock() {
            return Err("Landlock is not available on this kernel".into());
        }
        if self.filter().is_some() && AUDIT_ARCH.is_none() {
            let who = self.who();
            return Err(format!(
                "{who}: the socket filter is built for x86_64 and aarch64 only; the program is not started"
            ));
        }
        if self.filter().is_some() && !filter_available() {
            let who = self.who();
            return Err(format!(
                "{who}: this kernel cannot install the socket filter (seccomp); the program is not started"
            ));
        }
        if self.net == Net::Sealed && abi < 4 {
            return Err(format!(
                "hermetic: this kernel's Landlock (ABI {abi}) cannot deny the network (TCP rules need ABI 4); the program is not started"
            ));
        }
        Ok(())
    }

    /// Build the ruleset (in the parent, before fork) for a child in a token's namespaces
    /// (`shoal-confine`): its `/dev/pts` is a private instance, so all of it is granted.
    pub fn ruleset(&self) -> io::Result<Ruleset> {
        self.ruleset_for(Ttys::All, Exec::Program(None))
    }

    /// [`Rules::ruleset`] for a child that executes `program`.
    pub fn ruleset_running(&self, program: &Path) -> io::Result<Ruleset> {
        self.ruleset_for(Ttys::All, Exec::Program(Some(program)))
    }

    /// The ruleset of a child that shares the daemon's namespaces (no bubblewrap, or
    /// `namespaces = "off"`): of `/dev/pts` a token's child gets only its own terminal
    /// (`tty`, a PTY program's), and it installs [`NO_SHARED`] too (the SysV IPC objects,
    /// keyrings and datagram pairs it would share with the local user).
    pub fn ruleset_shared(&self, tty: Option<&Path>, program: &Path) -> io::Result<Ruleset> {
        let ttys = tty.map_or(Ttys::None, Ttys::Own);
        let mut rs = self.ruleset_for(ttys, Exec::Program(Some(program)))?;
        rs.shared = self.token;
        Ok(rs)
    }

    /// The ruleset of a token's evaluation thread: no terminal at all.
    pub fn ruleset_for_thread(&self) -> io::Result<Ruleset> {
        self.ruleset_for(Ttys::None, Exec::Readable)
    }

    /// Whether a child under these rules may read `path` (its read and
    /// write grants, as the kernel sees them: through links).
    pub fn reads(&self, path: &Path) -> bool {
        let Some(read) = &self.read else {
            return true;
        };
        let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        read.iter()
            .chain(&self.write)
            .any(|root| real.starts_with(root))
    }

    /// These rules with no limit on what runs (an approved plan that may
    /// start any program: `opaque` among its effects).
    pub fn any_program(&self) -> Rules {
        Rules {
            exec: None,
            ..self.clone()
        }
    }

    fn ruleset_for(&self, ttys: Ttys<'_>, exec: Exec<'_>) -> io::Result<Ruleset> {
        let abi = abi();
        self.enforceable_at(abi)
            .map_err(|m| io::Error::new(io::ErrorKind::Unsupported, m))?;
        let filter = self.filter();
        if abi <= 0 {
            // Only the socket filter (enforceable_at refused the rest).
            return Ok(Ruleset {
                created: None,
                filter,
                attrs: self.token,
                shared: false,
                caps: self.token,
            });
        }
        let mut handled = WRITE | DELETE;
        if self.read.is_some() {
            handled |= READ;
        }
        // Port rules are an addition to the verdict: below ABI 4 the crate
        // leaves them out (hermetic was refused above).
        let net: BitFlags<AccessNet> = match self.net {
            Net::ConnectPorts(_) => AccessNet::ConnectTcp.into(),
            Net::Sealed => AccessNet::from_all(TARGET),
            Net::Open => BitFlags::EMPTY,
        };
        let scoped = self.net == Net::Sealed || self.token;
        let ll = |e: RulesetError| io::Error::other(format!("landlock: {e}"));
        let mut rs = landlock::Ruleset::default()
            .handle_access(handled)
            .map_err(ll)?;
        if !net.is_empty() {
            rs = rs.handle_access(net).map_err(ll)?;
        }
        if scoped {
            rs = rs.scope(Scope::from_all(TARGET)).map_err(ll)?;
        }
        let mut created = rs.create().map_err(ll)?;
        // What may be executed: everything readable, or the listed files only.
        let only = match exec {
            Exec::Program(program) => self.exec.as_ref().map(|list| {
                let mut files = list.clone();
                if let Some(p) = program {
                    files.extend(crate::exec_list::with_interpreters(p));
                }
                files
            }),
            Exec::Readable => None,
        };
        let read_rights = match only {
            Some(_) => READ & !BitFlags::from(AccessFs::Execute),
            None => READ,
        };
        // A child limited to its listed programs, in the principal's namespaces, writes
        // only where the mount is noexec (each write grant was made so as the child
        // started: `namespaces::holder`), so nothing it writes is mapped as code. A grant
        // that is not (another directory put in its place since) is not written to.
        let writes_noexec = only.is_some() && matches!(ttys, Ttys::All);
        // A token's paths are resolved again now, and opened without following links: a
        // grant a token turned into a link since these rules were made (`mv target t2;
        // ln -s / target`) grants nothing, not what the link points at.
        let mut add = |path: &Path, mut rights: BitFlags<AccessFs>| -> io::Result<()> {
            let opened = if self.token {
                open_grant(path, &self.links)?
            } else {
                open_path(path, false)?
            };
            let Some(fd) = opened else {
                return Ok(());
            };
            // (A write grant's rights: the devices' are not.)
            let write_grant = rights.contains(AccessFs::MakeReg);
            if writes_noexec && write_grant && !on_noexec_mount(&fd) {
                rights &= !WRITE;
            }
            add_fd(&mut created, fd, rights & handled)
        };
        if let Some(read) = &self.read {
            for r in read {
                add(r, read_rights)?;
            }
        }
        for r in &self.write {
            add(
                r,
                WRITE | self.read.as_ref().map_or(BitFlags::EMPTY, |_| read_rights),
            )?;
        }
        for f in only.iter().flatten() {
            add(f, make_bitflags!(AccessFs::{Execute | ReadFile}))?;
        }
        for r in &self.delete {
            add(r, DELETE)?;
        }
        for dev in ["/dev/null", "/dev/tty", "/dev/zero", "/dev/full"] {
            let _ = add(Path::new(dev), DEVICE);
        }
        // Terminals: a token's child reaches only its own (another's would be the
        // local user's screen and keyboard), unless its `/dev/pts` is private.
        match ttys {
            Ttys::All => {
                if let Ok(true) = std::fs::metadata("/dev/pts").map(|m| m.is_dir()) {
                    let _ = add(Path::new("/dev/pts"), DEVICE);
                }
            }
            Ttys::Own(tty) => {
                let _ = add(tty, DEVICE);
            }
            Ttys::None => {}
        }
        if !self.token && !matches!(ttys, Ttys::All) {
            if let Ok(true) = std::fs::metadata("/dev/pts").map(|m| m.is_dir()) {
                let _ = add(Path::new("/dev/pts"), DEVICE);
            }
        }
        if let Net::ConnectPorts(ports) = &self.net {
            for p in ports {
                created = created
                    .add_rule(NetPort::new(*p, AccessNet::ConnectTcp))
                    .map_err(ll)?;
            }
        }
        Ok(Ruleset {
            created: Some(created),
            filter,
            attrs: self.token,
            shared: false,
            caps: self.token,
        })
    }
}

/// Is `fd` on a mount whose files cannot be executed or mapped as code?
fn on_noexec_mount(fd: &OwnedFd) -> bool {
    rustix::fs::fstatvfs(fd)
        .is_ok_and(|st| st.f_flag.contains(rustix::fs::StatVfsMountFlags::NOEXEC))
}

/// Grant `rights` beneath the opened `fd` (only the file rights on a
/// non-directory).
fn add_fd(rs: &mut RulesetCreated, fd: OwnedFd, mut rights: BitFlags<AccessFs>) -> io::Result<()> {
    use rustix::fs::FileType;
    let kind = FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode);
    if kind != FileType::Directory {
        rights &= AccessFs::from_file(TARGET);
    }
    if rights.is_empty() {
        return Ok(());
    }
    rs.add_rule(PathBeneath::new(fd, rights))
        .map_err(|e| io::Error::other(format!("landlock: {e}")))?;
    Ok(())
}

/// What of `/dev/pts` a ruleset grants.
enum Ttys<'a> {
    /// All of it (a private devpts, or the local user's own rules).
    All,
    /// This terminal alone.
    Own(&'a Path),
    None,
}

/// A Landlock ruleset (`None`: this kernel has no Landlock and the rules
/// need only the socket filter) and the seccomp socket filter the children
/// install after it.
#[derive(Debug)]
pub struct Ruleset {
    created: Option<RulesetCreated>,
    filter: Option<&'static [libc::sock_filter]>,
    /// A token principal's children: no attribute changes by name
    /// (`seccomp::NO_ATTR`).
    attrs: bool,
    /// A token principal's child in the daemon's namespaces: no SysV IPC,
    /// keyrings or datagram pairs (`seccomp::NO_SHARED`).
    shared: bool,
    /// A token principal: no capabilities ([`drop_capabilities`]).
    caps: bool,
}

impl Ruleset {
    /// What the child applies between fork and exec (the spawn's command
    /// owns it; the parent's copy closes the ruleset when it is dropped).
    pub fn confine(self) -> Confine {
        Confine {
            ruleset: self.created,
            filter: self.filter,
            attrs: self.attrs,
            shared: self.shared,
            caps: self.caps,
        }
    }
}

/// The confinement a child applies to itself: see [`Confine::apply`].
#[derive(Debug)]
pub struct Confine {
    ruleset: Option<RulesetCreated>,
    filter: Option<&'static [libc::sock_filter]>,
    attrs: bool,
    shared: bool,
    caps: bool,
}

impl Confine {
    /// In the child between fork and exec: no capabilities (a token
    /// principal), no_new_privs, the Landlock
    /// ruleset, then the socket filter (hermetic: no socket at all; any
    /// other token principal: no unix socket). An error fails the spawn.
    /// Async-signal-safe: nothing here allocates (the crate's
    /// `restrict_self` is two system calls and moves values).
    pub fn apply(&mut self) -> io::Result<()> {
        self.restrict()?;
        if self.attrs {
            install_filter(&NO_ATTR[..])?;
        }
        if self.shared {
            install_filter(&NO_SHARED[..])?;
        }
        if let Some(filter) = self.filter {
            install_filter(filter)?;
            // A token principal's child inherits stdio only: a descriptor
            // the daemon itself inherited without close-on-exec (a launcher's
            // socket, say) is closed at exec too.
            cloexec_from(3);
        }
        Ok(())
    }

    /// Confine the calling thread itself (and what it creates from now
    /// on): no_new_privs, the Landlock ruleset, the socket filter. Unlike
    /// [`Confine::apply`] it leaves descriptors alone: they are the
    /// daemon's, shared by every thread; and the attribute filter, which
    /// is for children (the thread's own builtins are checked at run time).
    pub fn apply_to_thread(mut self) -> io::Result<()> {
        self.restrict()?;
        if let Some(filter) = self.filter {
            install_filter(filter)?;
        }
        Ok(())
    }

    /// No capabilities (a token principal), no_new_privs and the Landlock
    /// domain (once: the ruleset is used up).
    fn restrict(&mut self) -> io::Result<()> {
        if self.caps {
            drop_capabilities()?;
        }
        let Some(rs) = self.ruleset.take() else {
            return Ok(rustix::thread::set_no_new_privs(true)?);
        };
        match rs.restrict_self() {
            Ok(_) => Ok(()),
            Err(RulesetError::RestrictSelf(
                RestrictSelfError::SetNoNewPrivsCall { source, .. }
                | RestrictSelfError::RestrictSelfCall { source, .. },
            )) => Err(source),
            Err(_) => Err(io::Error::from(io::ErrorKind::PermissionDenied)),
        }
    }
}

/// Leave the calling thread no capability now or after any exec: a daemon
/// run as root (or with file capabilities) must not lend them to a token
/// principal, whose child would otherwise keep them through exec (Landlock
/// and the filters do not govern `reboot`, module loading, raw devices or
/// the network configuration). The bounding set is emptied where the
/// thread may (`CAP_SETPCAP`; without it there is nothing to lend, and
/// no_new_privs keeps exec from raising the empty permitted set); then the
/// ambient, inheritable, permitted and effective sets. Async-signal-safe:
/// system calls on integers.
pub fn drop_capabilities() -> io::Result<()> {
    use rustix::io::Errno;
    use rustix::thread::{self as t, CapabilitySet};
    for n in 0..64u32 {
        match t::remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(1 << n)) {
            // EINVAL: past the kernel's last capability; EPERM: no
            // CAP_SETPCAP, so no capability either.
            Ok(()) | Err(Errno::INVAL) | Err(Errno::PERM) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match t::clear_ambient_capability_set() {
        Ok(()) | Err(Errno::INVAL) => {}
        Err(e) => return Err(e.into()),
    }
    let none = CapabilitySet::empty();
    t::set_capabilities(
        None,
        t::CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )?;
    Ok(())
}

/// The kernel's Landlock ABI version (0: none).
pub fn abi() -> i64 {
    static ABI: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *ABI.get_or_init(|| {
        // SAFETY: LANDLOCK_CREATE_RULESET_VERSION (1) with a null attribute.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u64>(),
                0usize,
                1u32,
            )
        };
        v.max(0)
    })
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Rules>>> = const { RefCell::new(None) };
}

/// Run `f` with `rules` confining every child this thread spawns.
pub fn with_rules<T>(rules: Option<Arc<Rules>>, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<Arc<Rules>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let prev = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = prev);
        }
    }
    let prev = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), rules));
    let _reset = Reset(prev);
    f()
}

/// The rules of the current thread, if any.
pub fn current() -> Option<Arc<Rules>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether a child spawned on this thread gets the environment variable
/// `name`: under an execute limit ([`Rules::exec`]) not the loader's
/// (`LD_PRELOAD`, `LD_AUDIT`, `LD_LIBRARY_PATH`, any `LD_*`) nor glibc's
/// `GCONV_PATH`, which would load code of the token's choosing into a
/// granted program.
pub fn passes_env(name: &str) -> bool {
    let loads_code = name.starts_with("LD_") || name == "GCONV_PATH";
    !(loads_code && current().is_some_and(|r| r.exec.is_some()))
}

/// The ruleset for a spawn on this thread outside namespaces (`None`: not
/// confined); `tty` is the child's own terminal, if it has one. An error
/// means the child must not run unconfined.
pub fn prepare(tty: Option<&Path>, program: &Path) -> io::Result<Option<Ruleset>> {
    match current() {
        None => Ok(None),
        Some(r) => r.ruleset_shared(tty, program).map(Some),
    }
}

/// The files a token under `p` may execute (beside each child's program):
/// `None` when its policy lets any program run anyway.
fn exec_only(p: Option<&PrincipalPolicy>) -> Option<Vec<PathBuf>> {
    let Some(p) = p else {
        return Some(Vec::new());
    };
    let any = p.proc_spawn.iter().any(|g| g.0 == "*");
    if any || p.opaque == crate::policy::OpaqueMode::Allow {
        return None;
    }
    let names: Vec<String> = p.proc_spawn.iter().map(|g| g.0.clone()).collect();
    let path = std::env::var("PATH").ok();
    let bins = crate::run_gate::Bins::resolve(&names, path.as_deref());
    let mut files: Vec<PathBuf> = bins
        .files
        .iter()
        .flat_map(|b| crate::exec_list::with_loader(&b.path))
        .collect();
    files.sort();
    files.dedup();
    Some(files)
}
