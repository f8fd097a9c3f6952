//! What `mk groups describe` and `mk groups reset-offsets` compute, as pure functions: lag rows
//! laid out as `kafka-consumer-groups.sh --describe` prints them, and offset reset plans.
//!
//! Contract: inputs are plain maps (committed offsets, log start/end offsets, members'
//! assignments); outputs are rows and text. No I/O, no clock.

use std::collections::{BTreeMap, BTreeSet};

use minikafka_core::types::Offset;

use super::admin::DescribedMember;
use crate::consumer::TopicPartition;

/// One line of `--describe`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LagRow {
    /// Group id.
    pub group: String,
    /// Topic-partition.
    pub partition: TopicPartition,
    /// The committed offset, if any.
    pub current_offset: Option<Offset>,
    /// The log end offset, if known.
    pub log_end_offset: Option<Offset>,
    /// The member owning the partition: (consumer id, host, client id).
    pub owner: Option<(String, String, String)>,
}

impl LagRow {
    /// Log end minus committed; unknown when either is.
    pub fn lag(&self) -> Option<i64> {
        Some(self.log_end_offset?.0 - self.current_offset?.0)
    }
}

/// Rows for every partition the group has committed or has assigned, sorted by topic and
/// partition (Kafka's order).
pub fn lag_rows(
    group: &str,
    committed: &BTreeMap<TopicPartition, Offset>,
    log_end: &BTreeMap<TopicPartition, Offset>,
    members: &[DescribedMember],
) -> Vec<LagRow> {
    let mut owners: BTreeMap<&TopicPartition, &DescribedMember> = BTreeMap::new();
    for m in members {
        for tp in &m.assignment {
            owners.insert(tp, m);
        }
    }
    let partitions: BTreeSet<&TopicPartition> =
        committed.keys().chain(owners.keys().copied()).collect();
    partitions
        .into_iter()
        .map(|tp| LagRow {
            group: group.to_string(),
            partition: tp.clone(),
            current_offset: committed.get(tp).copied(),
            log_end_offset: log_end.get(tp).copied(),
            owner: owners.get(tp).map(|m| {
                (
                    m.member_id.clone(),
                    m.client_host.clone(),
                    m.client_id.clone(),
                )
            }),
        })
        .collect()
}

fn dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".to_string())
}

/// Lays out rows with a header, columns padded as Kafka's tool pads them.
pub fn format_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.len());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$} ", width = widths[i]));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// The `--describe` header.
pub const DESCRIBE_HEADER: [&str; 9] = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
];

/// `--describe`'s table for `rows`.
pub fn describe_table(rows: &[LagRow]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let (id, host, client) = match &r.owner {
                Some((id, host, client)) => (id.clone(), host.clone(), client.clone()),
                None => ("-".into(), "-".into(), "-".into()),
            };
            vec![
                r.group.clone(),
                r.partition.topic.clone(),
                r.partition.partition.to_string(),
                dash(r.current_offset.map(|o| o.0.to_string())),
                dash(r.log_end_offset.map(|o| o.0.to_string())),
                dash(r.lag().map(|l| l.to_string())),
                id,
                host,
                client,
            ]
        })
        .collect();
    format_table(&DESCRIBE_HEADER, &cells)
}

/// Where `reset-offsets` moves each partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetSpec {
    /// `--to-earliest`.
    ToEarliest,
    /// `--to-latest`.
    ToLatest,
    /// `--to-offset N`.
    ToOffset(i64),
    /// `--shift-by N` (from the committed offset; from the log end when there is none... as
    /// Kafka does, the committed offset or, lacking one, the log start).
    ShiftBy(i64),
    /// `--to-datetime T`: the first offset at or after T (ms since the epoch).
    ToDatetime(i64),
}

/// The log facts one partition's reset needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionRange {
    /// Log start offset.
    pub earliest: Offset,
    /// Log end offset.
    pub latest: Offset,
    /// For `--to-datetime`: the offset ListOffsets found for the time (`None`: no record at or
    /// after it, so the log end).
    pub at_time: Option<Offset>,
}

/// The new offset of each partition, clamped into `[earliest, latest]` as Kafka clamps.
pub fn plan_reset(
    spec: ResetSpec,
    committed: &BTreeMap<TopicPartition, Offset>,
    ranges: &BTreeMap<TopicPartition, PartitionRange>,
) -> BTreeMap<TopicPartition, Offset> {
    ranges
        .iter()
        .map(|(tp, r)| {
            let wanted = match spec {
                ResetSpec::ToEarliest => r.earliest.0,
                ResetSpec::ToLatest => r.latest.0,
                ResetSpec::ToOffset(n) => n,
                ResetSpec::ShiftBy(n) => committed
                    .get(tp)
                    .map_or(r.earliest.0, |o| o.0)
                    .saturating_add(n),
                ResetSpec::ToDatetime(_) => r.at_time.unwrap_or(r.latest).0,
            };
            let clamped = wanted.clamp(r.earliest.0, r.latest.0.max(r.earliest.0));
            (tp.clone(), Offset(clamped))
        })
        .collect()
}

