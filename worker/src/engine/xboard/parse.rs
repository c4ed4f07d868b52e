//! The text side of xboard: parsing what engines say (features, thinking lines, chatter,
//! rejections) and writing positions in edit mode. Pure functions, tested without a process.

use crate::engine::outcome::{EngineError, Score, SearchOutcome};

/// Setup commands an engine may not know without that changing the position it searches.
const OPTIONAL_COMMANDS: [&str; 3] = ["st", "easy", "post"];

/// Lines the protocol defines that carry nothing for a search: debug output (`#`), messages
/// for the GUI's user or ICS, hints, game results, resignations and draw offers, and `pong`s.
pub(super) fn is_chatter(line: &str) -> bool {
    let first = line.split_ascii_whitespace().next().unwrap_or("");
    line.starts_with('#')
        || first.starts_with("tell")
        || matches!(
            first,
            "askuser" | "Hint:" | "1-0" | "0-1" | "1/2-1/2" | "resign" | "offer" | "pong"
        )
}

/// `Error (...): COMMAND` or `Illegal move...` about anything but an optional command: the
/// engine is not searching the position it was given.
pub(super) fn setup_rejected(line: &str) -> Option<&str> {
    if line.starts_with("Illegal move") {
        return Some(line);
    }
    let rest = line.strip_prefix("Error")?;
    let command = rest.rsplit(':').next().unwrap_or("").trim();
    let word = command.split_ascii_whitespace().next().unwrap_or("");
    (!OPTIONAL_COMMANDS.contains(&word)).then_some(line)
}

/// Folds a thinking line (`ply score time nodes pv...`) into `out`; `false` if it is not one.
/// Scores are centipawns; `100000 + N` / `-100000 - N` are the protocol's mate in N moves.
pub fn parse_thinking(line: &str, out: &mut SearchOutcome) -> bool {
    let mut words = line.split_ascii_whitespace();
    let (Some(ply), Some(score), Some(time), Some(nodes)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return false;
    };
    // Some engines mark the ply (`9.`, `9&`, `9+`) for fail highs and the like.
    let ply = ply.trim_end_matches(|c: char| !c.is_ascii_digit());
    let (Ok(ply), Ok(score), Ok(_), Ok(nodes)) = (
        ply.parse::<u32>(),
        score.parse::<i32>(),
        time.parse::<i64>(),
        nodes.parse::<u64>(),
    ) else {
        return false;
    };
    out.depth = ply;
    out.nodes = Some(nodes);
    out.score = Some(if score >= 100_000 {
        Score::Mate(score - 100_000)
    } else if score <= -100_000 {
        Score::Mate(score + 100_000)
    } else {
        Score::Cp(score)
    });
    true
}

/// `NAME=VALUE` pairs of a feature line; values may be quoted (and then contain spaces).
pub(super) fn parse_features(mut rest: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    loop {
        rest = rest.trim_start();
        let Some((name, after)) = rest.split_once('=') else {
            return pairs;
        };
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.split_once('"') {
                Some((v, a)) => (v, a),
                None => (quoted, ""),
            }
        } else {
            after.split_once(char::is_whitespace).unwrap_or((after, ""))
        };
        pairs.push((name.trim().to_string(), value.to_string()));
        rest = after;
    }
}

/// The name in an option feature's value, `NAME -TYPE ...`.
pub(super) fn option_name(value: &str) -> Option<&str> {
    const TYPES: [&str; 10] = [
        "check", "spin", "combo", "slider", "string", "file", "path", "button", "save", "reset",
    ];
    let mut search = value;
    let mut consumed = 0;
    while let Some(i) = search.find(" -") {
        let after = &search[i + 2..];
        if TYPES
            .iter()
            .any(|t| after.split_ascii_whitespace().next() == Some(t))
        {
            return Some(value[..consumed + i].trim()).filter(|n| !n.is_empty());
        }
        consumed += i + 2;
        search = after;
    }
    None
}

/// The FEN's side to move: `false` for white, `true` for black.
pub(super) fn side_to_move(fen: &str) -> Result<bool, EngineError> {
    match fen.split_ascii_whitespace().nth(1) {
        Some("w") => Ok(false),
        Some("b") => Ok(true),
        other => Err(EngineError::BadInput(format!(
            "FEN side to move must be `w` or `b`, got {other:?}"
        ))),
    }
}

