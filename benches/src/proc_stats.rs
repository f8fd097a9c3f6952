//! A broker process's cost as Linux reports it: CPU seconds from the process's CPU-time clock
//! (nanoseconds; `/proc/<pid>/stat`'s utime + stime in ticks as the fallback) and peak resident memory from `/proc/<pid>/status` (`VmHWM`).
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

/// The thread name (field 2, without its parentheses) and utime + stime in clock ticks, from
/// the text of `/proc/<pid>/task/<tid>/stat`.
pub fn parse_stat_name_and_ticks(stat: &str) -> Option<(String, u64)> {
    let name = &stat[stat.find('(')? + 1..stat.rfind(')')?];
    Some((name.to_owned(), parse_stat_ticks(stat)?))
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

/// CPU seconds (user + system) process `pid` has used so far, to the nanosecond where the
/// kernel allows it.
///
/// Why not only `/proc/<pid>/stat`: it counts in 10 ms ticks. A `--quick` run's busiest
/// workload (128 outstanding for 0.3 s) costs the broker about 0.1 s, ten ticks, so one tick
/// is 10 % of the figure, and CPU per record compared by ratio moved by ±10–40 % between
/// identical builds. The process's CPU-time clock counts the same time (every thread, exited
/// ones included) in nanoseconds; `/proc` stays the fallback.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    process_cpu_clock_seconds(pid).or_else(|| stat_cpu_seconds(pid))
}

/// CPU seconds from `/proc/<pid>/stat` (10 ms resolution).
pub fn stat_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat).map(|t| t as f64 / TICKS_PER_SECOND)
}

/// CPU seconds from process `pid`'s CPU-time clock (`clock_getcpuclockid` then
/// `clock_gettime`): user + system time of all its threads, live and exited, in nanoseconds.
#[cfg(target_os = "linux")]
pub fn process_cpu_clock_seconds(pid: u32) -> Option<f64> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid place for the one clock id the call writes.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return None;
    }
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; an unknown clock returns an error instead.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return None;
    }
    Some(now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9)
}

/// Not on Linux: no per-process CPU clock is read; callers fall back to `/proc` (absent too).
#[cfg(not(target_os = "linux"))]
pub fn process_cpu_clock_seconds(_pid: u32) -> Option<f64> {
    None
}

/// Thread names of a broker's shards as `/proc` shows them (15 bytes at most): monoio's
/// `monoio-shard-N`, the portable backend's `minikafka-shard-N` (cut to `minikafka-shard`).
pub const SHARD_THREAD_PREFIXES: [&str; 2] = ["monoio-shard", "minikafka-shard"];

/// A thread name as long as Linux keeps (`TASK_COMM_LEN` − 1): longer names are cut to it.
const THREAD_NAME_MAX_BYTES: usize = 15;

/// CPU seconds (user + system) each thread of process `pid` whose name starts with one of
/// `prefixes` has used so far, by thread id, in thread-id order (shards start in order, so
/// this is shard order). A thread a shard starts inherits the shard's name (monoio's
/// one-thread blocking pool does), so of several threads with one name only the first
/// (lowest id) counts, unless the name was cut to 15 bytes and cannot tell shards apart.
pub fn thread_cpu_seconds(pid: u32, prefixes: &[&str]) -> Option<Vec<(u32, f64)>> {
    let mut threads = Vec::new();
    for entry in fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(entry) = entry else { continue };
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue; // the thread ended meanwhile
        };
        let Some((name, ticks)) = parse_stat_name_and_ticks(&stat) else {
            continue;
        };
        if prefixes.iter().any(|p| name.starts_with(p)) {
            threads.push((tid, name, ticks as f64 / TICKS_PER_SECOND));
        }
    }
    Some(first_of_each_name(threads))
}

