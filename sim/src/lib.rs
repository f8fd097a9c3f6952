//! # minikafka-sim
//!
//! Runs the real broker (`server::serve`, its shards, partition logs and producer state) on
//! the simulated backend, with our client crate as the simulated producers, consumers and
//! admins, under a seeded random workload, random crashes and restarts, and faults, and checks
//! everything against [`model::Model`]. One seed is one complete, replayable run.
//!
//! A run (`run_seed`): several incarnations of the broker on one simulated disk. Each starts
//! the broker, verifies every partition against the model (the whole log, from the start),
//! makes sure the topics exist, lets a few clients produce (idempotent and plain, acks 0/1/all,
//! retrying idempotent batches after a connection error) and long-poll fetch, then crashes the
//! broker or shuts it down cleanly. A last incarnation without faults verifies everything.
//! The first contradiction ends the run with a message naming the seed.

mod broker_access;
mod client_ops;
mod groups;
pub mod model;
mod tls;
pub mod txn_model;
mod txns;
mod workload;

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use minikafka_backend_sim::{FaultRates, RunOutcome, SimBackend, SimConfig, SimStats};
use minikafka_broker::config::BrokerConfig;
use minikafka_broker::log::FlushPolicy;
use minikafka_broker::server::{self, CLEAN_SHUTDOWN_MARKER, CLUSTER_ID_FILE};

pub use minikafka_core::mutants::Mutant;
use model::Model;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Broker incarnations before the final verifying one.
    pub incarnations: u32,
    /// Concurrent producing clients per incarnation.
    pub clients: usize,
    /// Requests each producing client makes per incarnation.
    pub ops: u32,
    /// Most group members per incarnation (the seed picks 0 to this many).
    pub members: u32,
    /// Inject faults (rates drawn per seed; some seeds get none).
    pub faults: bool,
    /// The deliberately broken disk: `sync_data` succeeds without making anything durable.
    pub broken_sync_data: bool,
    /// The deliberately broken disk: `sync_dir` succeeds without making anything durable.
    pub broken_sync_dir: bool,
    /// Transactional producers per incarnation (each with its own `transactional.id`, kept
    /// across incarnations), plus a read_committed reader; 0 runs no transactional workload
    /// (and creates no `txns` topic, so such runs keep the schedules they had before).
    pub txn_producers: u32,
    /// A deliberately broken broker (`core::mutants`): the checks must catch it.
    pub mutant: Option<Mutant>,
    /// The broker's listener speaks SSL (rustls, a certificate made for the run) and every
    /// simulated client connects through TLS; off by default so other runs keep their
    /// schedules.
    pub tls: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            incarnations: 4,
            clients: 3,
            ops: 60,
            members: 3,
            faults: true,
            broken_sync_data: false,
            broken_sync_dir: false,
            txn_producers: 0,
            mutant: None,
            tls: false,
        }
    }
}

/// What one seed did.
#[derive(Clone, Copy, Debug, Default)]
pub struct SeedReport {
    /// Virtual time simulated.
    pub virtual_time: Duration,
    /// The world's counters (crashes, faults).
    pub stats: SimStats,
    /// Records acknowledged.
    pub acks: u64,
    /// Offset commits acknowledged.
    pub commits: u64,
    /// Transactions whose EndTxn(commit) was acknowledged.
    pub txn_commits: u64,
    /// Transactions whose EndTxn(abort) was acknowledged.
    pub txn_aborts: u64,
    /// Transactions the coordinator aborted on timeout (their commit was fenced).
    pub txn_timeouts: u64,
    /// Whole-partition read_committed checks done (at every restart).
    pub txn_checks: u64,
    /// Broker starts that failed on an injected fault (then restarted).
    pub failed_starts: u32,
    /// TLS handshakes the clients completed (`SimOptions::tls`; 0 without).
    pub tls_handshakes: u64,
    /// The hash of every scheduling event: a replay of the seed must give the same.
    pub trace_hash: u64,
}

/// The data directory on the simulated disk.
pub const DATA_DIR: &str = "/sim/data";

fn broker_config(options: &SimOptions, tls: Option<&tls::RunCertificate>) -> BrokerConfig {
    let overrides = tls.map_or_else(Vec::new, tls::RunCertificate::broker_settings);
    let mut c = BrokerConfig::from_sources(None, &overrides).expect("broker config is valid");
    c.listeners[0].bind = "127.0.0.1:9092".parse().expect("address");
    c.listeners[0].advertised_host = "127.0.0.1".to_string();
    c.listeners[0].advertised_port = 9092;
    // The simulated workloads speak Kafka only; no schema registry (nor its `_schemas` topic).
    c.schema_registry_listener = None;
    c.log_dir = PathBuf::from(DATA_DIR);
    c.segment_bytes = 8 * 1024;
    c.index_interval_bytes = 512;
    c.num_partitions = 2;
    c.auto_create_topics = false;
    c.flush_policy = FlushPolicy::Fsync;
    c.num_shards = 2;
    c.retention_check_interval_ms = 300;
    c.groups.initial_rebalance_delay_ms = 100;
    if options.txn_producers > 0 {
        // Timed-out transactions (1 s timeouts) aborted within a simulated incarnation.
        c.transactions.abort_timed_out_interval_ms = 200;
    }
    c
}

/// Fault rates for `seed`: a third of the seeds run without faults.
fn fault_rates(seed: u64) -> FaultRates {
    match seed % 3 {
        0 => FaultRates::NONE,
        _ => FaultRates {
            read_eio: 200,
            write_eio: 300,
            write_enospc: 300,
            sync_eio: 300,
            latency_spike: 2_000,
            connection_reset: 1_500,
            bit_flip_at_crash: 100_000,
        },
    }
}

