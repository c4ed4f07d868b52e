//! EPD test suites: parsing with full chess-rule validation, and the "solved" rule.
//!
//! Best and avoid moves are converted from SAN to UCI once, at load time, so workers and table
//! code compare plain UCI strings and never need chess rules themselves.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use shakmaty::fen::Fen;
use shakmaty::san::SanPlus;
use shakmaty::uci::UciMove;
use shakmaty::{CastlingMode, Chess, Position};

/// The one "solved" rule: `bestmove` (UCI) is one of the best moves `bm` (when there are
/// any) and none of the avoid moves `am`. The coordinator's verdict and the worker's
/// preliminary one both come from here.
pub fn solves(bm: &[String], am: &[String], bestmove: &str) -> bool {
    (bm.is_empty() || bm.iter().any(|m| m == bestmove)) && !am.iter().any(|m| m == bestmove)
}

/// Most positions a suite may hold; a guard against absurd uploads.
pub const MAX_SUITE_POSITIONS: usize = 100_000;

/// One test position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuitePosition {
    /// The EPD `id` operation (or `line N` when the record has none).
    pub id: String,
    /// Position as FEN (the EPD's four fields plus half-move and full-move counters).
    pub fen: String,
    /// Best moves in UCI notation.
    pub bm: Vec<String>,
    /// Moves to avoid, in UCI notation.
    pub am: Vec<String>,
    /// The record as it stands in the file (trimmed), so a suite derived from this one keeps
    /// every EPD operation. Absent in suite versions stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epd: Option<String>,
}

impl SuitePosition {
    /// The rule for "solved": the engine's best move is one of `bm` (when any are given) and
    /// none of `am`.
    pub fn is_solved(&self, bestmove: &str) -> bool {
        solves(&self.bm, &self.am, bestmove)
    }

    /// The EPD record to write this position into another suite file, such that
    /// [`parse_suite`] reads it back as the same position with the same id. That is the
    /// original record when it was kept, with an `id` operation added if it had none (its id
    /// was its line number, which changes in another file); otherwise a rendering of the
    /// parsed fields (`bm` and `am` in SAN, then `id`), which keeps no other operation.
    pub fn epd_record(&self) -> Result<String, String> {
        if let Some(raw) = &self.epd {
            let ops = raw.splitn(5, char::is_whitespace).nth(4).unwrap_or("");
            let has_id = ops
                .split(';')
                .map(str::trim)
                .any(|op| op.split_whitespace().next() == Some("id"));
            return Ok(if has_id {
                raw.clone()
            } else if ops.trim().is_empty() || ops.trim_end().ends_with(';') {
                format!("{} id \"{}\";", raw.trim_end(), self.id)
            } else {
                // The last operation lacks its semicolon; close it before adding the id.
                format!("{}; id \"{}\";", raw.trim_end(), self.id)
            });
        }
        let board: Vec<&str> = self.fen.split_whitespace().take(4).collect();
        if board.len() != 4 {
            return Err(format!(
                "position `{}`: FEN `{}` is incomplete",
                self.id, self.fen
            ));
        }
        let fen = Fen::from_ascii(self.fen.as_bytes())
            .map_err(|e| format!("position `{}`: invalid FEN: {e}", self.id))?;
        let chess: Chess = fen
            .into_position(CastlingMode::Standard)
            .map_err(|e| format!("position `{}`: illegal position: {e}", self.id))?;
        let mut record = board.join(" ");
        for (opcode, moves) in [("bm", &self.bm), ("am", &self.am)] {
            if moves.is_empty() {
                continue;
            }
            let sans = moves
                .iter()
                .map(|uci| uci_to_san(&chess, uci))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("position `{}`: {opcode} {e}", self.id))?;
            record.push_str(&format!(" {opcode} {};", sans.join(" ")));
        }
        record.push_str(&format!(" id \"{}\";", self.id));
        Ok(record)
    }
}

fn uci_to_san(pos: &Chess, uci: &str) -> Result<String, String> {
    let m = UciMove::from_ascii(uci.as_bytes())
        .map_err(|e| format!("{uci}: not UCI ({e})"))?
        .to_move(pos)
        .map_err(|e| format!("{uci}: not legal here ({e})"))?;
    Ok(SanPlus::from_move(pos.clone(), &m).to_string())
}

/// A parsed suite, with the hash of the exact text it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suite {
    /// Name (the file stem).
    pub name: String,
    /// sha256 of the file's bytes, hex.
    pub sha256: String,
    /// Positions in file order.
    pub positions: Vec<SuitePosition>,
}

