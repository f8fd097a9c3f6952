//! The README's settings tables, written from [`SETTINGS`]: the README holds them between
//! [`README_BEGIN`] and [`README_END`], and a test (`broker/tests/server_properties.rs`)
//! fails when they differ from [`readme_tables`] (run it with `MINIKAFKA_WRITE_README=1`
//! to rewrite the section).

use super::table::{Effect, Scope, Setting, SETTINGS};

/// The line that opens the generated section of the README.
pub const README_BEGIN: &str =
    "<!-- settings: generated from broker/src/config/table.rs, do not edit by hand -->";
/// The line that closes it.
pub const README_END: &str = "<!-- end of settings -->";

fn code(text: &str) -> String {
    if text.is_empty() {
        "—".into()
    } else {
        format!("`{text}`")
    }
}

fn names(setting: &Setting) -> String {
    setting
        .spellings()
        .filter(|n| !(setting.name == "advertised.listeners" && *n == "listeners"))
        .map(code)
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The markdown of the generated section (without its two marker lines).
pub fn readme_tables() -> String {
    let mut out = String::new();
    out.push_str(
        "Broker settings (dynamic: AlterConfigs changes them at run time, on this broker or as \
         the cluster default; a topic setting overrides the broker setting it names):\n\n",
    );
    out.push_str("| setting | default | values | dynamic | topic setting | meaning |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for s in SETTINGS.iter().filter(|s| s.broker.is_some()) {
        let topic = match s.scope {
            Scope::Both { topic } => code(topic),
            _ => String::new(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            names(s),
            code(s.default),
            s.valid.describe(),
            if s.dynamic { "yes" } else { "" },
            topic,
            s.doc,
        ));
    }
    out.push_str("\nTopic settings that have no broker setting of their own:\n\n");
    out.push_str("| topic setting | default | meaning |\n|---|---|---|\n");
    for s in SETTINGS
        .iter()
        .filter(|s| s.scope == Scope::Topic && s.effect == Effect::Honoured)
    {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            code(s.name),
            code(s.default),
            s.doc
        ));
    }
    let list = |pick: &dyn Fn(&Setting) -> Option<&'static str>| {
        SETTINGS
            .iter()
            .filter_map(|s| pick(s).map(code))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "\nAccepted with no effect on a single node (described with the reason): broker {}; \
         topic {}.\n",
        list(&|s| (s.broker.is_none() && s.is_broker()).then_some(s.name)),
        list(&|s| matches!(s.effect, Effect::NoEffect(_))
            .then(|| s.topic_name())
            .flatten()),
    ));
    out.push_str(&format!(
        "\nRefused (INVALID_CONFIG): topic {}.\n",
        list(&|s| matches!(s.effect, Effect::Refused(_))
            .then(|| s.topic_name())
            .flatten()),
    ));
    out
}

/// `readme` with its generated section replaced by [`readme_tables`]; `None` when the
/// markers are missing.
pub fn with_generated_section(readme: &str) -> Option<String> {
    let begin = readme.find(README_BEGIN)? + README_BEGIN.len();
    let end = readme[begin..].find(README_END)? + begin;
    Some(format!(
        "{}\n\n{}\n{}",
        &readme[..begin],
        readme_tables(),
        &readme[end..]
    ))
}
