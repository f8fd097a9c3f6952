//! Facts about the machine a benchmark ran on: load average, CPUs, kernel, filesystem.
//!
//! Contract:
//! - Inputs: `/proc/loadavg`, `/proc/mounts`, `/proc/sys/kernel/osrelease` (Linux); the
//!   parsers take the text as a value so they are tested without a `/proc`.
//! - Outputs: `Option`s: a fact that cannot be read is `None` (recorded as empty), never an
//!   error that stops a benchmark.
//! - Never: writes anything.

use std::fs;
use std::path::Path;

/// The 1-minute load average now (`None` where `/proc/loadavg` is unreadable).
pub fn load_avg_1m() -> Option<f64> {
    parse_loadavg(&fs::read_to_string("/proc/loadavg").ok()?)
}

/// The first field of `/proc/loadavg` text.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// The kernel release (`uname -r`).
pub fn kernel_release() -> Option<String> {
    Some(
        fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()?
            .trim()
            .to_owned(),
    )
}

/// CPUs this process may run on.
pub fn cpu_count() -> Option<usize> {
    std::thread::available_parallelism().ok().map(usize::from)
}

/// The mount holding `path`: `(device, mount point, filesystem type)`.
pub fn filesystem_of(path: &Path) -> Option<(String, String, String)> {
    let path = fs::canonicalize(path).ok()?;
    parse_mounts_for(&fs::read_to_string("/proc/mounts").ok()?, &path)
}

/// From `/proc/mounts` text, the mount with the longest mount point that contains `path`.
pub fn parse_mounts_for(mounts: &str, path: &Path) -> Option<(String, String, String)> {
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let device = fields.next()?;
            let mount_point = fields.next()?;
            let fs_type = fields.next()?;
            Some((device, mount_point, fs_type))
        })
        .filter(|(_, mount_point, _)| path.starts_with(mount_point))
        .max_by_key(|(_, mount_point, _)| mount_point.len())
        .map(|(d, m, t)| (d.to_owned(), m.to_owned(), t.to_owned()))
}

/// Flush requests the block device `device` (`vda`, or `/dev/vda`) completed since boot
/// (`/proc/diskstats`, kernel 5.5+); `None` where unavailable.
pub fn device_flushes(device: &str) -> Option<u64> {
    parse_diskstats_flushes(&fs::read_to_string("/proc/diskstats").ok()?, device)
}

/// The "flush requests completed" field (the 16th statistic) of `device` in `/proc/diskstats`
/// text.
pub fn parse_diskstats_flushes(text: &str, device: &str) -> Option<u64> {
    let name = device.rsplit('/').next()?;
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(2) != Some(&name) {
            return None;
        }
        fields.get(2 + 16)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diskstats_flush_field_of_the_named_device() {
        let text = " 254       0 vda 28943 5124 10481034 29965 3505025 718915 184938272 2761581 0 162992 2856489 181895 623 157711696 36253 1110197 28689\n                     254       1 vda1 10 0 80 1 2 0 16 0 0 1 1 0 0 0 0 0 0\n                     7       0 loop0 1 0 2 0 0 0 0 0 0 0 0\n";
        assert_eq!(parse_diskstats_flushes(text, "/dev/vda"), Some(1_110_197));
        assert_eq!(parse_diskstats_flushes(text, "vda1"), Some(0));
        // A kernel too old for the flush fields, or an unknown device: nothing.
        assert_eq!(parse_diskstats_flushes(text, "loop0"), None);
        assert_eq!(parse_diskstats_flushes(text, "sdz"), None);
    }

    #[test]
    fn loadavg_first_field() {
        assert_eq!(parse_loadavg("0.74 2.09 1.98 2/95 7756\n"), Some(0.74));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("x 1 2"), None);
    }

    #[test]
    fn longest_containing_mount_wins() {
        let mounts = "/dev/vda / ext4 rw 0 0\n\
                      tmpfs /tmp tmpfs rw 0 0\n\
                      /dev/vdb /tmpdata xfs rw 0 0\n";
        let of = |p: &str| parse_mounts_for(mounts, Path::new(p)).map(|m| m.2);
        assert_eq!(of("/tmp/x/y").as_deref(), Some("tmpfs"));
        // Path components, not string prefixes: /tmpdata is not under /tmp.
        assert_eq!(of("/tmpdata/z").as_deref(), Some("xfs"));
        assert_eq!(of("/work/main").as_deref(), Some("ext4"));
    }
}