/// The edit-mode commands that set up `fen` after `new` and `force`.
pub(super) fn edit_commands(fen: &str, usermove: bool) -> Result<String, EngineError> {
    let black = side_to_move(fen)?;
    let board = fen.split_ascii_whitespace().next().unwrap_or("");
    let ranks: Vec<&str> = board.split('/').collect();
    if ranks.len() != 8 {
        return Err(EngineError::BadInput(format!(
            "FEN board must have 8 ranks, has {}",
            ranks.len()
        )));
    }
    let (mut white_pieces, mut black_pieces) = (String::new(), String::new());
    for (i, rank) in ranks.iter().enumerate() {
        let rank_no = 8 - i;
        let mut file = 0u32;
        for c in rank.chars() {
            if let Some(d) = c.to_digit(10) {
                file += d;
                continue;
            }
            if !"pnbrqkPNBRQK".contains(c) || file >= 8 {
                return Err(EngineError::BadInput(format!(
                    "FEN rank {rank_no} is malformed at `{c}`"
                )));
            }
            let square = format!("{}{rank_no}", (b'a' + file as u8) as char);
            let list = if c.is_ascii_uppercase() {
                &mut white_pieces
            } else {
                &mut black_pieces
            };
            list.push(c.to_ascii_uppercase());
            list.push_str(&square);
            list.push('\n');
            file += 1;
        }
        if file != 8 {
            return Err(EngineError::BadInput(format!(
                "FEN rank {rank_no} covers {file} squares, not 8"
            )));
        }
    }
    let mut cmd = String::new();
    if black {
        // `edit` keeps the side to move, so a harmless white move makes it black's turn.
        cmd.push_str(if usermove {
            "usermove a2a3\n"
        } else {
            "a2a3\n"
        });
    }
    cmd.push_str("edit\n#\n");
    cmd.push_str(&white_pieces);
    cmd.push_str("c\n");
    cmd.push_str(&black_pieces);
    cmd.push_str(".\n");
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_lines() {
        let mut o = SearchOutcome::default();
        assert!(parse_thinking(
            " 4      0        0       1171 d2d4 d7d5",
            &mut o
        ));
        assert_eq!(
            (o.depth, o.nodes, o.score),
            (4, Some(1171), Some(Score::Cp(0)))
        );
        assert!(parse_thinking("9.  -35  120  99000  e2e4", &mut o));
        assert_eq!((o.depth, o.score), (9, Some(Score::Cp(-35))));
        assert!(parse_thinking(" 5 100001 0 184 a1a8", &mut o));
        assert_eq!(o.score, Some(Score::Mate(1)));
        assert!(parse_thinking(" 5 -100003 0 184", &mut o));
        assert_eq!(o.score, Some(Score::Mate(-3)));
        for junk in [
            "move e2e4",
            "1 2 3",
            "# 1 2 3 4",
            "1 2 x 4 pv",
            "tellics say 1 2 3",
        ] {
            assert!(!parse_thinking(junk, &mut o), "{junk}");
        }
        assert_eq!(o.nodes, Some(184), "junk leaves the last values alone");
    }

    #[test]
    fn feature_lines() {
        let f = parse_features(
            r#"setboard=0 xedit=1 ping=1 done=0 myname="Fairy-Max 5.0b" option="Resign Threshold -spin 800 200 1200""#,
        );
        assert_eq!(f.len(), 6);
        assert_eq!(f[4], ("myname".into(), "Fairy-Max 5.0b".into()));
        assert_eq!(option_name(&f[5].1), Some("Resign Threshold"));
        assert_eq!(option_name("Dummy -x -string happy"), Some("Dummy -x"));
        assert_eq!(option_name("Info -button"), Some("Info"));
        assert_eq!(option_name("no type here"), None);
        assert_eq!(parse_features("broken"), vec![]);
        assert_eq!(parse_features(r#"a="unterminated"#)[0].1, "unterminated");
    }

    #[test]
    fn rejected_setups() {
        assert!(setup_rejected("Error (unknown command): setboard").is_some());
        assert!(setup_rejected("Illegal move: a2a3").is_some());
        assert!(setup_rejected("Error (unknown command): st").is_none());
        assert!(setup_rejected(" 1 2 3 4 e2e4").is_none());
    }

    #[test]
    fn edit_mode_setup() {
        let fen = "4k3/8/8/8/4P3/8/8/4K2R b K e3 0 1";
        let cmd = edit_commands(fen, false).unwrap();
        assert_eq!(cmd, "a2a3\nedit\n#\nPe4\nKe1\nRh1\nc\nKe8\n.\n");
        let white = edit_commands("4k3/8/8/8/8/8/8/4K3 w - - 0 1", true).unwrap();
        assert!(white.starts_with("edit\n"), "{white}");
        assert!(edit_commands(fen, true)
            .unwrap()
            .starts_with("usermove a2a3\n"));
        for (bad, why) in [
            ("4k3/8/8 w - - 0 1", "8 ranks"),
            ("4k3/8/8/8/8/8/8/4K4 w - - 0 1", "9 squares"),
            ("4k3/8/8/8/8/8/8/4X3 w - - 0 1", "`X`"),
            ("4k3/8/8/8/8/8/8/4K3 x - - 0 1", "side to move"),
        ] {
            let err = edit_commands(bad, false).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