/// What is wrong with an EPD file, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {problem}")]
pub struct EpdError {
    /// File (or suite) name.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// The problem.
    pub problem: String,
}

/// Parses a suite file. Every position must be legal and have a legal move; every `bm`/`am`
/// move must be legal SAN there; ids must be unique.
pub fn parse_suite(name: &str, text: &str) -> Result<Suite, EpdError> {
    let err = |line: usize, problem: String| EpdError {
        file: name.to_string(),
        line,
        problem,
    };
    let mut positions = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let pos = parse_line(line, line_no).map_err(|p| err(line_no, p))?;
        if !ids.insert(pos.id.clone()) {
            return Err(err(line_no, format!("duplicate id \"{}\"", pos.id)));
        }
        positions.push(pos);
        if positions.len() > MAX_SUITE_POSITIONS {
            return Err(err(
                line_no,
                format!("more than {MAX_SUITE_POSITIONS} positions"),
            ));
        }
    }
    if positions.is_empty() {
        return Err(err(0, "the suite has no positions".into()));
    }
    Ok(Suite {
        name: name.to_string(),
        sha256: hex::encode(Sha256::digest(text.as_bytes())),
        positions,
    })
}

fn parse_line(line: &str, line_no: usize) -> Result<SuitePosition, String> {
    let mut fields = line.splitn(5, char::is_whitespace);
    let mut board = Vec::with_capacity(4);
    for _ in 0..4 {
        board.push(
            fields
                .next()
                .filter(|f| !f.is_empty())
                .ok_or("expected four FEN fields")?,
        );
    }
    let ops = fields.next().unwrap_or("");
    let fen_text = format!("{} 0 1", board.join(" "));
    let fen = Fen::from_ascii(fen_text.as_bytes()).map_err(|e| format!("invalid FEN: {e}"))?;
    let chess: Chess = fen
        .into_position(CastlingMode::Standard)
        .map_err(|e| format!("illegal position: {e}"))?;
    if chess.legal_moves().is_empty() {
        return Err("the side to move has no legal move (checkmate or stalemate)".into());
    }
    let mut id = format!("line {line_no}");
    let (mut bm, mut am) = (Vec::new(), Vec::new());
    for op in ops.split(';').map(str::trim).filter(|o| !o.is_empty()) {
        let (opcode, operands) = op.split_once(char::is_whitespace).unwrap_or((op, ""));
        match opcode {
            "id" => id = operands.trim().trim_matches('"').to_string(),
            "bm" | "am" => {
                for san in operands.split_whitespace() {
                    let uci =
                        san_to_uci(&chess, san).map_err(|e| format!("{opcode} {san}: {e}"))?;
                    if opcode == "bm" { &mut bm } else { &mut am }.push(uci);
                }
            }
            _ => {}
        }
    }
    if id.is_empty() {
        return Err("empty id".into());
    }
    Ok(SuitePosition {
        id,
        fen: fen_text,
        bm,
        am,
        epd: Some(line.to_string()),
    })
}

fn san_to_uci(pos: &Chess, san: &str) -> Result<String, String> {
    let san = SanPlus::from_ascii(san.as_bytes()).map_err(|e| format!("not SAN ({e})"))?;
    let m = san
        .san
        .to_move(pos)
        .map_err(|e| format!("not legal here ({e})"))?;
    Ok(m.to_uci(CastlingMode::Standard).to_string())
}

/// Is `uci` a legal move in the FEN position? Used to catch engines answering nonsense.
pub fn is_legal_uci(fen: &str, uci: &str) -> bool {
    let Ok(fen) = Fen::from_ascii(fen.as_bytes()) else {
        return false;
    };
    let Ok(pos) = fen.into_position::<Chess>(CastlingMode::Standard) else {
        return false;
    };
    UciMove::from_ascii(uci.as_bytes())
        .ok()
        .and_then(|m| m.to_move(&pos).ok())
        .is_some()
}

