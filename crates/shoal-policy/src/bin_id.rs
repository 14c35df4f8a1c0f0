//! Binaries by identity: a `proc_spawn` grant names a binary, and the gate
//! checks the file a command resolves to by its content hash.

use std::path::Path;

/// BLAKE3 (hex) of a binary, for `proc_spawn` effects.
pub fn bin_hash(path: &Path) -> Option<String> {
    let mut h = blake3::Hasher::new();
    let f = std::fs::File::open(path).ok()?;
    h.update_reader(f).ok()?;
    Some(h.finalize().to_hex().to_string())
}

/// BLAKE3 of a binary, cached by file identity (device, inode, size and
/// mtime: a plan and every spawn hash the same few tools over and over).
pub fn bin_hash_cached(path: &Path) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Key = (u64, u64, u64, i64, i64);
    static CACHE: Mutex<Option<HashMap<Key, String>>> = Mutex::new(None);
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(path).ok()?;
    let key = (md.dev(), md.ino(), md.len(), md.mtime(), md.mtime_nsec());
    use shoal_base::sync::Locked;
    if let Some(h) = CACHE.locked().get_or_insert_with(HashMap::new).get(&key) {
        return Some(h.clone());
    }
    let h = bin_hash(path)?;
    let mut c = CACHE.locked();
    let map = c.get_or_insert_with(HashMap::new);
    if map.len() > 256 {
        map.clear();
    }
    map.insert(key, h.clone());
    Some(h)
}
