//! Kafka's JAAS configuration syntax (`sasl.jaas.config`, and the entries of a JAAS file), as
//! Kafka's `JaasConfig` reads it with a `java.io.StreamTokenizer`.
//!
//! Contract:
//! - Input: the configuration text, e.g.
//!   `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`
//! - Output: the entries in order ([`parse`]), or exactly one ([`parse_single`], what a
//!   listener's `sasl.jaas.config` must hold), each a login module class, a control flag and
//!   its options; or a [`JaasError`] that says what Kafka would refuse.
//! - Syntax, as the tokenizer has it: whitespace separates; `//` and `/* */` are comments;
//!   a lone `/` comments out the rest of its line (Java's default comment character);
//!   a word is letters, digits, `.`, `-`, `_`, `$` (and any character from U+00A0 on),
//!   starting with a letter, `_`, `$` or U+00A0 on (a digit, `.` or `-` and a digit start a
//!   number, which has no text: an unquoted numeric value is refused, as Kafka refuses it; a
//!   lone `-` is a character of its own); a value is a word or a string quoted with `"` or
//!   `'`, with Java's escapes (`\"`, `\\`, `\n`, `\t`, `\r`, `\b`, `\f`, octal `\ooo`; any
//!   other `\c` is `c`), ended by its quote or, as in Java, by a line end. A later option of
//!   the same key wins. Each entry ends with `;`.
//! - Never: allocates beyond the input's own length ([`MAX_JAAS_CONFIG_BYTES`] bounds it).

use std::collections::BTreeMap;

/// The longest configuration text accepted.
pub const MAX_JAAS_CONFIG_BYTES: usize = 1024 * 1024;

/// How a login module's failure counts (JAAS's `LoginModuleControlFlag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlFlag {
    /// `required`.
    Required,
    /// `requisite`.
    Requisite,
    /// `sufficient`.
    Sufficient,
    /// `optional`.
    Optional,
}

/// One login module entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// The login module's class name.
    pub login_module: String,
    /// Its control flag.
    pub control_flag: ControlFlag,
    /// Its options, by key (a later duplicate wins, as in Kafka's `HashMap`).
    pub options: BTreeMap<String, String>,
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    /// The text is longer than [`MAX_JAAS_CONFIG_BYTES`].
    #[error("JAAS config of {0} bytes is too long")]
    TooLong(usize),
    /// No login module at all.
    #[error("Login module not specified in JAAS config")]
    NoLoginModule,
    /// [`parse_single`] found more than one entry.
    #[error("JAAS config property contains {0} login modules, should be 1 module")]
    NotOneModule(usize),
    /// The token where a login module class was expected is not a word.
    #[error("Login module class not specified in JAAS config")]
    NoLoginModuleClass,
    /// The control flag is missing or not one of the four.
    #[error("Invalid login module control flag '{0}' in JAAS config")]
    BadControlFlag(String),
    /// An option key is not a word, or has no `=` and value.
    #[error("Value not specified for key '{0}' in JAAS config")]
    NoValue(String),
    /// The text ended before the entry's `;`.
    #[error("JAAS config entry not terminated by semi-colon")]
    NotTerminated,
    /// A `/*` comment never ends.
    #[error("unterminated comment in JAAS config")]
    UnterminatedComment,
}

/// A token of the configuration text.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A word (unquoted).
    Word(String),
    /// A quoted string, unescaped.
    Quoted(String),
    /// A number (a token starting with a digit or `.`): the tokenizer keeps no text for it.
    Number,
    /// Any other single character (`=`, `;`, …).
    Char(char),
}

impl Token {
    /// The text Kafka's tokenizer exposes (`sval`): words and quoted strings only.
    fn text(&self) -> Option<&str> {
        match self {
            Token::Word(s) | Token::Quoted(s) => Some(s),
            Token::Number | Token::Char(_) => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Token::Word(s) | Token::Quoted(s) => s.clone(),
            Token::Number => "<number>".to_string(),
            Token::Char(c) => c.to_string(),
        }
    }
}

/// A character that starts a word. `-` and `.` are word characters inside a word only: at the
/// start they begin a number, or `-` without a digit after it is a character of its own (Java's
/// `parseNumbers` table checks digits first; Kafka's `wordChars('-')` only adds to it).
fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || matches!(c, '_' | '$') || c >= '\u{a0}'
}

fn is_word_char(c: char) -> bool {
    is_word_start(c) || c.is_ascii_digit() || matches!(c, '.' | '-')
}

fn is_number_char(c: char) -> bool {
    c.is_ascii_digit() || c == '.'
}

