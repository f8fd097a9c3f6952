//! The segment swap that puts a cleaning's output in place, and what recovery does with a
//! swap a crash interrupted (I24).
//!
//! Contract: names and decisions only; the broker performs each step on the backend.
//!
//! A cleaning replaces the sealed segments whose base offsets lie in `[base, end)` by one new
//! segment with base offset `base` (I1: its records keep their offsets). The steps, each
//! durable before the next begins:
//! 1. Write the new log to `<base>-<end>.log.cleaned` and sync it.
//! 2. Rename it to `<base>-<end>.log.swap` and sync the directory. **The commit point.**
//! 3. Remove the old segments in `(base, end)` and the first one's indexes; sync the directory.
//! 4. Rename the swap file over `<base>.log` (atomic: the old first log is replaced, never
//!    missing) and sync the directory; then write the new indexes (a crash here leaves a
//!    missing or shorter index, which recovery rebuilds or trusts as it would any).
//!
//! A crash before the commit point leaves the old segments whole plus a `.cleaned` file to
//! discard; after it, the swap file holds everything the old segments kept (it was synced
//! before the rename) and recovery finishes steps 3 and 4. Either way the log is the old one or
//! the new one, never a mix and never a loss. [`recovery_case`] is the decision table; its
//! test enumerates every combination of the checks.
//!
//! Readers in flight keep the open file of the segment they started on: removing or replacing
//! a name does not close a file (POSIX).

use crate::types::Offset;

/// Suffix of a cleaning's output before the commit point.
pub const CLEANED_SUFFIX: &str = "log.cleaned";
/// Suffix of a committed cleaning's output not yet renamed into place.
pub const SWAP_SUFFIX: &str = "log.swap";

/// The offsets a swap replaces: the old segments with base offsets in `[base, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwapRange {
    /// Base offset of the first old segment, and of the new one.
    pub base: Offset,
    /// Base offset of the first segment not replaced.
    pub end: Offset,
}

/// Which stage a swap file name says the swap reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapStage {
    /// `<base>-<end>.log.cleaned`: before the commit point.
    Cleaned,
    /// `<base>-<end>.log.swap`: committed.
    Swap,
}

/// The name of a swap file for `range` at `stage`.
pub fn file_name(range: SwapRange, stage: SwapStage) -> String {
    let suffix = match stage {
        SwapStage::Cleaned => CLEANED_SUFFIX,
        SwapStage::Swap => SWAP_SUFFIX,
    };
    format!("{:020}-{:020}.{suffix}", range.base.0, range.end.0)
}

/// Parses a swap file name written by [`file_name`]; `None` for any other name.
pub fn parse_file_name(name: &str) -> Option<(SwapRange, SwapStage)> {
    let (stem, suffix) = name.split_once('.')?;
    let stage = match suffix {
        CLEANED_SUFFIX => SwapStage::Cleaned,
        SWAP_SUFFIX => SwapStage::Swap,
        _ => return None,
    };
    let (base, end) = stem.split_once('-')?;
    let digits = |s: &str| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(base) || !digits(end) {
        return None;
    }
    let range = SwapRange {
        base: Offset(base.parse().ok()?),
        end: Offset(end.parse().ok()?),
    };
    (range.base < range.end).then_some((range, stage))
}

/// What recovery found for one swap range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapChecks {
    /// A `.cleaned` file exists for the range.
    pub cleaned_present: bool,
    /// A `.swap` file exists for the range.
    pub swap_present: bool,
    /// The old first segment `<base>.log` exists.
    pub first_old_present: bool,
}

/// What recovery does for one swap range (the decision table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapRecovery {
    /// **Discard**: no swap file: the crash came before the commit point. Remove the
    /// `.cleaned` file; the old segments are whole.
    DiscardCleaned,
    /// **Finish**: the swap is committed. Remove any `.cleaned` leftover, the old segments in
    /// `(base, end)` and the first one's indexes, then rename the swap file to `<base>.log`.
    FinishSwap,
    /// **Finish, first already gone**: as [`SwapRecovery::FinishSwap`]; the old first log is
    /// absent because the base segment was emptied by retention before the crash or its removal
    /// was interrupted. The rename creates `<base>.log`.
    FinishSwapNoFirst,
    /// Nothing to do (the checks found no swap file of either kind).
    Nothing,
}

/// The decision table. Each combination of checks matches exactly one case (see the test).
pub fn recovery_case(checks: SwapChecks) -> SwapRecovery {
    match (
        checks.swap_present,
        checks.cleaned_present,
        checks.first_old_present,
    ) {
        (true, _, true) => SwapRecovery::FinishSwap,
        (true, _, false) => SwapRecovery::FinishSwapNoFirst,
        (false, true, _) => SwapRecovery::DiscardCleaned,
        (false, false, _) => SwapRecovery::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every combination of the checks, and the one case it must meet: a `.swap` file always
    /// wins (committed), a `.cleaned` file alone is always discarded.
    #[test]
    fn every_combination_meets_exactly_one_case() {
        let cases = [
            SwapRecovery::DiscardCleaned,
            SwapRecovery::FinishSwap,
            SwapRecovery::FinishSwapNoFirst,
            SwapRecovery::Nothing,
        ];
        for bits in 0u8..8 {
            let checks = SwapChecks {
                cleaned_present: bits & 1 != 0,
                swap_present: bits & 2 != 0,
                first_old_present: bits & 4 != 0,
            };
            let case = recovery_case(checks);
            let matching: Vec<_> = cases
                .iter()
                .filter(|c| match c {
                    SwapRecovery::DiscardCleaned => !checks.swap_present && checks.cleaned_present,
                    SwapRecovery::FinishSwap => checks.swap_present && checks.first_old_present,
                    SwapRecovery::FinishSwapNoFirst => {
                        checks.swap_present && !checks.first_old_present
                    }
                    SwapRecovery::Nothing => !checks.swap_present && !checks.cleaned_present,
                })
                .collect();
            assert_eq!(matching, vec![&case], "{checks:?}");
        }
    }

    #[test]
    fn names_round_trip_and_others_are_refused() {
        let range = SwapRange {
            base: Offset(5),
            end: Offset(42),
        };
        for stage in [SwapStage::Cleaned, SwapStage::Swap] {
            let name = file_name(range, stage);
            assert_eq!(parse_file_name(&name), Some((range, stage)));
        }
        assert_eq!(
            file_name(range, SwapStage::Swap),
            "00000000000000000005-00000000000000000042.log.swap"
        );
        for bad in [
            "00000000000000000005.log",
            "00000000000000000005-00000000000000000042.log",
            "00000000000000000042-00000000000000000005.log.swap",
            "5-42.log.swap",
            "00000000000000000005-0000000000000000004x.log.cleaned",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }
}
