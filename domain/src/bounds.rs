//! Bounds on the free text callers send over HTTP: one named limit per field, and the one
//! check every field goes through. A field over its limit, or holding NUL or other control
//! characters (newlines and tabs are allowed in multi-line text such as compiler output), is
//! refused with a [`FieldError`] naming the field and the limit, so bad input is a 4xx at the
//! edge and never reaches the database (Postgres text cannot hold NUL) or a log line.
//!
//! Lengths are in bytes (UTF-8), which is what a request, a row and memory cost.

use crate::FieldError;

/// Longest sweep name.
pub const MAX_SWEEP_NAME: usize = 200;
/// Longest sweep description. A sweep's spec travels with every job it leases, so a large
/// description would be re-read on every lease.
pub const MAX_DESCRIPTION: usize = 8 * 1024;
/// Longest build (table row) name, variants' and the baseline's.
pub const MAX_BUILD_NAME: usize = 64;
/// Longest name of a registered thing a caller refers to: an engine, a knob, a suite.
pub const MAX_REF_NAME: usize = 200;
/// Longest worker name.
pub const MAX_WORKER_NAME: usize = 200;
/// Longest worker host name (a DNS name is at most 253).
pub const MAX_HOST: usize = 255;
/// Most compiler output a build failure keeps: its tail, where the error usually is.
pub const MAX_BUILD_OUTPUT: usize = 64 * 1024;
/// Longest best move kept: UCI moves are 4 or 5 characters, `(none)` and `0000` a few more.
pub const MAX_BESTMOVE: usize = 16;
/// Longest error text kept per result, in characters (longer text is cut and marked).
pub const MAX_RESULT_ERROR: usize = 2000;
/// Longest engine definition (TOML) an admin may add over the API.
pub const MAX_ENGINE_DEFINITION: usize = 64 * 1024;
/// Longest value of a query parameter naming something (a build, a suite, a limit).
pub const MAX_QUERY_VALUE: usize = 256;

/// Most search counters kept per result (`info string counters k=v ...`).
pub const MAX_COUNTERS: usize = 64;
/// Longest search counter name.
pub const MAX_COUNTER_NAME: usize = 64;

/// Whether `name` can be a search counter's name: 1 to [`MAX_COUNTER_NAME`] bytes of ASCII
/// letters, digits, `_`, `.` and `-`, so it is safe as a JSON key, a CSV header and a
/// Markdown column.
pub fn counter_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_COUNTER_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Whether a field is one line (names) or may span lines (descriptions, compiler output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// No control characters at all.
    One,
    /// Newlines and tabs allowed, no other control characters.
    Many,
}

/// Checks `value` of `field`: at most `max` bytes, no NUL or control characters (but `\n` and
/// `\t` in [`Lines::Many`] text). The error says the limit and, for a control character,
/// which one and where, without echoing the text.
pub fn check_text(field: &str, value: &str, max: usize, lines: Lines) -> Result<(), FieldError> {
    if value.len() > max {
        return Err(FieldError::new(
            field,
            format!("is {} bytes long; at most {max} bytes", value.len()),
        ));
    }
    if let Some((at, c)) = value
        .char_indices()
        .find(|&(_, c)| c.is_control() && !allowed_control(c, lines))
    {
        return Err(FieldError::new(
            field,
            format!(
                "contains the control character U+{:04X} at byte {at}; {}",
                c as u32,
                match lines {
                    Lines::One => "control characters are not allowed",
                    Lines::Many => "only newlines and tabs are allowed",
                }
            ),
        ));
    }
    Ok(())
}

fn allowed_control(c: char, lines: Lines) -> bool {
    lines == Lines::Many && (c == '\n' || c == '\t')
}

/// As [`check_text`], and not empty (after trimming).
pub fn check_name(field: &str, value: &str, max: usize) -> Result<(), FieldError> {
    check_text(field, value, max, Lines::One)?;
    if value.trim().is_empty() {
        return Err(FieldError::new(
            field,
            format!("must be 1 to {max} bytes, not empty"),
        ));
    }
    Ok(())
}

