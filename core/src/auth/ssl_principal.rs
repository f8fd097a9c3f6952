//! Kafka's `ssl.principal.mapping.rules`: how a client certificate's subject (RFC 2253) becomes
//! the principal's name, as Kafka's `SslPrincipalMapper` maps it.
//!
//! Contract:
//! - Input: the setting's text, e.g.
//!   `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT`:
//!   rules separated by commas (split and parsed with Kafka's own two patterns, so a comma
//!   inside a rule's pattern stays in it), each `DEFAULT` (the DN as it is) or
//!   `RULE:pattern/replacement/` with an optional `L` or `U` (lower- or upper-case the result);
//!   `\` escapes a `/` or another `\` in the pattern and the replacement. Empty rules are
//!   ignored.
//! - Output: a [`PrincipalMapper`]; [`PrincipalMapper::map`] tries the rules in order and the
//!   first whose pattern matches the whole DN names the principal: every match of the pattern
//!   in the DN replaced as Java's `String.replaceAll` replaces it (`$n` and `${name}` are
//!   groups, `\x` is a literal `x`, a `$n` beyond the pattern's groups is literal, as Kafka's
//!   mapper escapes it). A DN no rule matches is refused ([`NoMatchingRule`]): Kafka closes
//!   that connection, so does the broker (I140).
//! - Bounded (I141): the setting is at most [`MAX_RULES_BYTES`], at most [`MAX_RULES`] rules,
//!   each pattern compiled with the `regex` crate under [`PATTERN_SIZE_LIMIT`] (matching is
//!   linear in the DN: no backtracking). Patterns are Rust `regex` syntax, which is Java's for
//!   what DN rules use (groups, classes, lazy quantifiers, anchors); look-around and
//!   back-references are refused when the rules are parsed. Everything that would fail when a
//!   DN is mapped in Kafka (a bad group reference, a trailing `\` in the replacement) is
//!   refused when the rules are parsed instead, so [`PrincipalMapper::map`] cannot fail but
//!   for a DN no rule matches.
//! - Never: panics, whatever the rule text or the DN.

use std::fmt;
use std::sync::OnceLock;

use regex::{Regex, RegexBuilder};

/// The longest `ssl.principal.mapping.rules` accepted (Kafka has no bound; 64 KiB is far more
/// than any real rule list).
pub const MAX_RULES_BYTES: usize = 64 * 1024;

/// The most rules one setting may hold.
pub const MAX_RULES: usize = 256;

/// The compiled size one rule's pattern may take (the `regex` crate's `size_limit`).
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// Kafka's rule syntax (`SslPrincipalMapper.RULE_PATTERN`): `DEFAULT`, `RULE:p/r/[LU]`, or
/// anything else (which the parser then refuses).
const RULE_PATTERN: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";

/// Java's `\s`.
const JAVA_SPACE: &str = r"[ \t\n\x0B\x0C\r]";

fn splitter() -> &'static Regex {
    static SPLITTER: OnceLock<Regex> = OnceLock::new();
    SPLITTER.get_or_init(|| {
        Regex::new(&format!(
            r"{JAVA_SPACE}*({RULE_PATTERN}){JAVA_SPACE}*(,{JAVA_SPACE}*|$)"
        ))
        .expect("Kafka's rule splitter is a valid pattern")
    })
}

fn parser() -> &'static Regex {
    static PARSER: OnceLock<Regex> = OnceLock::new();
    PARSER.get_or_init(|| {
        Regex::new(&format!(r"\A(?:{RULE_PATTERN})"))
            .expect("Kafka's rule parser is a valid pattern")
    })
}

/// A DN that no rule matched: Kafka's `NoMatchingRule`; the connection is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoMatchingRule {
    /// The DN, for the log line.
    pub dn: String,
}

impl fmt::Display for NoMatchingRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no ssl.principal.mapping.rules rule applies to {}",
            self.dn
        )
    }
}

/// One piece of a parsed replacement.
#[derive(Clone, Debug)]
enum Piece {
    Literal(String),
    Group(usize),
}

#[derive(Clone, Debug)]
enum Case {
    Keep,
    Lower,
    Upper,
}

#[derive(Clone, Debug)]
enum Rule {
    Default,
    Replace {
        /// The pattern as written, for messages.
        text: String,
        /// Finds the matches `replaceAll` replaces.
        pattern: Regex,
        /// The same pattern anchored at both ends: Java's `Matcher.matches()`.
        whole: Regex,
        replacement: Vec<Piece>,
        case: Case,
    },
}