/// `reset-offsets`' table: GROUP TOPIC PARTITION NEW-OFFSET.
pub fn reset_table(group: &str, plan: &BTreeMap<TopicPartition, Offset>) -> String {
    let cells: Vec<Vec<String>> = plan
        .iter()
        .map(|(tp, o)| {
            vec![
                group.to_string(),
                tp.topic.clone(),
                tp.partition.to_string(),
                o.0.to_string(),
            ]
        })
        .collect();
    format_table(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], &cells)
}

/// Parses Kafka's `--to-datetime` format `YYYY-MM-DDTHH:mm:SS[.sss]` (UTC, an optional `Z`)
/// into ms since the epoch.
pub fn parse_datetime(text: &str) -> Option<i64> {
    let text = text.strip_suffix('Z').unwrap_or(text);
    let (date, time) = text.split_once('T')?;
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    let (hms, millis) = match time.split_once('.') {
        Some((hms, frac)) if frac.len() == 3 => (hms, frac.parse::<i64>().ok()?),
        Some(_) => return None,
        None => (time, 0),
    };
    let mut t = hms.splitn(3, ':');
    let hour: i64 = t.next()?.parse().ok()?;
    let minute: i64 = t.next()?.parse().ok()?;
    let second: i64 = t.next()?.parse().ok()?;
    let valid = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..60).contains(&second);
    if !valid {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn rows_cover_committed_and_assigned_partitions_with_lag() {
        let committed = BTreeMap::from([(tp(0), Offset(3)), (tp(1), Offset(10))]);
        let ends = BTreeMap::from([(tp(0), Offset(10)), (tp(1), Offset(10)), (tp(2), Offset(4))]);
        let members = vec![DescribedMember {
            member_id: "m-1".into(),
            group_instance_id: None,
            client_id: "mk".into(),
            client_host: "/127.0.0.1".into(),
            assignment: vec![tp(0), tp(2)],
        }];
        let rows = lag_rows("g", &committed, &ends, &members);
        let lags: Vec<Option<i64>> = rows.iter().map(LagRow::lag).collect();
        assert_eq!(lags, vec![Some(7), Some(0), None]);
        let table = describe_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            DESCRIBE_HEADER.to_vec()
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            vec!["g", "t", "0", "3", "10", "7", "m-1", "/127.0.0.1", "mk"]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            vec!["g", "t", "1", "10", "10", "0", "-", "-", "-"]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            vec!["g", "t", "2", "-", "4", "-", "m-1", "/127.0.0.1", "mk"]
        );
        // Columns line up: every field of a column starts at the same place.
        let start = |line: &str| line.find("CURRENT-OFFSET").or_else(|| line.find(" 3 "));
        assert!(start(lines[0]).is_some());
        assert_eq!(lines[0].find("LAG"), lines[1].find(" 7 ").map(|i| i + 1));
    }

    #[test]
    fn reset_plans_clamp_into_the_log() {
        let ranges = BTreeMap::from([
            (
                tp(0),
                PartitionRange {
                    earliest: Offset(2),
                    latest: Offset(10),
                    at_time: Some(Offset(5)),
                },
            ),
            (
                tp(1),
                PartitionRange {
                    earliest: Offset(0),
                    latest: Offset(4),
                    at_time: None,
                },
            ),
        ]);
        let committed = BTreeMap::from([(tp(0), Offset(8))]);
        let plan = |spec| -> Vec<i64> {
            plan_reset(spec, &committed, &ranges)
                .values()
                .map(|o| o.0)
                .collect()
        };
        assert_eq!(plan(ResetSpec::ToEarliest), vec![2, 0]);
        assert_eq!(plan(ResetSpec::ToLatest), vec![10, 4]);
        assert_eq!(plan(ResetSpec::ToOffset(7)), vec![7, 4]);
        assert_eq!(plan(ResetSpec::ToOffset(0)), vec![2, 0]);
        assert_eq!(plan(ResetSpec::ShiftBy(5)), vec![10, 4]);
        assert_eq!(plan(ResetSpec::ShiftBy(-3)), vec![5, 0]);
        assert_eq!(plan(ResetSpec::ToDatetime(0)), vec![5, 4]);
        let table = reset_table("g", &plan_reset(ResetSpec::ToLatest, &committed, &ranges));
        assert_eq!(table.lines().count(), 3);
        assert!(table.starts_with("GROUP"));
    }

    #[test]
    fn datetimes_parse_as_kafka_writes_them() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00.000"), Some(0));
        assert_eq!(
            parse_datetime("2023-11-14T22:13:20.000"),
            Some(1_700_000_000_000)
        );
        assert_eq!(parse_datetime("2023-11-14T22:13:20.5"), None);
        assert_eq!(
            parse_datetime("2024-02-29T12:00:00Z"),
            Some(1_709_208_000_000)
        );
        assert_eq!(parse_datetime("2024-13-01T00:00:00"), None);
        assert_eq!(parse_datetime("yesterday"), None);
    }
}