/// Multi-line text cleaned for sending: control characters other than newlines and tabs
/// replaced by U+FFFD (`\r\n` becomes `\n`), and only the last `max` bytes kept, after a line
/// saying how much was cut. What a worker does to compiler output before reporting it, so the
/// coordinator never has to refuse it.
pub fn clean_tail(text: &str, max: usize) -> String {
    let cleaned: String = text
        .replace("\r\n", "\n")
        .chars()
        .map(|c| {
            if c.is_control() && !allowed_control(c, Lines::Many) {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect();
    keep_tail(&cleaned, max)
}

/// The last `max` bytes of `text` (cut at a character boundary), after a line saying how many
/// bytes were cut; `text` itself when it fits. The result is at most `max` bytes.
pub fn keep_tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    // The marker's length depends on the count, which depends on the marker's length: take
    // the largest count the text could need, so the result never exceeds `max`.
    let room = max.saturating_sub(cut_marker(text.len()).len());
    let mut start = text.len() - room;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("{}{}", cut_marker(start), &text[start..])
}

/// The line that stands first in a text whose first `cut` bytes were cut (by [`keep_tail`],
/// or by a worker that kept only the tail of a build's output stream).
pub fn cut_marker(cut: usize) -> String {
    format!("[... {cut} bytes cut; the last part follows]\n")
}

/// A result's error text as stored: NUL (which Postgres text cannot hold) and other control
/// characters but newlines and tabs replaced, cut to [`MAX_RESULT_ERROR`] characters and
/// marked. A result's error is that position's failed try, so it is cleaned, not refused.
pub fn clean_result_error(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_RESULT_ERROR)
        .map(|c| {
            if c.is_control() && !allowed_control(c, Lines::Many) {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect();
    if text.chars().nth(MAX_RESULT_ERROR).is_some() {
        out.push_str(" [truncated]");
    }
    out
}

/// A best move that can be stored and compared: at most [`MAX_BESTMOVE`] bytes, no control
/// characters or spaces (empty is allowed: a failed search has none).
pub fn plausible_move(m: &str) -> bool {
    m.len() <= MAX_BESTMOVE && !m.chars().any(|c| c.is_control() || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_over_its_limit_is_refused_with_the_limit() {
        let err = check_text("description", &"x".repeat(3_900_000), 8192, Lines::Many).unwrap_err();
        assert_eq!(err.field, "description");
        assert!(err.problem.contains("at most 8192 bytes"), "{err}");
        assert!(err.problem.len() < 100, "the text is not echoed: {err}");
        assert!(check_text("d", &"x".repeat(8192), 8192, Lines::Many).is_ok());
    }

    #[test]
    fn control_characters_are_refused_but_newlines_in_many_lines() {
        let err = check_text("name", "a\0b", 10, Lines::One).unwrap_err();
        assert!(err.problem.contains("U+0000 at byte 1"), "{err}");
        assert!(check_text("name", "a\nb", 10, Lines::One).is_err());
        assert!(check_text("output", "a\nb\tc", 10, Lines::Many).is_ok());
        assert!(check_text("output", "a\x1b[31m", 10, Lines::Many).is_err());
        assert!(check_text("output", "a\rb", 10, Lines::Many).is_err());
        assert!(check_name("name", "  ", 10).is_err());
        assert!(check_name("name", "ok", 10).is_ok());
    }

    #[test]
    fn tails_are_kept_and_marked() {
        assert_eq!(keep_tail("short", 10), "short");
        let long = format!("{}THE END", "é".repeat(50_000));
        let kept = keep_tail(&long, 1000);
        assert!(kept.len() <= 1000, "{}", kept.len());
        assert!(kept.starts_with("[... "), "{kept}");
        assert!(kept.contains("bytes cut"));
        assert!(kept.ends_with("THE END"));
        let cleaned = clean_tail("err\0or\r\nline\x1b[0m\n", 100);
        assert_eq!(cleaned, "err\u{FFFD}or\nline\u{FFFD}[0m\n");
        assert!(check_text("output", &cleaned, 100, Lines::Many).is_ok());
    }

    #[test]
    fn result_text_is_cleaned_and_bounded() {
        assert_eq!(
            clean_result_error("crash\0 at\nline"),
            "crash\u{FFFD} at\nline"
        );
        let kept = clean_result_error(&"x".repeat(3 * MAX_RESULT_ERROR));
        assert!(kept.ends_with(" [truncated]"));
        assert_eq!(
            kept.chars().count(),
            MAX_RESULT_ERROR + " [truncated]".len()
        );
        assert!(plausible_move("e7e8q") && plausible_move("") && plausible_move("(none)"));
        assert!(
            !plausible_move("e2\0e4")
                && !plausible_move("e2 e4")
                && !plausible_move(&"a".repeat(40))
        );
    }
}