/// Parsed `ssl.principal.mapping.rules`.
#[derive(Clone, Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl Default for PrincipalMapper {
    /// `DEFAULT`: the DN as it is.
    fn default() -> PrincipalMapper {
        PrincipalMapper {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalMapper {
    /// Parses the setting's text; the error says what is wrong with which rule.
    pub fn parse(text: &str) -> Result<PrincipalMapper, String> {
        if text.len() > MAX_RULES_BYTES {
            return Err(format!(
                "{} bytes of rules: at most {MAX_RULES_BYTES} are accepted",
                text.len()
            ));
        }
        // Java's `String.trim`: every character up to U+0020 at either end.
        let text = text.trim_matches(|c: char| c <= ' ');
        let mut rules = Vec::new();
        for caps in splitter().captures_iter(text) {
            let rule = caps.get(1).map_or("", |m| m.as_str());
            if let Some(rule) = parse_rule(rule)? {
                if rules.len() == MAX_RULES {
                    return Err(format!("more than {MAX_RULES} rules"));
                }
                rules.push(rule);
            }
        }
        Ok(PrincipalMapper { rules })
    }

    /// The principal's name for certificate subject `dn` (RFC 2253), or the refusal.
    pub fn map(&self, dn: &str) -> Result<String, NoMatchingRule> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace {
                    pattern,
                    whole,
                    replacement,
                    case,
                    ..
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let replaced = pattern.replace_all(dn, |caps: &regex::Captures<'_>| {
                        let mut out = String::new();
                        for piece in replacement {
                            match piece {
                                Piece::Literal(text) => out.push_str(text),
                                Piece::Group(i) => {
                                    if let Some(m) = caps.get(*i) {
                                        out.push_str(m.as_str());
                                    }
                                }
                            }
                        }
                        out
                    });
                    return Ok(match case {
                        Case::Keep => replaced.into_owned(),
                        Case::Lower => replaced.to_lowercase(),
                        Case::Upper => replaced.to_uppercase(),
                    });
                }
            }
        }
        Err(NoMatchingRule { dn: dn.to_string() })
    }

    /// Whether this is Kafka's default (one `DEFAULT` rule), for log lines.
    pub fn is_default(&self) -> bool {
        matches!(self.rules.as_slice(), [Rule::Default])
    }
}

/// Parses one rule as Kafka's `parseRules` does; `None` for an empty one.
fn parse_rule(rule: &str) -> Result<Option<Rule>, String> {
    let caps = parser()
        .captures(rule)
        .ok_or_else(|| format!("invalid rule: {rule}"))?;
    let end = caps.get(0).map_or(0, |m| m.end());
    if end != rule.len() {
        return Err(format!(
            "invalid rule `{rule}`, unmatched text: `{}` (a rule is DEFAULT or \
             RULE:pattern/replacement/ with an optional L or U)",
            &rule[end..]
        ));
    }
    if caps.get(1).is_some() {
        return Ok(Some(Rule::Default));
    }
    let Some(text) = caps.get(2) else {
        // The empty rule (`(.*?)` matched nothing): ignored, as in Kafka.
        return Ok(None);
    };
    let text = text.as_str();
    let replacement = caps.get(4).map_or("", |m| m.as_str());
    let case = match caps.get(6).map(|m| m.as_str()) {
        Some("L") => Case::Lower,
        Some("U") => Case::Upper,
        _ => Case::Keep,
    };
    let compile = |source: &str| {
        RegexBuilder::new(source)
            .size_limit(PATTERN_SIZE_LIMIT)
            .dfa_size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("rule `{rule}`: bad pattern: {e}"))
    };
    let pattern = compile(text)?;
    let whole = compile(&format!(r"\A(?:{text})\z"))?;
    let replacement = parse_replacement(replacement, &pattern)
        .map_err(|why| format!("rule `{rule}`: bad replacement: {why}"))?;
    Ok(Some(Rule::Replace {
        text: text.to_string(),
        pattern,
        whole,
        replacement,
        case,
    }))
}

