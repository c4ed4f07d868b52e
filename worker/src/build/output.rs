//! A build's captured output: the tail of each stream, and a line saying what was cut.

use sweep_domain::bounds::{cut_marker, MAX_BUILD_OUTPUT};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes of compiler output kept per stream (stdout, stderr): the last ones, where compilers
/// put their errors. Both streams, their cut markers and the report's first line fit in
/// [`MAX_BUILD_OUTPUT`], so nothing is cut twice on the way to the coordinator.
const OUTPUT_CAP: usize = MAX_BUILD_OUTPUT / 2 - 1024;

/// A stream's kept output: its last bytes, and how many came before them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Tail {
    /// The last (at most [`OUTPUT_CAP`]) bytes, as text.
    text: String,
    /// Bytes cut from the front.
    cut: usize,
}

/// Reads a pipe to the end, keeping its last [`OUTPUT_CAP`] bytes (a compiler's errors come
/// last; the first lines are usually the command echoed); the whole pipe is drained so the
/// child never blocks on a full pipe.
pub(super) async fn read_tail<R: AsyncRead + Unpin>(pipe: Option<R>) -> Tail {
    let Some(mut pipe) = pipe else {
        return Tail::default();
    };
    let mut kept = Vec::new();
    let mut cut = 0;
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                // Trimmed in steps of at least OUTPUT_CAP, so the copying stays linear.
                if kept.len() >= 2 * OUTPUT_CAP {
                    let excess = kept.len() - OUTPUT_CAP;
                    kept.drain(..excess);
                    cut += excess;
                }
            }
        }
    }
    if kept.len() > OUTPUT_CAP {
        let excess = kept.len() - OUTPUT_CAP;
        kept.drain(..excess);
        cut += excess;
    }
    if cut > 0 {
        // Start at a character, not inside one (UTF-8 continuation bytes are 0b10xxxxxx).
        let inside = kept
            .iter()
            .take(3)
            .take_while(|b| *b & 0xC0 == 0x80)
            .count();
        kept.drain(..inside);
        cut += inside;
    }
    Tail {
        text: String::from_utf8_lossy(&kept).into_owned(),
        cut,
    }
}

/// Stdout then stderr, each after a line saying how much of its front was cut, if any.
pub(super) fn join_output(stdout: Tail, stderr: Tail) -> String {
    let mut out = String::new();
    for tail in [stdout, stderr] {
        if tail.text.is_empty() && tail.cut == 0 {
            continue;
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        if tail.cut > 0 {
            out.push_str(&cut_marker(tail.cut));
        }
        out.push_str(&tail.text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::error::BuildError;

    fn tail(text: &str, cut: usize) -> Tail {
        Tail {
            text: text.into(),
            cut,
        }
    }

    #[test]
    fn output_joins_and_marks_what_was_cut() {
        let s = join_output(tail("a", 0), tail("b\n", 7));
        assert_eq!(s, "a\n[... 7 bytes cut; the last part follows]\nb\n");
        assert_eq!(join_output(tail("", 0), tail("e", 0)), "e");
    }

    #[tokio::test]
    async fn a_long_stream_keeps_its_tail() {
        // A compiler's error comes last, after far more than the cap of noise.
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!("cc -c file{i}.c\n"));
        }
        text.push_str("flaky.c:1: error: the real reason\n");
        let kept = read_tail(Some(text.as_bytes())).await;
        assert!(
            kept.text.ends_with("error: the real reason\n"),
            "{}",
            kept.text
        );
        assert_eq!(kept.text.len(), OUTPUT_CAP);
        assert_eq!(kept.cut, text.len() - OUTPUT_CAP);
        let joined = join_output(Tail::default(), kept);
        assert!(
            joined.starts_with(&format!("[... {} bytes cut", text.len() - OUTPUT_CAP)),
            "{}",
            &joined[..80]
        );

        // A cut inside a character moves to the next one instead of leaving a broken one.
        let text = format!("x{}", "é".repeat(OUTPUT_CAP));
        let kept = read_tail(Some(text.as_bytes())).await;
        assert!(!kept.text.contains('\u{FFFD}'));
        assert_eq!(kept.cut + kept.text.len(), text.len());

        // Short output is kept whole, unmarked.
        assert_eq!(
            read_tail(Some(&b"error: x\n"[..])).await,
            tail("error: x\n", 0)
        );
    }

    #[test]
    fn both_streams_and_the_report_fit_what_the_coordinator_keeps() {
        let big = || tail(&"y".repeat(OUTPUT_CAP), usize::MAX / 2);
        let e = BuildError::Failed {
            status: "exit status: 2".into(),
            output: join_output(big(), big()),
        };
        assert!(e.report().len() <= MAX_BUILD_OUTPUT, "{}", e.report().len());
    }
}
