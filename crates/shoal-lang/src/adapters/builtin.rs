//! The built-in adapters, embedded from `config/adapters/*.toml` (one file per tool).

/// (name, file text), by name.
pub const FILES: &[(&str, &str)] = &[
    ("aws", include_str!("../../../../config/adapters/aws.toml")),
    (
        "bash",
        include_str!("../../../../config/adapters/bash.toml"),
    ),
    (
        "brew",
        include_str!("../../../../config/adapters/brew.toml"),
    ),
    ("bun", include_str!("../../../../config/adapters/bun.toml")),
    (
        "cargo",
        include_str!("../../../../config/adapters/cargo.toml"),
    ),
    (
        "curl",
        include_str!("../../../../config/adapters/curl.toml"),
    ),
    (
        "deno",
        include_str!("../../../../config/adapters/deno.toml"),
    ),
    ("df", include_str!("../../../../config/adapters/df.toml")),
    (
        "docker",
        include_str!("../../../../config/adapters/docker.toml"),
    ),
    ("du", include_str!("../../../../config/adapters/du.toml")),
    ("env", include_str!("../../../../config/adapters/env.toml")),
    ("fd", include_str!("../../../../config/adapters/fd.toml")),
    (
        "findmnt",
        include_str!("../../../../config/adapters/findmnt.toml"),
    ),
    (
        "gcloud",
        include_str!("../../../../config/adapters/gcloud.toml"),
    ),
    ("gh", include_str!("../../../../config/adapters/gh.toml")),
    ("git", include_str!("../../../../config/adapters/git.toml")),
    ("go", include_str!("../../../../config/adapters/go.toml")),
    (
        "helm",
        include_str!("../../../../config/adapters/helm.toml"),
    ),
    ("ip", include_str!("../../../../config/adapters/ip.toml")),
    ("jj", include_str!("../../../../config/adapters/jj.toml")),
    (
        "journalctl",
        include_str!("../../../../config/adapters/journalctl.toml"),
    ),
    ("jq", include_str!("../../../../config/adapters/jq.toml")),
    (
        "kubectl",
        include_str!("../../../../config/adapters/kubectl.toml"),
    ),
    (
        "lsblk",
        include_str!("../../../../config/adapters/lsblk.toml"),
    ),
    (
        "lscpu",
        include_str!("../../../../config/adapters/lscpu.toml"),
    ),
    (
        "node",
        include_str!("../../../../config/adapters/node.toml"),
    ),
    ("npm", include_str!("../../../../config/adapters/npm.toml")),
    ("pip", include_str!("../../../../config/adapters/pip.toml")),
    (
        "pnpm",
        include_str!("../../../../config/adapters/pnpm.toml"),
    ),
    (
        "podman",
        include_str!("../../../../config/adapters/podman.toml"),
    ),
    ("ps", include_str!("../../../../config/adapters/ps.toml")),
    (
        "python",
        include_str!("../../../../config/adapters/python.toml"),
    ),
    ("rg", include_str!("../../../../config/adapters/rg.toml")),
    (
        "ruby",
        include_str!("../../../../config/adapters/ruby.toml"),
    ),
    (
        "rustup",
        include_str!("../../../../config/adapters/rustup.toml"),
    ),
    (
        "sqlite3",
        include_str!("../../../../config/adapters/sqlite3.toml"),
    ),
    ("ss", include_str!("../../../../config/adapters/ss.toml")),
    (
        "stat",
        include_str!("../../../../config/adapters/stat.toml"),
    ),
    (
        "systemctl",
        include_str!("../../../../config/adapters/systemctl.toml"),
    ),
    (
        "systemd-analyze",
        include_str!("../../../../config/adapters/systemd-analyze.toml"),
    ),
    ("tar", include_str!("../../../../config/adapters/tar.toml")),
    (
        "terraform",
        include_str!("../../../../config/adapters/terraform.toml"),
    ),
    (
        "unzip",
        include_str!("../../../../config/adapters/unzip.toml"),
    ),
    ("uv", include_str!("../../../../config/adapters/uv.toml")),
    (
        "vmstat",
        include_str!("../../../../config/adapters/vmstat.toml"),
    ),
    ("who", include_str!("../../../../config/adapters/who.toml")),
    (
        "yarn",
        include_str!("../../../../config/adapters/yarn.toml"),
    ),
    ("yq", include_str!("../../../../config/adapters/yq.toml")),
    ("zip", include_str!("../../../../config/adapters/zip.toml")),
];

#[cfg(test)]
mod tests {
    /// Every file under config/adapters/ is embedded (a new file must be
    /// listed above).
    #[test]
    fn every_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/adapters");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("config/adapters")
            .filter_map(|e| {
                e.ok()?
                    .file_name()
                    .to_str()?
                    .strip_suffix(".toml")
                    .map(str::to_string)
            })
            .collect();
        on_disk.sort();
        let listed: Vec<String> = super::FILES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(on_disk, listed);
    }
}
