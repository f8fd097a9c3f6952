//! Broker loggers (resource type BROKER_LOGGER): the log level of each `tracing` target,
//! described and changed at run time as `kafka-configs.sh --entity-type broker-loggers` does.
//!
//! Contract:
//! - The levels in force are a [`LogLevels`]: the `root` level (a directive without target)
//!   and one level per target; `RUST_LOG` directives this model does not express (span or
//!   field filters) are kept verbatim after them. [`LogLevels::directives`] is the
//!   `RUST_LOG`-style filter they make; the process applies it through the reload function
//!   it [`install`]ed (the binary's reloadable `EnvFilter`). A process that installed none
//!   (the library embedded elsewhere) answers BROKER_LOGGER requests INVALID_REQUEST.
//! - Levels are Kafka's names: `TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR` and `OFF`, exactly.
//! - DescribeConfigs (resource name = `node.id`): `root`, the broker's own targets
//!   ([`BROKER_TARGETS`]) and every target with a level, each with its effective level (its
//!   own, else root's), source 6 (DYNAMIC_BROKER_LOGGER_CONFIG), not read-only.
//! - IncrementalAlterConfigs: SET gives a target its level (a bad level, or a name that is
//!   not a Rust module path, INVALID_CONFIG); DELETE gives it back root's (deleting `root`:
//!   INVALID_REQUEST); APPEND/SUBTRACT: INVALID_REQUEST, as Kafka. All operations of a
//!   resource are checked before any applies. AlterConfigs (the legacy one) cannot change
//!   loggers: INVALID_REQUEST. Changes last until the process exits, as Kafka's do.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use minikafka_core::error_code::ErrorCode;

use super::alter_configs::{ConfigOp, OpKind};
use super::config_entries::ConfigEntry;
use super::topics::AdminError;

/// Resource type BROKER_LOGGER.
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
/// Config source DYNAMIC_BROKER_LOGGER_CONFIG.
pub const SOURCE_BROKER_LOGGER: i8 = 6;
/// The logger without target (the default level).
pub const ROOT_LOGGER: &str = "root";
/// Targets always described: the binary's and the broker library's.
pub const BROKER_TARGETS: [&str; 2] = ["minikafka", "minikafka_broker"];
/// Kafka's level names this broker accepts, in increasing verbosity after `OFF`.
pub const LEVELS: [&str; 6] = ["OFF", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"];
/// Kafka config type STRING.
const TYPE_STRING: i8 = 2;

/// The log levels in force (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLevels {
    /// The level of `root` (Kafka's name).
    pub root: String,
    /// Levels by target.
    pub targets: BTreeMap<String, String>,
    /// Directives kept verbatim (span or field filters).
    pub other: Vec<String>,
}

/// Kafka's name of a `tracing` level directive; `None` when it is not one.
fn kafka_level(directive: &str) -> Option<String> {
    let upper = directive.to_ascii_uppercase();
    LEVELS.contains(&upper.as_str()).then_some(upper)
}

/// Whether `name` may be a `tracing` target: a Rust module path.
fn is_target(name: &str) -> bool {
    !name.is_empty()
        && name.split("::").all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

impl LogLevels {
    /// The levels a `RUST_LOG`-style filter sets (root `INFO` unless it says otherwise).
    pub fn parse(filter: &str) -> LogLevels {
        let mut out = LogLevels {
            root: "INFO".to_string(),
            targets: BTreeMap::new(),
            other: Vec::new(),
        };
        for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            if let Some(level) = kafka_level(directive) {
                out.root = level;
                continue;
            }
            match directive.split_once('=') {
                Some((target, level)) if is_target(target) => match kafka_level(level) {
                    Some(level) => {
                        out.targets.insert(target.to_string(), level);
                    }
                    None => out.other.push(directive.to_string()),
                },
                _ => out.other.push(directive.to_string()),
            }
        }
        out
    }

    /// The `RUST_LOG`-style filter of these levels.
    pub fn directives(&self) -> String {
        let mut parts = vec![self.root.to_ascii_lowercase()];
        parts.extend(self.other.iter().cloned());
        parts.extend(
            self.targets
                .iter()
                .map(|(target, level)| format!("{target}={}", level.to_ascii_lowercase())),
        );
        parts.join(",")
    }

    /// DescribeConfigs entries (see the module documentation).
    pub fn entries(&self) -> Vec<ConfigEntry> {
        let mut names: Vec<&str> = vec![ROOT_LOGGER];
        names.extend(BROKER_TARGETS);
        names.extend(
            self.targets
                .keys()
                .map(String::as_str)
                .filter(|t| !BROKER_TARGETS.contains(t)),
        );
        names
            .into_iter()
            .map(|name| ConfigEntry {
                name: name.to_string(),
                value: self.targets.get(name).unwrap_or(&self.root).clone(),
                source: SOURCE_BROKER_LOGGER,
                read_only: false,
                config_type: TYPE_STRING,
                documentation: None,
                synonyms: Vec::new(),
            })
            .collect()
    }

    /// These levels after `ops`, or Kafka's error for the first bad one.
    pub fn altered(&self, ops: &[ConfigOp]) -> Result<LogLevels, AdminError> {
        let mut out = self.clone();
        for op in ops {
            let name = op.key.as_str();
            match op.op {
                Some(OpKind::Set) => {
                    let value = op.value.as_deref().unwrap_or("");
                    if !LEVELS.contains(&value) {
                        return Err((
                            ErrorCode::INVALID_CONFIG,
                            format!(
                                "cannot set logger {name} to {value:?}: the levels are {}",
                                LEVELS.join(", ")
                            ),
                        ));
                    }
                    if name == ROOT_LOGGER {
                        out.root = value.to_string();
                    } else if is_target(name) {
                        out.targets.insert(name.to_string(), value.to_string());
                    } else {
                        return Err((
                            ErrorCode::INVALID_CONFIG,
                            format!("logger {name:?} is not a module path"),
                        ));
                    }
                }
                Some(OpKind::Delete) if name == ROOT_LOGGER => {
                    return Err((
                        ErrorCode::INVALID_REQUEST,
                        "removing the log level of the root logger is not allowed".into(),
                    ))
                }
                Some(OpKind::Delete) => {
                    out.targets.remove(name);
                }
                Some(OpKind::Append | OpKind::Subtract) | None => {
                    return Err((
                        ErrorCode::INVALID_REQUEST,
                        format!(
                            "logger {name}: only SET and DELETE are supported for broker loggers"
                        ),
                    ))
                }
            }
        }
        Ok(out)
    }
}

