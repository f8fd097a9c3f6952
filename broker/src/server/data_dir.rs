//! The broker's own files in the data directory, beside the topics: the clean-shutdown marker
//! (written last by a clean shutdown, taken at startup), the cluster id, and the lock file.
//! Named by the startup in `server` and by the shutdown in `lifecycle`.

use std::path::Path;

/// File in the data directory written at the end of a clean shutdown.
pub const CLEAN_SHUTDOWN_MARKER: &str = "clean_shutdown";
/// File in the data directory holding the cluster id.
pub const CLUSTER_ID_FILE: &str = "cluster_id";
/// File in the data directory locked (`flock`) while a broker uses the directory.
pub const LOCK_FILE: &str = ".lock";

/// Reads and removes the clean-shutdown marker (syncing the directory), so only the run that
/// writes it again is trusted. Returns whether it was there.
pub fn take_clean_shutdown_marker(dir: &Path) -> std::io::Result<bool> {
    let path = dir.join(CLEAN_SHUTDOWN_MARKER);
    match std::fs::remove_file(&path) {
        Ok(()) => {
            std::fs::File::open(dir)?.sync_all()?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads the cluster id from the data directory, creating (and syncing) it the first time.
pub fn load_or_create_cluster_id(dir: &Path) -> std::io::Result<String> {
    let path = dir.join(CLUSTER_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() && text.len() < 256 => Ok(text.trim().to_string()),
        Ok(_) => Err(std::io::Error::other(format!(
            "{} is empty or too long",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = uuid::Uuid::new_v4().simple().to_string();
            let tmp = dir.join(format!("{CLUSTER_ID_FILE}.tmp"));
            std::fs::write(&tmp, format!("{id}\n"))?;
            std::fs::File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(dir)?.sync_all()?;
            Ok(id)
        }
        Err(e) => Err(e),
    }
}