fn tokenize(text: &str) -> Result<Vec<Token>, JaasError> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c <= ' ' => {}
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = '\0';
                let mut closed = false;
                for c in chars.by_ref() {
                    if previous == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    previous = c;
                }
                if !closed {
                    return Err(JaasError::UnterminatedComment);
                }
            }
            // `//`, and (Java's default comment character) a lone `/`: the rest of the line.
            '/' => {
                for c in chars.by_ref() {
                    if c == '\n' || c == '\r' {
                        break;
                    }
                }
            }
            '"' | '\'' => tokens.push(Token::Quoted(quoted(c, &mut chars))),
            c if is_number_char(c)
                || (c == '-' && chars.peek().is_some_and(|&n| is_number_char(n))) =>
            {
                while chars.peek().is_some_and(|&c| is_number_char(c)) {
                    chars.next();
                }
                tokens.push(Token::Number);
            }
            c if is_word_start(c) => {
                let mut word = String::from(c);
                while let Some(&c) = chars.peek().filter(|&&c| is_word_char(c)) {
                    word.push(c);
                    chars.next();
                }
                tokens.push(Token::Word(word));
            }
            other => tokens.push(Token::Char(other)),
        }
    }
    Ok(tokens)
}

/// The rest of a string opened by `quote`, unescaped as Java's `StreamTokenizer` does.
fn quoted(quote: char, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            c if c == quote => break,
            '\n' | '\r' => break,
            '\\' => {
                let Some(e) = chars.next() else { break };
                match e {
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'v' => out.push('\u{b}'),
                    '0'..='7' => {
                        // Up to three octal digits (at most two more when the first is above 3).
                        let mut value = e as u32 - '0' as u32;
                        let more = if e <= '3' { 2 } else { 1 };
                        for _ in 0..more {
                            match chars.peek() {
                                Some(&d @ '0'..='7') => {
                                    value = value * 8 + (d as u32 - '0' as u32);
                                    chars.next();
                                }
                                _ => break,
                            }
                        }
                        // value <= 0o377, always a char.
                        out.push(char::from_u32(value).unwrap_or('\u{fffd}'));
                    }
                    other => out.push(other),
                }
            }
            other => out.push(other),
        }
    }
    out
}

fn control_flag(token: Option<&Token>) -> Result<ControlFlag, JaasError> {
    let text = token.and_then(Token::text).unwrap_or_default();
    match text.to_ascii_lowercase().as_str() {
        "required" => Ok(ControlFlag::Required),
        "requisite" => Ok(ControlFlag::Requisite),
        "sufficient" => Ok(ControlFlag::Sufficient),
        "optional" => Ok(ControlFlag::Optional),
        _ => Err(JaasError::BadControlFlag(
            token.map(Token::describe).unwrap_or_default(),
        )),
    }
}

/// Parses every entry of `config`.
pub fn parse(config: &str) -> Result<Vec<JaasEntry>, JaasError> {
    if config.len() > MAX_JAAS_CONFIG_BYTES {
        return Err(JaasError::TooLong(config.len()));
    }
    let tokens = tokenize(config)?;
    let mut tokens = tokens.into_iter().peekable();
    let mut entries = Vec::new();
    while let Some(first) = tokens.next() {
        let login_module = first
            .text()
            .ok_or(JaasError::NoLoginModuleClass)?
            .to_string();
        let control_flag = control_flag(tokens.next().as_ref())?;
        let mut options = BTreeMap::new();
        loop {
            match tokens.next() {
                None => return Err(JaasError::NotTerminated),
                Some(Token::Char(';')) => break,
                Some(key_token) => {
                    let key = key_token.describe();
                    let Some(key_text) = key_token.text() else {
                        return Err(JaasError::NoValue(key));
                    };
                    if tokens.next() != Some(Token::Char('=')) {
                        return Err(JaasError::NoValue(key));
                    }
                    let value = tokens.next();
                    let Some(value) = value.as_ref().and_then(Token::text) else {
                        return Err(JaasError::NoValue(key));
                    };
                    options.insert(key_text.to_string(), value.to_string());
                }
            }
        }
        entries.push(JaasEntry {
            login_module,
            control_flag,
            options,
        });
    }
    if entries.is_empty() {
        return Err(JaasError::NoLoginModule);
    }
    Ok(entries)
}

/// Parses `config`, which must hold exactly one entry (a listener's `sasl.jaas.config`).
pub fn parse_single(config: &str) -> Result<JaasEntry, JaasError> {
    let mut entries = parse(config)?;
    match entries.len() {
        1 => Ok(entries.remove(0)),
        n => Err(JaasError::NotOneModule(n)),
    }
}

