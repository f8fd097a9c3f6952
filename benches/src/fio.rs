//! The `fio` baselines: run fio as a subprocess and read figures out of its JSON output.
//!
//! Contract:
//! - Inputs: a file path on the filesystem under test and a size; fio's JSON output
//!   (`--output-format=json`, fio 3.x) for the parsers.
//! - Outputs: bandwidth in bytes per second ([`parse_bandwidth`]) and `fdatasync` latency
//!   percentiles in nanoseconds ([`parse_sync_latency`]), or a [`FioError`] saying what is
//!   missing. A missing `fio` binary is its own variant ([`FioError::Missing`]) so the harness
//!   can say how to install it.
//! - Never: installs anything, or trusts the JSON's shape: every field is looked up and a
//!   missing or mistyped one is an error, never a panic.

use std::io;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// How to install fio on Debian and Ubuntu (printed when it is missing).
pub const INSTALL_HINT: &str = "apt-get install -y fio";

/// Errors of running fio or reading its output.
#[derive(Debug, thiserror::Error)]
pub enum FioError {
    /// The `fio` binary is not on `PATH`.
    #[error("fio is not installed (install it with `{INSTALL_HINT}`)")]
    Missing,
    /// fio could not be started for another reason.
    #[error("could not run fio: {0}")]
    Spawn(#[source] io::Error),
    /// fio exited with a failure status.
    #[error("fio {args} failed ({status}): {stderr}")]
    Failed {
        /// The arguments fio was given.
        args: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The output is not JSON.
    #[error("fio output is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The JSON lacks a field the figure needs, or it has the wrong type.
    #[error("fio JSON has no usable `{0}`")]
    MissingField(String),
}

/// Which side of a fio job to read the bandwidth of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The job's `read` section.
    Read,
    /// The job's `write` section.
    Write,
}

impl Direction {
    fn key(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }
}

/// `fdatasync` latency figures of a fio job run with `--fdatasync=1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyncLatency {
    /// Median `fdatasync` latency.
    pub p50_ns: f64,
    /// 99th percentile `fdatasync` latency.
    pub p99_ns: f64,
    /// Number of syncs the percentiles are over (`lat_ns.N`).
    pub sync_count: u64,
}

