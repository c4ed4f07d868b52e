//! The options an engine announces in its `uci` answer, and checking a `setoption` value
//! against them. Pure functions: the driver collects the lines, the worker decides.
//!
//! An announcement looks like `option name Skill Level type spin default 20 min 0 max 20`; the
//! name and string values may hold spaces, so a value runs until the next keyword.

/// The type of an announced option, with what it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UciOptionType {
    /// An integer within `min..=max` (either bound may be missing in a sloppy engine).
    Spin {
        /// Smallest accepted value.
        min: Option<i64>,
        /// Largest accepted value.
        max: Option<i64>,
    },
    /// `true` or `false`.
    Check,
    /// One of the announced `var` values.
    Combo {
        /// The allowed values.
        vars: Vec<String>,
    },
    /// Free text.
    String,
    /// An action without a value.
    Button,
    /// A type this driver does not know (accepted as is).
    Other(String),
}

/// One `option name ...` line of an engine's `uci` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciOption {
    /// The option's name, e.g. `Skill Level`.
    pub name: String,
    /// Its type and bounds.
    pub kind: UciOptionType,
    /// The default value as announced, if any.
    pub default: Option<String>,
    /// The line as the engine sent it (for messages).
    pub line: String,
}

const KEYWORDS: [&str; 5] = ["type", "default", "min", "max", "var"];

/// Parses an `option name <id> type <t> [default <x>] [min <x>] [max <x>] [var <x>]*` line;
/// `None` for any other line, or one without a name or type.
pub fn parse_option_line(line: &str) -> Option<UciOption> {
    let line = line.trim();
    let mut words = line.split_ascii_whitespace();
    if words.next() != Some("option") || words.next() != Some("name") {
        return None;
    }
    let mut name: Vec<&str> = Vec::new();
    let mut fields: Vec<(&str, Vec<&str>)> = Vec::new();
    for w in words {
        if KEYWORDS.contains(&w) {
            fields.push((w, Vec::new()));
        } else if let Some((_, value)) = fields.last_mut() {
            value.push(w);
        } else {
            name.push(w);
        }
    }
    if name.is_empty() {
        return None;
    }
    let get = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.join(" "))
    };
    let number = |key: &str| get(key).and_then(|v| v.parse::<i64>().ok());
    let kind = match get("type")?.as_str() {
        "spin" => UciOptionType::Spin {
            min: number("min"),
            max: number("max"),
        },
        "check" => UciOptionType::Check,
        "combo" => UciOptionType::Combo {
            vars: fields
                .iter()
                .filter(|(k, _)| *k == "var")
                .map(|(_, v)| v.join(" "))
                .collect(),
        },
        "string" => UciOptionType::String,
        "button" => UciOptionType::Button,
        "" => return None,
        other => UciOptionType::Other(other.to_string()),
    };
    Some(UciOption {
        name: name.join(" "),
        kind,
        default: get("default"),
        line: line.to_string(),
    })
}

impl UciOption {
    /// Checks that `value` is one this option accepts; the error names the option, the value
    /// and what the engine announced.
    pub fn check_value(&self, value: &str) -> Result<(), String> {
        let refuse = |why: &str| {
            Err(format!(
                "option `{}` value `{value}` {why}; the engine announced `{}`",
                self.name, self.line
            ))
        };
        match &self.kind {
            UciOptionType::Spin { min, max } => {
                let Ok(v) = value.parse::<i64>() else {
                    return refuse("is not an integer");
                };
                if min.is_some_and(|m| v < m) || max.is_some_and(|m| v > m) {
                    return refuse("is out of the announced range");
                }
            }
            UciOptionType::Check => {
                if value != "true" && value != "false" {
                    return refuse("is not `true` or `false`");
                }
            }
            UciOptionType::Combo { vars } => {
                if !vars.iter().any(|v| v.eq_ignore_ascii_case(value)) {
                    return refuse("is not one of the announced values");
                }
            }
            UciOptionType::Button => return refuse("is given to a button, which takes no value"),
            UciOptionType::String | UciOptionType::Other(_) => {}
        }
        Ok(())
    }
}