/// Writes `value` as a double-quoted JAAS string that [`parse`] reads back unchanged.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            other => out.push(other),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

    #[test]
    fn kafka_documentation_example_parses() {
        let config = format!(
            r#"{PLAIN} required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#
        );
        let entry = parse_single(&config).expect("parses");
        assert_eq!(entry.login_module, PLAIN);
        assert_eq!(entry.control_flag, ControlFlag::Required);
        let options: Vec<(&str, &str)> = entry
            .options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            options,
            [
                ("password", "admin-secret"),
                ("user_admin", "admin-secret"),
                ("user_alice", "alice-secret"),
                ("username", "admin"),
            ]
        );
    }

    #[test]
    fn escapes_comments_single_quotes_words_and_case_insensitive_flags() {
        let config = "/* users */ a.b.C REQUIRED // the flag\n k1=\"q\\\"uo\\\\te\\n\\101\" k2='single' k3=word-with_$sign k1=\"later wins\";";
        let entry = parse_single(config).expect("parses");
        assert_eq!(entry.login_module, "a.b.C");
        assert_eq!(entry.control_flag, ControlFlag::Required);
        assert_eq!(entry.options["k1"], "later wins");
        assert_eq!(entry.options["k2"], "single");
        assert_eq!(entry.options["k3"], "word-with_$sign");
        let entry = parse_single("m optional k=\"q\\\"uo\\\\te\\n\\101\";").expect("parses");
        assert_eq!(entry.options["k"], "q\"uo\\te\nA");
    }

    #[test]
    fn java_tokenizer_corners_numbers_dashes_and_lone_slashes() {
        // Inside a word `-` and `.` continue it; at the start `-` is a character of its own.
        let entry = parse_single("a.b-c required k=v-1.x;").expect("parses");
        assert_eq!(entry.login_module, "a.b-c");
        assert_eq!(entry.options["k"], "v-1.x");
        assert_eq!(
            parse("m required k=-v;"),
            Err(JaasError::NoValue("k".into()))
        );
        assert_eq!(
            parse("m required k=-12;"),
            Err(JaasError::NoValue("k".into()))
        );
        // A lone `/` comments out the rest of the line.
        let entry = parse_single("m required / k=\"hidden\"\n j=\"seen\";").expect("parses");
        assert_eq!(entry.options.keys().collect::<Vec<_>>(), ["j"]);
    }

    #[test]
    fn several_entries_parse_but_a_listener_needs_exactly_one() {
        let config = "a required; b sufficient x=\"1\";";
        let entries = parse(config).expect("parses");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].control_flag, ControlFlag::Sufficient);
        assert_eq!(parse_single(config), Err(JaasError::NotOneModule(2)));
    }

    #[test]
    fn refusals_match_kafkas() {
        assert_eq!(parse(""), Err(JaasError::NoLoginModule));
        assert_eq!(parse("  /* only */ "), Err(JaasError::NoLoginModule));
        assert!(matches!(parse("m"), Err(JaasError::BadControlFlag(_))));
        assert!(matches!(
            parse("m mandatory;"),
            Err(JaasError::BadControlFlag(_))
        ));
        assert_eq!(parse("m required"), Err(JaasError::NotTerminated));
        assert_eq!(parse("m required k=\"v\""), Err(JaasError::NotTerminated));
        assert_eq!(parse("m required k;"), Err(JaasError::NoValue("k".into())));
        assert_eq!(parse("m required k=;"), Err(JaasError::NoValue("k".into())));
        // An unquoted number is no text for StreamTokenizer; quoted it is fine.
        assert_eq!(
            parse("m required k=1234;"),
            Err(JaasError::NoValue("k".into()))
        );
        assert_eq!(
            parse_single("m required k=\"1234\";")
                .expect("quoted")
                .options["k"],
            "1234"
        );
        assert_eq!(
            parse("m required /* open"),
            Err(JaasError::UnterminatedComment)
        );
        assert_eq!(parse("= required;"), Err(JaasError::NoLoginModuleClass));
        let long = "x".repeat(MAX_JAAS_CONFIG_BYTES + 1);
        assert_eq!(parse(&long), Err(JaasError::TooLong(long.len())));
    }

    proptest! {
        /// Any option values, quoted with [`quote`], parse back to themselves.
        #[test]
        fn quoted_values_round_trip(
            users in proptest::collection::btree_map("[a-z][a-z0-9_]{0,8}", any::<String>(), 0..6)
        ) {
            let mut config = format!("{PLAIN} required");
            for (user, password) in &users {
                config.push_str(&format!(" user_{user}={}", quote(password)));
            }
            config.push(';');
            let entry = parse_single(&config).expect("parses");
            let back: BTreeMap<String, String> = entry
                .options
                .iter()
                .map(|(k, v)| (k.trim_start_matches("user_").to_string(), v.clone()))
                .collect();
            prop_assert_eq!(back, users);
        }

        /// Any text is a value or an error, never a panic.
        #[test]
        fn arbitrary_text_never_panics(text in any::<String>()) {
            let _ = parse(&text);
        }
    }
}
