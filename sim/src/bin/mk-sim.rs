//! `mk-sim`: runs the deterministic broker simulation. `--seed N` replays one seed;
//! `--seeds N` runs N seeds from `--first`; prints a summary (seeds, simulated hours, crashes,
//! faults) and every failure with its seed. Exits 1 if any seed failed.

use std::process::ExitCode;

use clap::Parser;
use minikafka_sim::{run_seed, Mutant, SimOptions};

/// Deterministic simulation of the minikafka broker.
#[derive(Parser, Debug)]
#[command(name = "mk-sim")]
struct Args {
    /// Replay exactly this seed.
    #[arg(long)]
    seed: Option<u64>,
    /// How many seeds to run (from `--first`).
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed of a `--seeds` range.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Broker incarnations per seed (each ends in a crash or a clean shutdown).
    #[arg(long, default_value_t = 4)]
    incarnations: u32,
    /// Run the deliberately broken disk (`sync_data` makes nothing durable).
    #[arg(long)]
    broken_sync: bool,
    /// Run the deliberately broken disk whose `sync_dir` makes nothing durable.
    #[arg(long)]
    broken_sync_dir: bool,
    /// Transactional producers per incarnation (0: no transactional workload).
    #[arg(long, default_value_t = 0)]
    txn_producers: u32,
    /// Run a deliberately broken broker: `markers-before-prepare` (COMMIT markers written
    /// before the PrepareCommit record is durable) or `lso-ignores-ongoing` (the last stable
    /// offset is the high watermark). Needs `--txn-producers`.
    #[arg(long)]
    mutant: Option<String>,
    /// No injected faults (crashes still happen).
    #[arg(long)]
    no_faults: bool,
    /// The broker's listener speaks SSL and every simulated client connects through TLS.
    #[arg(long)]
    tls: bool,
    /// Run every seed twice and fail it if the two runs' event traces differ.
    #[arg(long)]
    replay_check: bool,
    /// Stop starting seeds after this many seconds of wall time (a soak's budget).
    #[arg(long)]
    budget_secs: Option<u64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mutant = match args.mutant.as_deref() {
        None => None,
        Some("markers-before-prepare") => Some(Mutant::MarkersBeforePrepareDurable),
        Some("lso-ignores-ongoing") => Some(Mutant::LsoIgnoresOngoing),
        Some(other) => {
            eprintln!(
                "mk-sim: unknown --mutant {other:?} (markers-before-prepare, lso-ignores-ongoing)"
            );
            return ExitCode::from(2);
        }
    };
    let options = SimOptions {
        txn_producers: args.txn_producers,
        mutant,
        incarnations: args.incarnations,
        faults: !args.no_faults,
        broken_sync_data: args.broken_sync,
        broken_sync_dir: args.broken_sync_dir,
        tls: args.tls,
        ..SimOptions::default()
    };
    let seeds: Vec<u64> = match args.seed {
        Some(s) => vec![s],
        None => (args.first..args.first.saturating_add(args.seeds)).collect(),
    };
    let (mut virtual_secs, mut crashes, mut faults, mut acks, mut failed) = (0f64, 0, 0, 0, 0);
    let mut commits = 0;
    let started = std::time::Instant::now();
    let mut ran = 0u64;
    for seed in &seeds {
        if args
            .budget_secs
            .is_some_and(|b| started.elapsed().as_secs() >= b)
        {
            break;
        }
        ran += 1;
        if ran.is_multiple_of(50) {
            eprintln!(
                "mk-sim: {ran} seeds run, {failed} failed, {:.2} simulated hours, {crashes} crashes, {faults} faults, {acks} acks, {:.0} s",
                virtual_secs / 3600.0,
                started.elapsed().as_secs_f64()
            );
        }
        let mut result = run_seed(*seed, &options);
        if args.replay_check {
            if let Ok(first) = &result {
                match run_seed(*seed, &options) {
                    Ok(again) if again.trace_hash == first.trace_hash => {}
                    Ok(again) => {
                        result = Err(format!(
                            "seed {seed}: did not replay (trace {:016x}, then {:016x})",
                            first.trace_hash, again.trace_hash
                        ))
                    }
                    Err(e) => result = Err(format!("seed {seed}: did not replay: {e}")),
                }
            }
        }
        match result {
            Ok(r) => {
                if args.seed.is_some() {
                    println!(
                        "seed {seed}: {} records and {} offset commits acknowledged, {} transactions committed, {} aborted, {} timed out, {} crashes, {} faults, trace {:016x}",
                        r.acks,
                        r.commits,
                        r.txn_commits,
                        r.txn_aborts,
                        r.txn_timeouts,
                        r.stats.crashes,
                        r.stats.faults(),
                        r.trace_hash
                    );
                }
                virtual_secs += r.virtual_time.as_secs_f64();
                crashes += r.stats.crashes;
                faults += r.stats.faults();
                acks += r.acks;
                commits += r.commits;
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {e}");
            }
        }
    }
    println!(
        "mk-sim: {} seeds, {failed} failed, {:.2} simulated hours, {crashes} crashes, {faults} faults, {acks} records and {commits} offset commits acknowledged, {:.1} s wall",
        ran,
        virtual_secs / 3600.0,
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