/// `(tid, name, cpu)` in thread-id order, keeping only the first thread of each name not cut
/// to [`THREAD_NAME_MAX_BYTES`].
fn first_of_each_name(mut threads: Vec<(u32, String, f64)>) -> Vec<(u32, f64)> {
    threads.sort_by_key(|(tid, _, _)| *tid);
    let mut seen = std::collections::HashSet::new();
    threads
        .into_iter()
        .filter(|(_, name, _)| name.len() >= THREAD_NAME_MAX_BYTES || seen.insert(name.clone()))
        .map(|(tid, _, cpu)| (tid, cpu))
        .collect()
}

/// The share of a core each thread used between two [`thread_cpu_seconds`] readings
/// `seconds` apart (threads in both readings, in thread-id order).
pub fn thread_core_shares(before: &[(u32, f64)], after: &[(u32, f64)], seconds: f64) -> Vec<f64> {
    after
        .iter()
        .filter_map(|&(tid, cpu)| {
            let (_, was) = before.iter().find(|&&(t, _)| t == tid)?;
            Some((cpu - was) / seconds.max(f64::MIN_POSITIVE))
        })
        .collect()
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
    fn a_thread_stat_gives_its_name_and_ticks() {
        let stat = "4243 (monoio-shard-1) S 1 4242 4242 0 -1 4194560 1200 0 0 0 50 7 0 0 20 0 9 0";
        assert_eq!(
            parse_stat_name_and_ticks(stat),
            Some(("monoio-shard-1".to_owned(), 57))
        );
        assert_eq!(parse_stat_name_and_ticks("4243 (x"), None);
    }

    #[test]
    fn a_shard_s_helper_thread_of_the_same_name_does_not_count() {
        let threads = vec![
            (46, "monoio-shard-1".to_owned(), 0.0),
            (44, "monoio-shard-0".to_owned(), 3.0),
            (45, "monoio-shard-1".to_owned(), 2.0),
            (47, "monoio-shard-0".to_owned(), 0.0),
            (50, "minikafka-shard".to_owned(), 1.0),
            (51, "minikafka-shard".to_owned(), 1.5),
        ];
        assert_eq!(
            first_of_each_name(threads),
            vec![(44, 3.0), (45, 2.0), (50, 1.0), (51, 1.5)]
        );
    }

    #[test]
    fn core_shares_pair_threads_by_id() {
        let before = [(10, 1.0), (11, 2.0)];
        let after = [(10, 2.0), (11, 2.5), (12, 9.0)];
        assert_eq!(thread_core_shares(&before, &after, 2.0), vec![0.5, 0.25]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_threads_are_read_by_name() {
        // A thread sets its own name as it starts: wait until it runs.
        let (started, running) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("monoio-shard-7".into())
            .spawn(move || {
                started.send(()).expect("send");
                let _ = stopped.recv();
            })
            .expect("spawn");
        running.recv().expect("started");
        let threads = thread_cpu_seconds(std::process::id(), &SHARD_THREAD_PREFIXES)
            .expect("/proc is there on Linux");
        assert_eq!(threads.len(), 1, "{threads:?}");
        drop(stop);
        spawned.join().expect("join");
    }

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
    fn another_process_cpu_clock_agrees_with_proc_ticks_and_is_finer() {
        // A child that burns CPU: its clock must be read from outside, as the harness does.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .spawn()
            .expect("spawn sh");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let clock = process_cpu_clock_seconds(child.id()).expect("clock of a live child");
        let ticks = stat_cpu_seconds(child.id()).expect("/proc of a live child");
        let _ = child.kill();
        let _ = child.wait();
        assert!(clock > 0.0, "the child ran: {clock}");
        // The tick count is read after the clock, and truncates to 10 ms.
        assert!(
            clock <= ticks + 0.02 && ticks <= clock + 0.05,
            "{clock} vs {ticks}"
        );
        assert_eq!(process_cpu_clock_seconds(u32::MAX), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_cpu_time_and_a_peak() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).is_some());
        assert!(peak_rss_bytes(pid).is_some_and(|b| b > 0));
    }
}
