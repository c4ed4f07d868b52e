//! Sweeps that move between stores (issue 50): the export file, self-contained and
//! versioned. A file is gzip of two lines: a header (format, version, the sha256 of the
//! payload's bytes) and the payload, a [`SweepExport`] in JSON. Everything in it is read from
//! one store (`store/transfer.rs` writes and reads it) and checked before anything is
//! written: a file that is not one, of another version, damaged or too large is refused with
//! the reason ([`Refused`]).

use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sweep_domain::engine::EngineDef;
use sweep_domain::epd::Suite;
use sweep_domain::source::SourceOrigin;
use sweep_domain::spec::SweepSpec;

/// The header's `format`.
pub const FORMAT: &str = "sweep-export";
/// The version this coordinator writes and reads.
pub const VERSION: u32 = 1;
/// Most bytes a payload may have once decompressed (a 250,000-result sweep is about 80 MB).
pub const MAX_PAYLOAD: u64 = 1 << 30;

/// Why a file cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Not gzip, or cut short.
    #[error("not a sweep export: {0}")]
    NotGzip(String),
    /// Past [`MAX_PAYLOAD`].
    #[error("the file holds more than {MAX_PAYLOAD} bytes once decompressed")]
    TooLarge,
    /// The first line is no header of ours.
    #[error("not a sweep export (no `{FORMAT}` header)")]
    NoHeader,
    /// Written by a version this one cannot read.
    #[error("export format version {0}; this Sweep reads version {VERSION}")]
    Version(u32),
    /// The payload is not what the header says it is.
    #[error("the file is damaged: its payload's sha256 is {found}, its header says {expected}")]
    Checksum {
        /// In the header.
        expected: String,
        /// Of the bytes read.
        found: String,
    },
    /// The payload does not decode, or says something impossible.
    #[error("the export's {0}")]
    Payload(String),
}

/// The first line of a file.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    payload_sha256: String,
}

/// One sweep as exported: everything its table, its positions and its reuse need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepExport {
    /// Where it comes from: its id there, when it was exported, by which Sweep.
    pub original: Original,
    /// The stored spec.
    pub spec: SweepSpec,
    /// The engine definition it ran.
    pub engine_def: EngineDef,
    /// Its source snapshot's sha256 (`None`: a binary-only engine) and provenance.
    pub source_sha256: Option<String>,
    /// How the source came to be.
    pub origin: SourceOrigin,
    /// The snapshots it built (the sweep's and its variants' own), each `(sha256, hex of the
    /// archive)`; only those the exporter could read (see [`Original::snapshots_left_out`]).
    pub snapshots: Vec<(String, String)>,
    /// Its suite versions, positions included, in the spec's order.
    pub suites: Vec<Suite>,
    /// Cancelled before it ended.
    pub cancelled: bool,
    /// Builds that failed, with their error, by name.
    pub build_errors: Vec<(String, String)>,
    /// Every result.
    pub results: Vec<ExportedResult>,
    /// Every cross-check measurement.
    pub cross_checks: Vec<ExportedResult>,
    /// How each build's binary was made, by build name.
    pub build_records: Vec<ExportedRecord>,
    /// Each variant's speed runs.
    pub speed_runs: Vec<ExportedSpeedRun>,
}

/// The exported sweep where it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Original {
    /// Its id in the store it was exported from.
    pub sweep_id: i64,
    /// When it was submitted there (kept: the table's heading says it).
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When it was exported.
    pub exported_at: chrono::DateTime<chrono::Utc>,
    /// The Sweep version that exported it.
    pub sweep_version: String,
    /// Snapshots the exporter could not read (no right to): the store importing must
    /// already hold them.
    #[serde(default)]
    pub snapshots_left_out: Vec<String>,
}

/// A result (or cross-check) of the sweep, by build and suite name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedResult {
    /// Build name.
    pub build: String,
    /// Suite name.
    pub suite: String,
    /// The worker's name there.
    pub worker: String,
    /// Position index in the suite.
    pub index: i32,
    /// Depth limit (0 for a node limit).
    pub depth: i32,
    /// Node limit (0 for a depth limit).
    pub nodes_limit: i64,
    /// EPD id.
    pub position_id: String,
    /// Nodes searched.
    pub nodes: i64,
    /// Best move.
    pub bestmove: String,
    /// Solved (results only).
    pub solved: bool,
    /// Score in centipawns.
    pub score_cp: Option<i32>,
    /// Mate score.
    pub score_mate: Option<i32>,
    /// Depth reached.
    pub reached_depth: i32,
    /// Wall time of the search.
    pub time_ms: i64,
    /// Why it has no valid figure.
    pub error: Option<String>,
    /// The engine's counters (results only).
    pub counters: Option<serde_json::Value>,
    /// Taken from an earlier sweep rather than measured by this one (results only).
    pub reused: bool,
    /// Disagreed with the result it re-measured (cross-checks only).
    pub mismatch: bool,
}

/// A build record (how one worker got a build's binary), by build name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedRecord {
    /// Build name.
    pub build: String,
    /// The worker's name there.
    pub worker: String,
    /// Host.
    pub host: String,
    /// CPU model.
    pub cpu_model: String,
    /// Compiler version.
    pub compiler: Option<String>,
    /// Build command.
    pub argv: serde_json::Value,
    /// The binary's sha256.
    pub binary_sha256: String,
    /// Its bench total.
    pub bench_nodes: Option<i64>,
    /// Why its bench disagreed.
    pub bench_mismatch: Option<String>,
    /// The sandbox it was built in.
    pub sandbox: Option<String>,
}

/// One pair (or the ending error) of a variant's speed job, by build name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedSpeedRun {
    /// The variant.
    pub build: String,
    /// The worker's name there.
    pub worker: String,
    /// Pair number (the error's row: after the last pair).
    pub pair: i32,
    /// Baseline CPU, wall, nodes, then the variant's: absent on the error's row.
    pub figures: Option<[i64; 6]>,
    /// Why the job ended short.
    pub error: Option<String>,
}

/// The file of `export`.
pub fn encode(export: &SweepExport) -> anyhow::Result<Vec<u8>> {
    let payload = serde_json::to_vec(export)?;
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        payload_sha256: hex::encode(Sha256::digest(&payload)),
    };
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
    serde_json::to_writer(&mut gz, &header)?;
    gz.write_all(b"\n")?;
    gz.write_all(&payload)?;
    Ok(gz.finish()?)
}

/// The export a file holds, checked: gzip, at most [`MAX_PAYLOAD`] bytes, our header and
/// version, the payload's sha256, a payload that decodes.
pub fn decode(file: &[u8]) -> Result<SweepExport, Refused> {
    let mut bytes = Vec::new();
    GzDecoder::new(file)
        .take(MAX_PAYLOAD + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Refused::NotGzip(e.to_string()))?;
    if bytes.len() as u64 > MAX_PAYLOAD {
        return Err(Refused::TooLarge);
    }
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(Refused::NoHeader)?;
    let header: Header =
        serde_json::from_slice(&bytes[..newline]).map_err(|_| Refused::NoHeader)?;
    if header.format != FORMAT {
        return Err(Refused::NoHeader);
    }
    if header.version != VERSION {
        return Err(Refused::Version(header.version));
    }
    let payload = &bytes[newline + 1..];
    let found = hex::encode(Sha256::digest(payload));
    if found != header.payload_sha256 {
        return Err(Refused::Checksum {
            expected: header.payload_sha256,
            found,
        });
    }
    serde_json::from_slice(payload).map_err(|e| Refused::Payload(format!("payload: {e}")))
}

#[cfg(test)]
mod tests;