/// Applies a `RUST_LOG`-style filter to the process's subscriber.
pub type Reload = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

struct Installed {
    levels: Mutex<LogLevels>,
    reload: Reload,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Makes `initial` (the filter the subscriber started with) the levels in force, changed
/// through `reload`. Called once, by the binary; a second call is ignored.
pub fn install(initial: &str, reload: Reload) {
    let _ = INSTALLED.set(Installed {
        levels: Mutex::new(LogLevels::parse(initial)),
        reload,
    });
}

fn installed() -> Result<&'static Installed, AdminError> {
    INSTALLED.get().ok_or_else(|| {
        (
            ErrorCode::INVALID_REQUEST,
            "this process has no reloadable log filter".to_string(),
        )
    })
}

/// The levels in force.
pub fn current() -> Result<LogLevels, AdminError> {
    let installed = installed()?;
    Ok(installed
        .levels
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone())
}

/// Applies `ops` to the levels in force (all checked first; none when `validate_only`).
pub fn alter(ops: &[ConfigOp], validate_only: bool) -> Result<(), AdminError> {
    let installed = installed()?;
    let mut levels = installed.levels.lock().unwrap_or_else(|e| e.into_inner());
    let next = levels.altered(ops)?;
    if validate_only {
        return Ok(());
    }
    (installed.reload)(&next.directives()).map_err(|e| {
        (
            ErrorCode::INVALID_CONFIG,
            format!("log filter refused: {e}"),
        )
    })?;
    tracing::info!(filter = next.directives(), "broker log levels altered");
    *levels = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(key: &str, op: i8, value: Option<&str>) -> ConfigOp {
        ConfigOp {
            key: key.into(),
            op: OpKind::from_code(op),
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn parse_and_directives_round_trip() {
        let levels = LogLevels::parse("warn,minikafka_broker::server=debug,h2[span]=trace");
        assert_eq!(levels.root, "WARN");
        assert_eq!(
            levels
                .targets
                .get("minikafka_broker::server")
                .map(String::as_str),
            Some("DEBUG")
        );
        assert_eq!(levels.other, vec!["h2[span]=trace".to_string()]);
        assert_eq!(LogLevels::parse(&levels.directives()), levels);
        assert_eq!(LogLevels::parse("").root, "INFO");
    }

    #[test]
    fn set_and_delete_follow_kafka() {
        let levels = LogLevels::parse("info");
        let next = levels
            .altered(&[
                op("minikafka_broker", 0, Some("DEBUG")),
                op("root", 0, Some("WARN")),
            ])
            .expect("valid");
        let described: Vec<_> = next
            .entries()
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect();
        assert_eq!(
            described,
            vec![
                ("root".to_string(), "WARN".to_string()),
                ("minikafka".to_string(), "WARN".to_string()),
                ("minikafka_broker".to_string(), "DEBUG".to_string()),
            ]
        );
        let back = next
            .altered(&[op("minikafka_broker", 1, None)])
            .expect("delete");
        assert!(back.targets.is_empty());
        for (ops, code) in [
            (vec![op("root", 1, None)], ErrorCode::INVALID_REQUEST),
            (vec![op("x", 2, Some("INFO"))], ErrorCode::INVALID_REQUEST),
            (vec![op("x", 9, Some("INFO"))], ErrorCode::INVALID_REQUEST),
            (vec![op("x", 0, Some("debug"))], ErrorCode::INVALID_CONFIG),
            (vec![op("x", 0, None)], ErrorCode::INVALID_CONFIG),
            (vec![op("a b", 0, Some("INFO"))], ErrorCode::INVALID_CONFIG),
        ] {
            assert_eq!(levels.altered(&ops).map_err(|e| e.0), Err(code), "{ops:?}");
        }
    }
}