/// Takes the clean-shutdown marker and loads the cluster id, on the simulated disk (what
/// `server::run` does on the host's).
fn prepare_data_dir() -> Result<(String, bool), String> {
    let dir = PathBuf::from(DATA_DIR);
    let clean = minikafka_backend_sim::host_remove(&dir.join(CLEAN_SHUTDOWN_MARKER))
        .map_err(|e| format!("taking the marker: {e}"))?;
    let id_path = dir.join(CLUSTER_ID_FILE);
    let id = match minikafka_backend_sim::host_read(&id_path) {
        Some(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        None => {
            minikafka_backend_sim::host_put(&id_path, b"simcluster\n")
                .map_err(|e| format!("writing the cluster id: {e}"))?;
            "simcluster".to_string()
        }
    };
    Ok((id, clean))
}

/// Runs seed `seed`; `Err` names the seed and the first contradiction found.
pub fn run_seed(seed: u64, options: &SimOptions) -> Result<SeedReport, String> {
    let fail = |e: String| format!("seed {seed}: {e} (replay: mk-sim --seed {seed})");
    let faults = if options.faults {
        fault_rates(seed)
    } else {
        FaultRates::NONE
    };
    let mut config = SimConfig::new(seed);
    config.faults = faults;
    config.broken_sync_data = options.broken_sync_data;
    config.broken_sync_dir = options.broken_sync_dir;
    minikafka_backend_sim::install(config);
    // This thread runs the whole broker: the mutant (or none) applies to this seed only.
    minikafka_core::mutants::set(options.mutant);
    let certificate = options.tls.then(tls::RunCertificate::new);
    broker_access::set_tls(certificate.as_ref().map(tls::RunCertificate::connector));
    let model = Rc::new(RefCell::new(Model::default()));
    if options.txn_producers > 0 {
        model
            .borrow_mut()
            .with_markers
            .extend(broker_access::txn_partitions());
    }
    for p in 0..broker_access::TOPICS
        .iter()
        .find(|t| t.0 == broker_access::RETAINED_TOPIC)
        .map_or(0, |t| t.1)
    {
        model
            .borrow_mut()
            .retained
            .insert((broker_access::RETAINED_TOPIC.to_string(), p));
    }
    let mut report = SeedReport::default();
    for incarnation in 0..=options.incarnations {
        let last = incarnation == options.incarnations;
        if last {
            minikafka_backend_sim::set_faults(FaultRates::NONE);
        }
        let (cluster_id, clean) = prepare_data_dir().map_err(fail)?;
        let shutdown = Arc::new(AtomicBool::new(false));
        let plan = workload::Plan {
            incarnation,
            clients: options.clients,
            verify_only: last,
            ops: options.ops,
            members: minikafka_backend_sim::random_below(u64::from(options.members) + 1) as u32,
            txn_producers: options.txn_producers,
            commit_crash: (options.txn_producers > 0
                && !last
                && minikafka_backend_sim::random_below(2) == 0)
                .then(|| minikafka_backend_sim::random_below(3) as u32),
            shutdown: Arc::clone(&shutdown),
            model: Rc::clone(&model),
        };
        minikafka_backend_sim::spawn_beside_shards(move |backend| workload::drive(backend, plan));
        let faults_before = minikafka_backend_sim::stats().faults();
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            server::serve::<SimBackend>(
                broker_config(options, certificate.as_ref()),
                shutdown,
                cluster_id,
                clean,
            )
        }));
        let outcome = minikafka_backend_sim::last_outcome();
        match served {
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                return Err(fail(format!("incarnation {incarnation}: panic: {message}")));
            }
            Ok(Err(e)) => {
                let faulted = minikafka_backend_sim::stats().faults() > faults_before;
                if matches!(outcome, Some(RunOutcome::Stalled | RunOutcome::Livelocked))
                    || last
                    || !faulted
                {
                    return Err(fail(format!("incarnation {incarnation}: {e}")));
                }
                // A start or a run that failed on a fault injected meanwhile: restart.
                report.failed_starts += 1;
            }
            Ok(Ok(())) => {}
        }
        if let Some(e) = model.borrow().failure.clone() {
            return Err(fail(format!("incarnation {incarnation}: {e}")));
        }
        let flipped = minikafka_backend_sim::flipped_segments();
        let mut m = model.borrow_mut();
        for path in flipped {
            if let Some(name) = path
                .parent()
                .and_then(|d| d.file_name())
                .and_then(|n| n.to_str())
            {
                if let Some((topic, p)) = name.rsplit_once('-') {
                    if let Ok(p) = p.parse() {
                        m.damaged.insert((topic.to_string(), p));
                    }
                }
            }
        }
    }
    minikafka_core::mutants::set(None);
    report.tls_handshakes = broker_access::tls_handshakes();
    broker_access::set_tls(None);
    let m = model.borrow();
    if !m.acked.values().any(|log| !log.is_empty()) && m.acks > 0 {
        return Err(fail("acknowledged records but verified none".into()));
    }
    report.acks = m.acks;
    report.commits = m.commits;
    report.txn_commits = m.txns.commits_acked;
    report.txn_aborts = m.txns.aborts_acked;
    report.txn_timeouts = m.txns.timed_out;
    report.txn_checks = m.txns.ranges_checked;
    report.stats = minikafka_backend_sim::stats();
    report.virtual_time = minikafka_backend_sim::now().0;
    report.trace_hash = minikafka_backend_sim::trace_hash();
    Ok(report)
}