/// Parses a replacement as Java's `Matcher.appendReplacement` reads it, after Kafka's mapper
/// turned each `$n` beyond the pattern's groups into a literal (its
/// `escapeLiteralBackReferences`).
fn parse_replacement(text: &str, pattern: &Regex) -> Result<Vec<Piece>, String> {
    // Groups, not counting the whole match (Java's `groupCount`).
    let groups = pattern.captures_len() - 1;
    let chars: Vec<char> = text.chars().collect();
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                let Some(c) = chars.get(i + 1) else {
                    return Err("a trailing \\ escapes nothing".into());
                };
                literal.push(*c);
                i += 2;
            }
            '$' => {
                let digits: String = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                if chars.get(i + 1) == Some(&'{') {
                    let close = chars[i + 2..]
                        .iter()
                        .position(|c| *c == '}')
                        .ok_or("${ without its }")?;
                    let name: String = chars[i + 2..i + 2 + close].iter().collect();
                    let index = pattern
                        .capture_names()
                        .position(|n| n == Some(name.as_str()))
                        .ok_or_else(|| format!("no group named {name}"))?;
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                    pieces.push(Piece::Group(index));
                    i += 3 + close;
                } else if digits.is_empty() {
                    return Err(
                        "$ must be followed by a group number or {name} (write \\$ for a $)".into(),
                    );
                } else if groups > 0
                    && !digits.starts_with('0')
                    && literal_reference(&digits, groups)
                {
                    // Kafka escapes a reference to a group the pattern lacks: it stays text.
                    literal.push('$');
                    i += 1;
                } else {
                    // Java's reading: the first digit, then each next one while the number
                    // stays a group of the pattern.
                    let bytes = digits.as_bytes();
                    let mut number = usize::from(bytes[0] - b'0');
                    if number > groups {
                        return Err(format!(
                            "${number} refers to a group the pattern lacks ({groups} groups)"
                        ));
                    }
                    let mut used = 1;
                    for d in &bytes[1..] {
                        let next = number * 10 + usize::from(d - b'0');
                        if next > groups {
                            break;
                        }
                        number = next;
                        used += 1;
                    }
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                    pieces.push(Piece::Group(number));
                    i += 1 + used;
                }
            }
            c => {
                literal.push(c);
                i += 1;
            }
        }
    }
    pieces.push(Piece::Literal(literal));
    pieces.retain(|p| !matches!(p, Piece::Literal(s) if s.is_empty()));
    Ok(pieces)
}

/// Kafka's `escapeLiteralBackReferences` test: `$digits`, shortened one digit at a time while
/// it is over the groups (and has two digits or more), still names no group.
fn literal_reference(digits: &str, groups: usize) -> bool {
    // Only the leading digits that fit a usize matter: more than 20 is over any group count.
    let mut number: u128 = digits.chars().take(20).fold(0u128, |n, d| {
        n * 10 + u128::from(d.to_digit(10).unwrap_or(0))
    });
    let groups = groups as u128;
    while number > groups && number >= 10 {
        number /= 10;
    }
    number > groups
}