/// fio's version line (`fio-3.33`), or [`FioError::Missing`].
pub fn version() -> Result<String, FioError> {
    let output = Command::new("fio")
        .arg("--version")
        .output()
        .map_err(spawn_error)?;
    if !output.status.success() {
        return Err(FioError::Failed {
            args: "--version".into(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn spawn_error(e: io::Error) -> FioError {
    if e.kind() == io::ErrorKind::NotFound {
        FioError::Missing
    } else {
        FioError::Spawn(e)
    }
}

/// Arguments of a buffered sequential write of `size_bytes` in 1 MiB blocks to `file`, with a
/// final `fsync` counted in the runtime when `end_fsync` is set.
pub fn seq_write_args(file: &Path, size_bytes: u64, end_fsync: bool) -> Vec<String> {
    vec![
        "--name=seq_write".into(),
        "--rw=write".into(),
        "--bs=1M".into(),
        format!("--size={size_bytes}"),
        "--direct=0".into(),
        format!("--end_fsync={}", u8::from(end_fsync)),
        format!("--filename={}", file.display()),
        "--output-format=json".into(),
    ]
}

/// Arguments of a buffered sequential read of `size_bytes` in 1 MiB blocks from `file`
/// (which a preceding write job left in the page cache). `--invalidate=0` keeps fio from
/// dropping the file's cached pages first, so this reads the page cache, like the log's
/// read workload.
pub fn seq_read_args(file: &Path, size_bytes: u64) -> Vec<String> {
    vec![
        "--name=seq_read".into(),
        "--rw=read".into(),
        "--bs=1M".into(),
        format!("--size={size_bytes}"),
        "--direct=0".into(),
        "--invalidate=0".into(),
        format!("--filename={}", file.display()),
        "--output-format=json".into(),
    ]
}

/// Arguments of 4 KiB sequential writes to `file`, each followed by `fdatasync`.
pub fn fdatasync_args(file: &Path, size_bytes: u64) -> Vec<String> {
    vec![
        "--name=fdatasync".into(),
        "--rw=write".into(),
        "--bs=4k".into(),
        "--fdatasync=1".into(),
        format!("--size={size_bytes}"),
        format!("--filename={}", file.display()),
        "--output-format=json".into(),
    ]
}

/// Runs fio with `args` and returns its standard output (the JSON report).
pub fn run(args: &[String]) -> Result<String, FioError> {
    let output = Command::new("fio")
        .args(args)
        .output()
        .map_err(spawn_error)?;
    if !output.status.success() {
        return Err(FioError::Failed {
            args: args.join(" "),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Parses fio's JSON report, skipping any text fio printed before it (warnings go to stdout
/// on some versions).
fn parse_report(output: &str) -> Result<Value, FioError> {
    let start = output.find('{').unwrap_or(0);
    serde_json::from_str(&output[start..]).map_err(FioError::NotJson)
}

fn field<'a>(value: &'a Value, path: &[&str]) -> Result<&'a Value, FioError> {
    let mut at = value;
    for key in path {
        at = at
            .get(*key)
            .ok_or_else(|| FioError::MissingField(path.join(".")))?;
    }
    Ok(at)
}

fn number(value: &Value, path: &[&str]) -> Result<f64, FioError> {
    field(value, path)?
        .as_f64()
        .ok_or_else(|| FioError::MissingField(path.join(".")))
}

fn first_job(report: &Value) -> Result<&Value, FioError> {
    field(report, &["jobs"])?
        .get(0)
        .ok_or_else(|| FioError::MissingField("jobs[0]".into()))
}

/// Bandwidth in bytes per second of the first job's `direction` (`bw_bytes`).
pub fn parse_bandwidth(output: &str, direction: Direction) -> Result<f64, FioError> {
    let report = parse_report(output)?;
    let job = first_job(&report)?;
    let bytes_per_s = number(job, &[direction.key(), "bw_bytes"])?;
    if bytes_per_s <= 0.0 {
        return Err(FioError::MissingField(format!(
            "jobs[0].{}.bw_bytes > 0",
            direction.key()
        )));
    }
    Ok(bytes_per_s)
}

/// The `fdatasync` latency percentiles of the first job (`sync.lat_ns`).
pub fn parse_sync_latency(output: &str) -> Result<SyncLatency, FioError> {
    let report = parse_report(output)?;
    let job = first_job(&report)?;
    let lat = field(job, &["sync", "lat_ns"])?;
    let sync_count = number(lat, &["N"])? as u64;
    if sync_count == 0 {
        return Err(FioError::MissingField(
            "jobs[0].sync.lat_ns.N > 0 (run with --fdatasync=1)".into(),
        ));
    }
    Ok(SyncLatency {
        p50_ns: number(lat, &["percentile", "50.000000"])?,
        p99_ns: number(lat, &["percentile", "99.000000"])?,
        sync_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from a real run on the development machine:
    /// `fio --name=seq --rw=write --bs=1M --size=1G --direct=0 --end_fsync=1 …`.
    const SEQ_WRITE: &str = include_str!("testdata/fio_seq_write.json");
    /// Trimmed from `fio --name=sync --rw=write --bs=4k --fdatasync=1 --size=16M …`.
    const FDATASYNC: &str = include_str!("testdata/fio_fdatasync.json");

    #[test]
    fn reads_write_bandwidth_of_the_captured_sample() {
        let bytes_per_s = parse_bandwidth(SEQ_WRITE, Direction::Write).expect("bandwidth");
        assert_eq!(bytes_per_s, 571_139_268.0);
    }

    #[test]
    fn a_direction_the_job_did_not_run_is_an_error() {
        // The write job's read side has bw_bytes = 0: no figure, not a zero baseline.
        assert!(matches!(
            parse_bandwidth(SEQ_WRITE, Direction::Read),
            Err(FioError::MissingField(_))
        ));
    }

    #[test]
    fn reads_fdatasync_percentiles_of_the_captured_sample() {
        let lat = parse_sync_latency(FDATASYNC).expect("sync latency");
        assert_eq!(
            lat,
            SyncLatency {
                p50_ns: 1_810_432.0,
                p99_ns: 6_389_760.0,
                sync_count: 4095,
            }
        );
    }

    #[test]
    fn a_job_without_syncs_has_no_sync_latency() {
        assert!(matches!(
            parse_sync_latency(SEQ_WRITE),
            Err(FioError::MissingField(_))
        ));
    }

    #[test]
    fn text_before_the_json_is_skipped() {
        let noisy = format!("fio: some warning\n{SEQ_WRITE}");
        assert_eq!(
            parse_bandwidth(&noisy, Direction::Write).expect("bandwidth"),
            571_139_268.0
        );
    }

    #[test]
    fn malformed_output_is_an_error_not_a_panic() {
        assert!(matches!(
            parse_bandwidth("not json", Direction::Write),
            Err(FioError::NotJson(_))
        ));
        assert!(matches!(
            parse_bandwidth(r#"{"jobs": []}"#, Direction::Write),
            Err(FioError::MissingField(_))
        ));
        assert!(matches!(
            parse_sync_latency(r#"{"jobs": [{"sync": {"lat_ns": {"N": "x"}}}]}"#),
            Err(FioError::MissingField(_))
        ));
        assert!(matches!(
            parse_bandwidth(
                r#"{"jobs": [{"write": {"bw_bytes": "fast"}}]}"#,
                Direction::Write
            ),
            Err(FioError::MissingField(_))
        ));
    }

    #[test]
    fn args_name_the_file_and_size() {
        let args = fdatasync_args(Path::new("/data/fio.tmp"), 16 << 20);
        assert!(args.contains(&"--filename=/data/fio.tmp".to_owned()));
        assert!(args.contains(&"--size=16777216".to_owned()));
        assert!(args.contains(&"--fdatasync=1".to_owned()));
        let args = seq_write_args(Path::new("/d/f"), 1 << 30, true);
        assert!(args.contains(&"--end_fsync=1".to_owned()));
        assert!(args.contains(&"--bs=1M".to_owned()));
    }
}
