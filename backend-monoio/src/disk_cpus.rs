//! Which CPUs take the interrupts of the disk that holds the data directory, so that shards can
//! be pinned there first.
//!
//! Why: a durable write waits for the disk's completion interrupt. On the development VM the
//! virtio disk's interrupts all land on CPU 1 while shard 0 was pinned to CPU 0, so every sync
//! ended with a cross-CPU wake-up of a pinned thread (in a VM, often of an idle vCPU). With the
//! shard on CPU 1 instead, the sequential durable p50 was 0.84 × (paired median of 7; p99 0.73 ×)
//! and the broker's CPU per record 0.95 × ([perf log](../../docs/perf-log/2026-12-07-shard-beside-disk-interrupts.md)).
//!
//! How: `stat` of the directory gives its block device; `/sys/dev/block/MAJ:MIN` leads to the
//! disk (the parent of a partition) and its `device`, up to the PCI function whose `msi_irqs`
//! lists the disk's interrupts; `/proc/interrupts` gives how many of those each CPU has taken
//! since boot. CPUs are then ordered by that count, most first (ties keep their order). Anything
//! missing (no sysfs, a disk without MSI interrupts, a tmpfs) leaves the order as it was: this is
//! a placement preference, never a reason to fail.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How many directories above the disk's `device` the search for `msi_irqs` climbs (virtio:
/// one, NVMe: two).
const DEVICE_ANCESTORS_MAX: usize = 4;

/// Interrupts of the disk holding `data_dir` taken by each CPU since boot, read from the host's
/// `/sys` and `/proc/interrupts`; `None` when they cannot be found.
pub fn disk_interrupts_per_cpu(data_dir: &Path) -> Option<BTreeMap<usize, u64>> {
    let interrupts = fs::read_to_string("/proc/interrupts").ok()?;
    disk_interrupts_per_cpu_in(data_dir, Path::new("/sys"), &interrupts)
}