impl fmt::Display for PrincipalMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .rules
            .iter()
            .map(|r| match r {
                Rule::Default => "DEFAULT".to_string(),
                Rule::Replace { text, .. } => format!("RULE:{text}/…"),
            })
            .collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(rules: &str, dn: &str) -> Result<String, NoMatchingRule> {
        PrincipalMapper::parse(rules).expect("rules").map(dn)
    }

    /// Kafka's `SslPrincipalMapperTest.testSslPrincipalMapper`.
    #[test]
    fn kafkas_examples_map_as_kafka_maps_them() {
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, \
                     RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, \
                     RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, \
                     RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT";
        let m = PrincipalMapper::parse(rules).expect("Kafka's rules");
        let cases = [
            ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
            ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
            ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
            ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ];
        for (dn, name) in cases {
            assert_eq!(m.map(dn).as_deref(), Ok(name), "{dn}");
        }
        // The issue's example: first match wins, DEFAULT keeps the DN.
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
                     RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT";
        assert_eq!(
            map(rules, "CN=Svc,OU=ServiceUsers,O=Org").as_deref(),
            Ok("Svc")
        );
        assert_eq!(
            map(rules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US").as_deref(),
            Ok("duke@sme")
        );
        assert_eq!(map(rules, "CN=x,O=y").as_deref(), Ok("CN=x,O=y"));
    }

    /// Kafka's `testNoRuleMatched` and the default.
    #[test]
    fn a_dn_no_rule_matches_is_refused() {
        let refused = map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=x,OU=Other");
        assert_eq!(
            refused,
            Err(NoMatchingRule {
                dn: "CN=x,OU=Other".into()
            })
        );
        assert!(PrincipalMapper::parse("DEFAULT").expect("ok").is_default());
        assert_eq!(map("DEFAULT", "CN=a,O=b").as_deref(), Ok("CN=a,O=b"));
        // No rule at all matches nothing.
        assert!(map("", "CN=a").is_err());
    }

    /// Kafka's `testValidRules` / `testInvalidRules` / `testCommaWithWhitespace`.
    #[test]
    fn rules_are_accepted_and_refused_as_kafka_parses_them() {
        for ok in [
            "DEFAULT",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
            "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
            "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
            "  DEFAULT  ,  ",
        ] {
            assert!(PrincipalMapper::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "default",
            "DEFAUL",
            "DEFAULT/L",
            "DEFAULT/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
            "RULE:(look(?=ahead))/$1/",
        ] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
        let rules = "RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT";
        assert_eq!(
            map(rules, "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz").as_deref(),
            Ok("Tkac\\, Adam")
        );
        assert_eq!(
            map(rules, "OU=Something,CN=Tkac\\, Adam").as_deref(),
            Ok("OU=Something,CN=Tkac\\, Adam")
        );
    }

    /// Kafka's `testRuleWithWhitespace` and the escapes of `/` and `$`.
    #[test]
    fn whitespace_slashes_and_dollars_are_kept() {
        assert_eq!(
            map(
                "RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/",
                "CN=Tkac\\, Adam,OU=ITZ"
            )
            .as_deref(),
            Ok("Tkac\\, Adam")
        );
        assert_eq!(map(r"RULE:^CN=a\/b$/x\/y/", "CN=a/b").as_deref(), Ok("x/y"));
        assert_eq!(map(r"RULE:^CN=(.*)$/\$$1/", "CN=a").as_deref(), Ok("$a"));
        // A reference beyond the groups stays text; $12 with one group is $1 then 2.
        assert_eq!(map("RULE:^CN=(.*)$/$1@$4/", "CN=a").as_deref(), Ok("a@$4"));
        assert_eq!(map("RULE:^CN=(.*)$/$12/", "CN=a").as_deref(), Ok("a2"));
        assert_eq!(
            map("RULE:^CN=(?<n>.*)$/${n}!/", "CN=a").as_deref(),
            Ok("a!")
        );
        // What Kafka would fail on when mapping is refused when parsing.
        assert!(PrincipalMapper::parse("RULE:^CN=.*$/$1/").is_err());
        assert!(PrincipalMapper::parse("RULE:^CN=(.*)$/$x/").is_err());
        assert!(PrincipalMapper::parse(r"RULE:^CN=(.*)$/a\\/").is_ok());
        assert!(PrincipalMapper::parse("RULE:^CN=(.*)$/${missing}/").is_err());
    }

    /// `replaceAll`, not one replacement: every match of a pattern that matches the whole DN.
    #[test]
    fn every_match_is_replaced_as_replace_all_does() {
        assert_eq!(map("RULE:(a)/$1$1/", "a").as_deref(), Ok("aa"));
        assert_eq!(map("RULE:CN=(.*?)/$1/", "CN=abc").as_deref(), Ok("abc"));
    }

    #[test]
    fn oversized_settings_are_refused() {
        let long = "DEFAULT,".repeat(MAX_RULES_BYTES / 8 + 1);
        assert!(PrincipalMapper::parse(&long).is_err());
        let many = "DEFAULT,".repeat(MAX_RULES + 1);
        assert!(PrincipalMapper::parse(&many).is_err());
        let huge = format!("RULE:^{}$/x/", "a{1000}{1000}");
        assert!(PrincipalMapper::parse(&huge).is_err());
    }

    proptest::proptest! {
        /// Arbitrary rule text (biased to the syntax's characters) never panics (I141), and what
        /// parses maps any DN without panicking.
        #[test]
        fn arbitrary_rules_never_panic(
            rules in "(RULE:|DEFAULT|[\\\\/$,LU ()*.?^{}0-9a-zA-Z=\\[\\]+|]){0,40}",
            dn in "[ -~]{0,40}",
        ) {
            if let Ok(mapper) = PrincipalMapper::parse(&rules) {
                let _ = mapper.map(&dn);
            }
        }

        #[test]
        fn any_text_never_panics(rules in "\\PC{0,80}", dn in "\\PC{0,40}") {
            if let Ok(mapper) = PrincipalMapper::parse(&rules) {
                let _ = mapper.map(&dn);
            }
        }
    }
}