/// An engine's move, in whatever notation the engine chose, as a UCI move in the FEN position.
///
/// Accepted: coordinates (`e2e4`, `e7e8q`, also with an upper-case promotion piece), castling
/// as the king's two-square move, as king-takes-rook (`e1h1`), or as `O-O`/`O-O-O` (also with
/// zeros), and SAN (`Nf3`, `e8=Q+`). Castling always comes out as the king's two-square move
/// (`e1g1`). A move that is not legal in the position is still returned in coordinates as far
/// as the text allows (castling as the king's move, anything else verbatim), so the caller's
/// legality check ([`is_legal_uci`]) reports what the engine actually said.
pub fn engine_move_to_uci(fen: &str, text: &str) -> String {
    let pos = Fen::from_ascii(fen.as_bytes())
        .ok()
        .and_then(|f| f.into_position::<Chess>(CastlingMode::Standard).ok());
    let bare = text.trim_end_matches(['+', '#', '!', '?']);
    let castle = match bare {
        "O-O" | "0-0" | "o-o" => Some(("e1g1", "e8g8")),
        "O-O-O" | "0-0-0" | "o-o-o" => Some(("e1c1", "e8c8")),
        _ => None,
    };
    if let Some((white, black)) = castle {
        let black_to_move = fen.split_ascii_whitespace().nth(1) == Some("b");
        return if black_to_move { black } else { white }.to_string();
    }
    let coords = if is_coordinate_move(bare) {
        bare.to_ascii_lowercase()
    } else {
        bare.to_string()
    };
    let Some(pos) = pos else {
        return coords;
    };
    if let Some(m) = UciMove::from_ascii(coords.as_bytes())
        .ok()
        .and_then(|m| m.to_move(&pos).ok())
    {
        return m.to_uci(CastlingMode::Standard).to_string();
    }
    san_to_uci(&pos, text).unwrap_or(coords)
}