/// [`disk_interrupts_per_cpu`] with the sysfs root and the text of `/proc/interrupts` given
/// (tests build both).
pub fn disk_interrupts_per_cpu_in(
    data_dir: &Path,
    sys_root: &Path,
    proc_interrupts: &str,
) -> Option<BTreeMap<usize, u64>> {
    let dev = fs::metadata(data_dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let irqs = disk_irqs(sys_root, major, minor)?;
    let counts = interrupts_per_cpu(proc_interrupts, &irqs);
    (!counts.is_empty()).then_some(counts)
}

/// The interrupt numbers of the PCI function behind block device `major:minor`.
fn disk_irqs(sys_root: &Path, major: u32, minor: u32) -> Option<HashSet<u32>> {
    let mut block = fs::canonicalize(sys_root.join(format!("dev/block/{major}:{minor}"))).ok()?;
    if block.join("partition").exists() {
        block = block.parent()?.to_path_buf();
    }
    let mut device: PathBuf = fs::canonicalize(block.join("device")).ok()?;
    for _ in 0..=DEVICE_ANCESTORS_MAX {
        if let Ok(entries) = fs::read_dir(device.join("msi_irqs")) {
            let irqs: HashSet<u32> = entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            return (!irqs.is_empty()).then_some(irqs);
        }
        device = device.parent()?.to_path_buf();
    }
    None
}

/// Sums, per CPU, the counts of `/proc/interrupts` lines whose number is in `irqs`. The header
/// names the columns (`CPU0 CPU1 …`: offline CPUs have none), so column `i` is the header's
/// `i`-th CPU.
pub fn interrupts_per_cpu(proc_interrupts: &str, irqs: &HashSet<u32>) -> BTreeMap<usize, u64> {
    let mut lines = proc_interrupts.lines();
    let columns: Vec<usize> = match lines.next() {
        Some(header) => header
            .split_whitespace()
            .filter_map(|name| name.strip_prefix("CPU")?.parse().ok())
            .collect(),
        None => return BTreeMap::new(),
    };
    let mut counts = BTreeMap::new();
    for line in lines {
        let mut fields = line.split_whitespace();
        let irq = fields
            .next()
            .and_then(|label| label.strip_suffix(':'))
            .and_then(|number| number.parse::<u32>().ok());
        if !irq.is_some_and(|irq| irqs.contains(&irq)) {
            continue;
        }
        for (&cpu, field) in columns.iter().zip(fields) {
            match field.parse::<u64>() {
                Ok(count) => *counts.entry(cpu).or_insert(0) += count,
                Err(_) => break,
            }
        }
    }
    counts
}

/// `cpus` ordered by `counts`, most interrupts first; CPUs with equal counts (or none) keep
/// their order in `cpus`.
pub fn order_by_interrupts(cpus: &[usize], counts: &BTreeMap<usize, u64>) -> Vec<usize> {
    let mut ordered = cpus.to_vec();
    ordered.sort_by_key(|cpu| std::cmp::Reverse(counts.get(cpu).copied().unwrap_or(0)));
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       \n\
 28:          0          0 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config\n\
 35:          0          2 PCI-MSIX-0000:00:02.0   0-edge      virtio1-config\n\
 36:         17    7955611 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
NMI:          0          0   Non-maskable interrupts\n\
ERR:          0\n";

    #[test]
    fn counts_sum_the_disks_lines_per_cpu_column() {
        let irqs = HashSet::from([35, 36]);
        let counts = interrupts_per_cpu(INTERRUPTS, &irqs);
        assert_eq!(counts, BTreeMap::from([(0, 17), (1, 7_955_613)]));
        assert!(interrupts_per_cpu(INTERRUPTS, &HashSet::from([99])).is_empty());
        assert!(interrupts_per_cpu("", &irqs).is_empty());
    }

    #[test]
    fn columns_follow_the_header_when_cpus_are_missing() {
        let text = "      CPU0  CPU3\n 7:  5  9  edge  disk\n";
        let counts = interrupts_per_cpu(text, &HashSet::from([7]));
        assert_eq!(counts, BTreeMap::from([(0, 5), (3, 9)]));
    }

    #[test]
    fn cpus_with_more_of_the_disks_interrupts_come_first_and_ties_keep_their_order() {
        let counts = BTreeMap::from([(1, 100), (3, 100), (2, 5)]);
        assert_eq!(
            order_by_interrupts(&[0, 1, 2, 3], &counts),
            vec![1, 3, 2, 0]
        );
        assert_eq!(order_by_interrupts(&[0, 1], &BTreeMap::new()), vec![0, 1]);
    }

    /// A sysfs tree as a virtio disk with a partition shows it: the partition's directory
    /// under the disk's, the disk's `device` a link to the virtio device, `msi_irqs` on its
    /// parent, the PCI function.
    #[test]
    fn the_disk_is_found_through_a_fake_sysfs_from_the_directorys_device() {
        let root = tempfile::tempdir().expect("tempdir");
        let data = tempfile::tempdir().expect("tempdir");
        let dev = fs::metadata(data.path()).expect("stat").dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let sys = root.path();
        let pci = sys.join("devices/pci0000:00/0000:00:02.0");
        fs::create_dir_all(pci.join("virtio1/block/vda/vda1")).expect("mkdir");
        fs::create_dir_all(pci.join("msi_irqs/35")).expect("mkdir");
        fs::create_dir_all(pci.join("msi_irqs/36")).expect("mkdir");
        fs::write(pci.join("virtio1/block/vda/vda1/partition"), "1").expect("write");
        std::os::unix::fs::symlink(pci.join("virtio1"), pci.join("virtio1/block/vda/device"))
            .expect("link");
        fs::create_dir_all(sys.join("dev/block")).expect("mkdir");
        std::os::unix::fs::symlink(
            pci.join("virtio1/block/vda/vda1"),
            sys.join(format!("dev/block/{major}:{minor}")),
        )
        .expect("link");

        let counts = disk_interrupts_per_cpu_in(data.path(), sys, INTERRUPTS);
        assert_eq!(counts, Some(BTreeMap::from([(0, 17), (1, 7_955_613)])));
        // Without the device's interrupts in /proc/interrupts, or without the sysfs entry,
        // nothing is known.
        assert_eq!(
            disk_interrupts_per_cpu_in(data.path(), sys, "  CPU0\n"),
            None
        );
        let empty = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            disk_interrupts_per_cpu_in(data.path(), empty.path(), INTERRUPTS),
            None
        );
    }
}
