//! What can be wrong with an archive, named precisely enough to fix it.

use std::io;

/// Why an archive was refused (or could not be made).
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The compressed archive is larger than [`crate::MAX_COMPRESSED_BYTES`].
    #[error("the archive is {size} bytes; at most {max}")]
    CompressedTooLarge {
        /// Its size.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// The tar stream (headers, padding and data) runs past [`crate::MAX_STREAM_BYTES`].
    #[error("the archive expands to more than {max} bytes of tar (headers, padding and data)")]
    StreamTooLarge {
        /// The bound.
        max: u64,
    },
    /// More members than [`crate::MAX_ENTRIES`].
    #[error("more than {max} entries")]
    TooManyEntries {
        /// The bound.
        max: usize,
    },
    /// One entry breaks a rule.
    #[error("entry {index} (path {path}): {problem}")]
    Entry {
        /// 1-based number of the member the entry is or describes.
        index: usize,
        /// Its path as stored, shortened for display.
        path: String,
        /// What is wrong with it.
        problem: Problem,
    },
    /// Not a readable gzip'ed tar (bad gzip, bad checksum, cut short).
    #[error("not a valid archive at entry {index}: {reason}")]
    Corrupt {
        /// 1-based number of the member being read.
        index: usize,
        /// The decoder's words.
        reason: String,
    },
    /// Packing a tree failed while writing entry `index` (the tar writer refused it).
    #[error("writing entry {index}: {reason}")]
    Write {
        /// 1-based number of the entry.
        index: usize,
        /// The writer's words.
        reason: String,
    },
}

/// What is wrong with one entry of an archive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A GNU long name (`L`) longer than [`crate::MAX_LONG_NAME_BYTES`].
    #[error("GNU long name of {size} bytes; at most {max}")]
    LongName {
        /// Declared size.
        size: u64,
        /// The bound.
        max: u64,
    },
    /// A GNU long link name (`K`) longer than [`crate::MAX_LONG_NAME_BYTES`].
    #[error("GNU long link name of {size} bytes; at most {max}")]
    LongLink {
        /// Declared size.
        size: u64,
        /// The bound.
        max: u64,
    },
    /// A pax header (`x` or `g`) larger than [`crate::MAX_PAX_BYTES`].
    #[error("pax header of {size} bytes; at most {max}")]
    PaxTooLarge {
        /// Declared size.
        size: u64,
        /// The bound.
        max: u64,
    },
    /// A pax header that is not a list of `LENGTH KEY=VALUE\n` records, or that uses a key
    /// Sweep does not honour where it would change what is read.
    #[error("pax header: {0}")]
    BadPax(String),
    /// Two extension headers of one kind (`L`, `K` or `x`) before one member, or extension
    /// headers with no member after them.
    #[error("{0}")]
    DanglingExtension(&'static str),
    /// A path longer than [`crate::MAX_PATH_BYTES`].
    #[error("path of {len} bytes; at most {max}")]
    PathTooLong {
        /// Its length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A path with more components than [`crate::MAX_PATH_DEPTH`].
    #[error("path of {depth} components; at most {max}")]
    PathTooDeep {
        /// Its components.
        depth: usize,
        /// The bound.
        max: usize,
    },
    /// A path starting at `/`.
    #[error("absolute paths are not allowed")]
    Absolute,
    /// A path with a `..` component.
    #[error("paths may not contain `..`")]
    ParentDir,
    /// A file whose path names no file (empty, or only `.`).
    #[error("a file without a name")]
    EmptyPath,
    /// A path that is not UTF-8 or holds a NUL byte.
    #[error("the path is not UTF-8 text without NUL bytes")]
    BadPathBytes,
    /// A symbolic link.
    #[error("symbolic links are not allowed")]
    Symlink,
    /// A hard link.
    #[error("hard links are not allowed")]
    HardLink,
    /// Anything but a regular file or a directory (devices, fifos, contiguous and sparse
    /// files, unknown types).
    #[error("{0} entries are not allowed: only regular files and directories")]
    Kind(String),
    /// A file that would take the files' total past [`crate::MAX_FILE_BYTES`].
    #[error("a file of {size} bytes takes the files' total to {total} bytes; at most {max}")]
    FilesTooLarge {
        /// Its declared size.
        size: u64,
        /// The total with it.
        total: u64,
        /// The bound.
        max: u64,
    },
    /// A pax `size` that is not the header's own: readers that honour one or the other would
    /// see different archives.
    #[error("pax size {pax} disagrees with the header's size {header}")]
    SizeMismatch {
        /// The pax record's size.
        pax: u64,
        /// The header's size.
        header: u64,
    },
}

/// Why an archive could not be unpacked into a directory.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// The archive breaks a rule or is unreadable.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// Writing the tree failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
}