/// `e2e4` or `e7e8q` shape (any case), so lower-casing cannot turn SAN into something else.
fn is_coordinate_move(s: &str) -> bool {
    let b = s.as_bytes();
    let square = |f: u8, r: u8| {
        (b'a'..=b'h').contains(&f.to_ascii_lowercase()) && (b'1'..=b'8').contains(&r)
    };
    match b.len() {
        4 => square(b[0], b[1]) && square(b[2], b[3]),
        5 => square(b[0], b[1]) && square(b[2], b[3]) && b"qrbnQRBN".contains(&b[4]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bm_am_to_uci() {
        let text = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - bm O-O; am O-O-O Ra2; id \"c.1\";\n\
                    # comment\n\
                    2rr3k/pp3pp1/1nnqbN1p/3pN3/2pP4/2P3Q1/PPB4P/R4RK1 w - - bm Qg6; id \"WAC.001\";\n";
        let s = parse_suite("t", text).unwrap();
        assert_eq!(s.positions.len(), 2);
        assert_eq!(s.positions[0].bm, vec!["e1g1"]);
        assert_eq!(s.positions[0].am, vec!["e1c1", "a1a2"]);
        assert_eq!(s.positions[1].id, "WAC.001");
        assert_eq!(s.positions[1].bm, vec!["g3g6"]);
        assert!(s.positions[1].is_solved("g3g6"));
        assert!(!s.positions[1].is_solved("g3h4"));
        assert!(!s.positions[0].is_solved("e1c1"));
        assert_eq!(s.sha256.len(), 64);
    }

    #[test]
    fn errors_name_line_and_problem() {
        let bad_fen = "ok/8/8 w - - bm e4;\n";
        let e = parse_suite("x", bad_fen).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.problem.contains("FEN"), "{e}");
        let bad_bm =
            "4k3/8/8/8/8/8/8/4K3 w - - id \"a\";\n4k3/8/8/8/8/8/8/4K2R w K - bm Qh5; id \"b\";\n";
        let e = parse_suite("x", bad_bm).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.problem.contains("bm Qh5"), "{e}");
        let illegal = "4k2R/8/8/8/8/8/8/4K3 w - - bm Kd2;\n";
        assert!(parse_suite("x", illegal)
            .unwrap_err()
            .problem
            .contains("illegal position"));
        let dup = "4k3/8/8/8/8/8/8/4K2R w K - id \"a\";\n4k3/8/8/8/8/8/8/4K2R w K - id \"a\";\n";
        assert!(parse_suite("x", dup)
            .unwrap_err()
            .problem
            .contains("duplicate"));
    }

    #[test]
    fn comment_lines_are_skipped_and_records_kept_whole() {
        let text = "# header\n  # indented comment\n\
                    4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; c0 \"kept\"; id \"p\";\n";
        let s = parse_suite("t", text).unwrap();
        assert_eq!(s.positions.len(), 1);
        assert_eq!(
            s.positions[0].epd.as_deref(),
            Some("4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; c0 \"kept\"; id \"p\";")
        );
        assert_eq!(
            s.positions[0].epd_record().unwrap(),
            s.positions[0].epd.clone().unwrap()
        );
    }

    #[test]
    fn records_without_id_get_their_line_id() {
        let text = "# one\n4k3/8/8/8/8/8/4P3/4K3 w - - bm e4;\n4k3/8/8/8/8/8/4P3/4K3 w - - bm e3\n\
                    4k3/8/8/8/8/8/4P3/4K3 w - -\n";
        let s = parse_suite("t", text).unwrap();
        let records: Vec<String> = s
            .positions
            .iter()
            .map(|p| p.epd_record().unwrap())
            .collect();
        assert_eq!(
            records[0],
            "4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; id \"line 2\";"
        );
        assert_eq!(
            records[1],
            "4k3/8/8/8/8/8/4P3/4K3 w - - bm e3; id \"line 3\";"
        );
        assert_eq!(records[2], "4k3/8/8/8/8/8/4P3/4K3 w - - id \"line 4\";");
        // In a new file at other line numbers, every position keeps its id.
        let again = parse_suite("u", &records.join("\n")).unwrap();
        assert_eq!(again.positions.len(), 3);
        for (a, b) in s.positions.iter().zip(&again.positions) {
            assert_eq!((&a.id, &a.fen, &a.bm, &a.am), (&b.id, &b.fen, &b.bm, &b.am));
        }
    }

    #[test]
    fn suites_stored_without_records_decode_and_render() {
        // JSON of a position as stored before records were kept.
        let old = r#"{"id":"c.1","fen":"r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1","bm":["e1g1"],"am":["e1c1","a1a2"]}"#;
        let p: SuitePosition = serde_json::from_str(old).unwrap();
        assert_eq!(p.epd, None);
        let record = p.epd_record().unwrap();
        assert_eq!(
            record,
            "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - bm O-O; am O-O-O Ra2; id \"c.1\";"
        );
        let back = parse_suite("t", &record).unwrap().positions.remove(0);
        assert_eq!(
            (back.id, back.fen, back.bm, back.am),
            (p.id, p.fen, p.bm, p.am)
        );
        // Checks keep their suffix, so the SAN is the canonical one.
        let check = SuitePosition {
            id: "chk".into(),
            fen: "4k3/8/8/8/8/8/8/4K2R w K - 0 1".into(),
            bm: vec!["h1h8".into()],
            am: vec![],
            epd: None,
        };
        assert_eq!(
            check.epd_record().unwrap(),
            "4k3/8/8/8/8/8/8/4K2R w K - bm Rh8+; id \"chk\";"
        );
        let broken = SuitePosition {
            bm: vec!["e1e5".into()],
            ..check
        };
        assert!(broken.epd_record().unwrap_err().contains("bm e1e5"));
    }

    #[test]
    fn legality_check() {
        let fen = "4k3/8/8/8/8/8/8/4K2R w K - 0 1";
        assert!(is_legal_uci(fen, "e1g1"));
        assert!(!is_legal_uci(fen, "e1e3"));
        assert!(!is_legal_uci(fen, "garbage"));
    }

    #[test]
    fn engine_moves_to_uci() {
        let castle = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1";
        for text in ["e1g1", "e1h1", "O-O", "0-0", "O-O+"] {
            assert_eq!(engine_move_to_uci(castle, text), "e1g1", "{text}");
        }
        for text in ["e1c1", "e1a1", "O-O-O", "0-0-0"] {
            assert_eq!(engine_move_to_uci(castle, text), "e1c1", "{text}");
        }
        let black = "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1";
        assert_eq!(engine_move_to_uci(black, "O-O-O"), "e8c8");
        assert_eq!(engine_move_to_uci(black, "e8h8"), "e8g8");
        let promo = "8/4P3/8/8/8/8/k7/6K1 w - - 0 1";
        assert_eq!(engine_move_to_uci(promo, "e7e8q"), "e7e8q");
        assert_eq!(engine_move_to_uci(promo, "e7e8Q"), "e7e8q");
        assert_eq!(engine_move_to_uci(promo, "e8=N+"), "e7e8n");
        assert_eq!(engine_move_to_uci(castle, "Rb1"), "a1b1");
        // Not legal: castling without the right still reads as the king's move, the rest
        // verbatim, so the legality check names what the engine said.
        let no_rights = "r3k2r/8/8/8/8/8/8/R3K2R w - - 0 1";
        assert_eq!(engine_move_to_uci(no_rights, "O-O"), "e1g1");
        assert!(!is_legal_uci(no_rights, "e1g1"));
        assert_eq!(engine_move_to_uci(castle, "E2E4"), "e2e4");
        assert_eq!(engine_move_to_uci(castle, "Qxz9"), "Qxz9");
        assert_eq!(engine_move_to_uci("not a fen", "e2e4"), "e2e4");
    }
}
