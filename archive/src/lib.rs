//! Sweep's source snapshots: the one place that writes and reads their format.
//!
//! A snapshot is a gzip'ed tar of regular files and directories. [`pack`] makes one from a
//! [`Tree`] deterministically (entries in path order, zeroed times and owners, normalised
//! modes), so the same tree always hashes the same. Every archive Sweep reads (an upload on
//! the coordinator, a `git archive`, a download on a worker) goes through [`for_each_member`]
//! and the helpers built on it ([`verify`], [`read_tree`], [`read_files`], [`unpack`]), so
//! one set of rules and bounds holds on every side.
//!
//! The bounds are checked against what a header *declares* before its body is read: the
//! `tar` crate would read GNU long names and pax headers whole into memory, so the reader
//! takes raw entries and handles those itself. What is bounded, and by how much, is the
//! constants below.

#![warn(missing_docs)]

mod error;
mod members;
mod pack;
mod pax;
mod read;
mod unpack;

#[cfg(test)]
mod tests;

pub use error::{ArchiveError, Problem, UnpackError};
pub use members::{Kind, Member};
pub use pack::{pack, Node, Snapshot, Tree};
pub use read::{for_each_member, Compression};
pub use unpack::{read_files, read_tree, unpack, verify};

const MIB: u64 = 1024 * 1024;

/// Most bytes of a gzip'ed archive (an upload's body, a download).
pub const MAX_COMPRESSED_BYTES: usize = 64 * 1024 * 1024;

/// Most bytes the regular files of one archive may add up to, by their declared sizes.
pub const MAX_FILE_BYTES: u64 = 64 * MIB;

/// Most members (files and directories) of one archive.
pub const MAX_ENTRIES: usize = 100_000;

/// Most bytes of the tar stream read from one archive: file data, every header and padding.
/// Room for each member's header block and the padding of its data, plus 16 MiB for long
/// names, pax headers and the end blocks; a stream of empty entries or padding stops here.
pub const MAX_STREAM_BYTES: u64 = MAX_FILE_BYTES + MAX_ENTRIES as u64 * 1024 + 16 * MIB;

/// Longest GNU long name or long link name (`L`/`K` entries), in bytes.
pub const MAX_LONG_NAME_BYTES: u64 = 4096;

/// Largest pax header body (`x`/`g` entries), in bytes.
pub const MAX_PAX_BYTES: u64 = 64 * 1024;

/// Longest path of a member, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// Most components in the path of a member.
pub const MAX_PATH_DEPTH: usize = 64;
