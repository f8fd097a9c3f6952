//! A broker process's cost as Linux reports it: CPU seconds from `/proc/<pid>/stat`
//! (utime + stime) and peak resident memory from `/proc/<pid>/status` (`VmHWM`).
//!
//! Contract: the parsers are pure (text in, figure out) and return `None` on text they do
//! not understand; the readers return `None` where `/proc` is absent (not Linux) or the
//! process is gone. Clock ticks are `USER_HZ`, which Linux fixes at 100 for `/proc`.

use std::fs;

/// `USER_HZ`: the unit of utime and stime in `/proc/<pid>/stat`.
const TICKS_PER_SECOND: f64 = 100.0;

/// utime + stime, in clock ticks, from the text of `/proc/<pid>/stat`. The command name (field
/// 2) is in parentheses and may hold spaces, so fields are counted after its last `)`.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name: state is field 3 of the whole line, utime 14 and stime 15.
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// `VmHWM` (peak resident set) in bytes from the text of `/proc/<pid>/status`.
pub fn parse_vm_hwm_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut parts = line["VmHWM:".len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => Some(value * 1024),
        _ => None,
    }
}

/// CPU seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat).map(|t| t as f64 / TICKS_PER_SECOND)
}

/// Peak resident memory of process `pid` so far, in bytes.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_hwm_bytes(&status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ticks_are_utime_plus_stime_even_with_spaces_in_the_name() {
        let stat =
            "4242 (kfake runner) S 1 4242 4242 0 -1 4194560 1200 0 0 0 731 269 0 0 20 0 9 0 \
                    12345 1000000 6000 18446744073709551615";
        assert_eq!(parse_stat_ticks(stat), Some(731 + 269));
        assert_eq!(parse_stat_ticks("4242 (x) S 1 2"), None);
        assert_eq!(parse_stat_ticks("no parenthesis"), None);
    }

    #[test]
    fn vm_hwm_is_read_in_kib() {
        let status = "Name:\tminikafka\nVmPeak:\t  200000 kB\nVmHWM:\t   65536 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(parse_vm_hwm_bytes(status), Some(65536 * 1024));
        assert_eq!(parse_vm_hwm_bytes("Name:\tx\n"), None);
        assert_eq!(parse_vm_hwm_bytes("VmHWM:\t12 MB\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_cpu_time_and_a_peak() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).is_some());
        assert!(peak_rss_bytes(pid).is_some_and(|b| b > 0));
    }
}
