//! `config/server.properties` and the README's settings tables against the settings table
//! (`broker/src/config/table.rs`): the real broker starts from the file and serves
//! librdkafka; every broker setting of the table (every spelling, those without effect on a
//! single node included) appears in it; every setting it names is one the broker accepts;
//! each active line is documented with its default and is the table's default (the file
//! parses to the same settings as no file); the README's section is the one generated from
//! the table (`MINIKAFKA_WRITE_README=1` rewrites it).
//!
//! Contract: the broker test starts its own broker ([`common::Broker`]) inside
//! [`common::bounded`], overriding only the port and data directory.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use minikafka_broker::config::docs::{with_generated_section, README_BEGIN};
use minikafka_broker::config::{broker_setting, BrokerConfig, ConfigError, SETTINGS};
use rdkafka::message::Message;
use rdkafka::Offset;

use common::librdkafka::*;
use common::{bounded, Broker};

fn repo_file(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

fn example() -> String {
    let path = repo_file("config/server.properties");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn is_setting_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.')
}

/// Every broker spelling the settings table accepts.
fn accepted_by_the_table() -> BTreeSet<String> {
    SETTINGS
        .iter()
        .filter(|s| s.is_broker())
        .flat_map(|s| s.spellings())
        .map(str::to_string)
        .collect()
}

/// `(key, value, active)` for every `key=value` line of the file and every commented
/// `#key=value` line whose key looks like a setting.
fn named_in(text: &str) -> Vec<(String, String, bool)> {
    text.lines()
        .filter_map(|line| {
            let (active, body) = match line.strip_prefix('#') {
                Some(rest) => (false, rest),
                None => (true, line),
            };
            let (key, value) = body.split_once('=')?;
            let key = key.trim();
            (is_setting_name(key) && !key.contains(' '))
                .then(|| (key.to_string(), value.trim().to_string(), active))
        })
        .collect()
}

#[test]
fn every_setting_the_broker_accepts_is_in_the_example() {
    let text = example();
    let named: BTreeSet<String> = named_in(&text).into_iter().map(|(k, _, _)| k).collect();
    let accepted = accepted_by_the_table();
    assert!(accepted.len() >= 70, "the table has only {accepted:?}");
    let missing: Vec<&String> = accepted.difference(&named).collect();
    assert!(
        missing.is_empty(),
        "config/server.properties lacks {missing:?}"
    );
}

#[test]
fn every_setting_in_the_example_is_accepted_documented_and_the_default() {
    let text = example();
    for (key, value, _) in named_in(&text) {
        let result = BrokerConfig::from_sources(None, &[(key.clone(), value.clone())]);
        assert!(
            !matches!(result, Err(ConfigError::Unknown(_))),
            "{key}={value} is not a setting the broker accepts"
        );
        result.unwrap_or_else(|e| panic!("{key}={value}: {e}"));
    }
    // Each active line is its row's default, as the table writes it.
    for (key, value, active) in named_in(&text) {
        let setting = broker_setting(&key).unwrap_or_else(|| panic!("{key} is in no row"));
        if active {
            assert_eq!(
                setting.name, key,
                "an active line uses the setting's own name"
            );
            assert_eq!(
                value, setting.default,
                "{key}: the file's value is not the default"
            );
        }
    }
    // Each active line sits under a comment block that states its default.
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with('#') || !line.contains('=') {
            continue;
        }
        let documented = lines[..i]
            .iter()
            .rev()
            .take_while(|l| !l.trim().is_empty())
            .any(|l| l.starts_with('#') && l.contains("Default"));
        assert!(documented, "`{line}` has no comment giving its default");
    }
    // The active lines are the defaults: the file starts the same broker as no file.
    let mut from_file = BrokerConfig::from_sources(Some(&text), &[]).expect("the example parses");
    from_file.explicit.clear();
    assert_eq!(from_file, BrokerConfig::default());
}

/// The README's settings section is the one generated from the table.
#[test]
fn the_readme_settings_section_is_generated_from_the_table() {
    let path = repo_file("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let generated = with_generated_section(&readme)
        .unwrap_or_else(|| panic!("README.md lacks the line {README_BEGIN:?} and its end"));
    if std::env::var_os("MINIKAFKA_WRITE_README").is_some() {
        std::fs::write(&path, &generated).expect("README.md written");
        return;
    }
    assert!(
        readme == generated,
        "README.md's settings section differs from the table: rerun this test with \
         MINIKAFKA_WRITE_README=1 to regenerate it"
    );
}

/// The real broker starts from the file (port and data directory overridden) and serves a
/// librdkafka round trip.
#[test]
fn the_broker_starts_from_the_example_and_serves() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .properties_file(&repo_file("config/server.properties"))
            .start();
        create_topics(&broker, &[("from-example", 1)]);
        let mut producer = TestProducer::new(&broker, &[]);
        let acks = producer.produce_all(&[Rec::new("from-example", Some(0), b"hello")]);
        assert_eq!(expect_all_ok(&acks), vec![(0, 0)]);
        let consumer = consumer(&broker, &[]);
        let read = read_partition(&consumer, "from-example", 0, Offset::Beginning, 1);
        assert_eq!(read[0].payload(), Some(&b"hello"[..]));
    });
}
