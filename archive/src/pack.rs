//! Packing a tree into a snapshot, deterministically and within the bounds the reader holds
//! every archive to, so a snapshot Sweep makes is always one Sweep reads back.

use std::collections::BTreeMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use crate::error::{ArchiveError, Problem};
use crate::members::{check_path, shown};
use crate::{
    MAX_COMPRESSED_BYTES, MAX_ENTRIES, MAX_FILE_BYTES, MAX_LONG_NAME_BYTES, MAX_STREAM_BYTES,
};

/// An archived source tree.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// sha256 of `archive`, hex.
    pub sha256: String,
    /// The gzip'ed tar.
    pub archive: Vec<u8>,
}

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory.
    Dir,
    /// A regular file: its bytes and whether it is executable.
    File {
        /// Contents.
        data: Vec<u8>,
        /// Any execute bit was set.
        exec: bool,
    },
}

/// A source tree by path components: the map's order (component by component) is the
/// archive's order, the same as a depth-first walk with sorted siblings.
pub type Tree = BTreeMap<Vec<String>, Node>;

/// A GNU header's name field; a longer path is written as a GNU long name entry first.
const HEADER_NAME_BYTES: usize = 100;

/// The deterministic archive of `tree` (entries sorted by path components, zeroed times and
/// owners, modes 0755 or 0644), refused if it breaks a rule [`crate::for_each_member`]
/// holds archives to.
pub fn pack(tree: &Tree) -> Result<Snapshot, ArchiveError> {
    if tree.len() > MAX_ENTRIES {
        return Err(ArchiveError::TooManyEntries { max: MAX_ENTRIES });
    }
    let gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut builder = tar::Builder::new(Counted {
        inner: gz,
        bytes: 0,
    });
    let mut files = 0u64;
    for (i, (path, node)) in tree.iter().enumerate() {
        let index = i + 1;
        let joined = path.join("/");
        let fail = |problem| ArchiveError::Entry {
            index,
            path: shown(joined.as_bytes()),
            problem,
        };
        check_packable(&joined).map_err(fail)?;
        if let Node::File { data, .. } = node {
            files += data.len() as u64;
            if files > MAX_FILE_BYTES {
                return Err(fail(Problem::FilesTooLarge {
                    size: data.len() as u64,
                    total: files,
                    max: MAX_FILE_BYTES,
                }));
            }
        }
        append(&mut builder, &joined, node).map_err(|e| ArchiveError::Write {
            index,
            reason: e.to_string(),
        })?;
    }
    let written = |e: io::Error| ArchiveError::Write {
        index: tree.len(),
        reason: e.to_string(),
    };
    let counted = builder.into_inner().map_err(written)?;
    if counted.bytes > MAX_STREAM_BYTES {
        return Err(ArchiveError::StreamTooLarge {
            max: MAX_STREAM_BYTES,
        });
    }
    let archive = counted.inner.finish().map_err(written)?;
    if archive.len() > MAX_COMPRESSED_BYTES {
        return Err(ArchiveError::CompressedTooLarge {
            size: archive.len(),
            max: MAX_COMPRESSED_BYTES,
        });
    }
    Ok(Snapshot {
        sha256: hex::encode(Sha256::digest(&archive)),
        archive,
    })
}

/// The path rules, and the long name bound for a path the header cannot hold (the tar crate
/// writes it NUL-terminated).
fn check_packable(joined: &str) -> Result<(), Problem> {
    if check_path(joined.as_bytes())?.is_empty() {
        return Err(Problem::EmptyPath);
    }
    let long_name = joined.len() as u64 + 1;
    if joined.len() >= HEADER_NAME_BYTES && long_name > MAX_LONG_NAME_BYTES {
        return Err(Problem::LongName {
            size: long_name,
            max: MAX_LONG_NAME_BYTES,
        });
    }
    Ok(())
}

fn append<W: Write>(builder: &mut tar::Builder<W>, path: &str, node: &Node) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    match node {
        Node::Dir => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            builder.append_data(&mut header, path, io::empty())
        }
        Node::File { data, exec } => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(if *exec { 0o755 } else { 0o644 });
            header.set_size(data.len() as u64);
            builder.append_data(&mut header, path, data.as_slice())
        }
    }
}

/// Counts the tar stream's bytes on their way to the compressor.
struct Counted<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