/// Checks every option in `options` whose name is in `checked` against the engine's
/// announcements (names compare without regard to case, as UCI asks). The error names the
/// option, the value and what the engine announced.
pub fn check_options(
    announced: &[UciOption],
    options: &[(String, String)],
    checked: &[String],
) -> Result<(), String> {
    for (name, value) in options {
        if !checked.iter().any(|c| c == name) {
            continue;
        }
        let Some(option) = announced.iter().find(|o| o.name.eq_ignore_ascii_case(name)) else {
            let names: Vec<&str> = announced.iter().map(|o| o.name.as_str()).collect();
            return Err(format!(
                "option `{name}` (value `{value}`) is not announced by the engine (it announced: {})",
                if names.is_empty() {
                    "no options".to_string()
                } else {
                    names.join(", ")
                }
            ));
        };
        option.check_value(value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_type() {
        let spin =
            parse_option_line("option name Hash type spin default 16 min 1 max 1024").unwrap();
        assert_eq!(spin.name, "Hash");
        assert_eq!(
            spin.kind,
            UciOptionType::Spin {
                min: Some(1),
                max: Some(1024)
            }
        );
        assert_eq!(spin.default.as_deref(), Some("16"));
        let spaced =
            parse_option_line("option name Skill Level type spin default 20 min 0 max 20").unwrap();
        assert_eq!(spaced.name, "Skill Level");
        let check = parse_option_line("option name Ponder type check default false").unwrap();
        assert_eq!(
            (check.kind, check.default.as_deref()),
            (UciOptionType::Check, Some("false"))
        );
        let combo = parse_option_line(
            "option name Style type combo default Normal var Solid var Normal var Very Risky",
        )
        .unwrap();
        assert_eq!(
            combo.kind,
            UciOptionType::Combo {
                vars: vec!["Solid".into(), "Normal".into(), "Very Risky".into()]
            }
        );
        let string = parse_option_line("option name Debug Log File type string default ").unwrap();
        assert_eq!(
            (string.name.as_str(), string.kind, string.default.as_deref()),
            ("Debug Log File", UciOptionType::String, Some(""))
        );
        let button = parse_option_line("option name Clear Hash type button").unwrap();
        assert_eq!((button.kind, button.default), (UciOptionType::Button, None));
        let odd = parse_option_line("option name X type slider default 3").unwrap();
        assert_eq!(odd.kind, UciOptionType::Other("slider".into()));
    }

    #[test]
    fn ignores_other_lines() {
        for line in [
            "id name minnow",
            "uciok",
            "option",
            "option name",
            "option name Hash",
            "option name type spin",
            "option type spin name Hash",
            "info string option name Hash type spin",
        ] {
            assert_eq!(parse_option_line(line), None, "{line}");
        }
    }

    #[test]
    fn checks_values_against_the_announcement() {
        let announced: Vec<UciOption> = [
            "option name Hash type spin default 16 min 1 max 1024",
            "option name Ponder type check default false",
            "option name Style type combo default Normal var Solid var Normal",
            "option name Clear Hash type button",
            "option name EvalFile type string default nn.nnue",
        ]
        .iter()
        .map(|l| parse_option_line(l).unwrap())
        .collect();
        let check = |name: &str, value: &str| {
            check_options(
                &announced,
                &[(name.to_string(), value.to_string())],
                &[name.to_string()],
            )
        };
        assert_eq!(check("Hash", "1024"), Ok(()));
        assert_eq!(check("hash", "1"), Ok(()), "names ignore case");
        assert_eq!(check("Ponder", "true"), Ok(()));
        assert_eq!(check("Style", "solid"), Ok(()));
        assert_eq!(check("EvalFile", "other.nnue"), Ok(()));

        let e = check("Hash", "2048").unwrap_err();
        assert!(
            e.contains("`Hash`") && e.contains("`2048`") && e.contains("out of"),
            "{e}"
        );
        assert!(e.contains("min 1 max 1024"), "{e}");
        assert!(check("Hash", "0").is_err());
        assert!(check("Hash", "big").unwrap_err().contains("not an integer"));
        assert!(check("Ponder", "yes").is_err());
        assert!(check("Style", "Wild").is_err());
        assert!(check("Clear Hash", "1").is_err());
        let e = check("Contempt", "10").unwrap_err();
        assert!(
            e.contains("`Contempt`") && e.contains("`10`") && e.contains("not announced"),
            "{e}"
        );
        assert!(e.contains("Hash, Ponder"), "{e}");
        assert!(
            check_options(&[], &[("Hash".into(), "1".into())], &["Hash".into()])
                .unwrap_err()
                .contains("no options")
        );

        // Only the checked names are looked at: fixed options pass unchecked.
        let fixed = [("Threads".to_string(), "1".to_string())];
        assert_eq!(check_options(&announced, &fixed, &[]), Ok(()));
    }
}
