//! A member of an archive as the visitor of [`crate::for_each_member`] sees it, and the rules
//! on paths and entry types every member is held to.

use std::cell::Cell;
use std::io::{self, Read, Write};

use crate::error::{ArchiveError, Problem, UnpackError};
use crate::{MAX_PATH_BYTES, MAX_PATH_DEPTH};

/// What a member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File {
        /// Its size in bytes.
        size: u64,
        /// Any execute bit is set in its mode.
        exec: bool,
    },
}

/// One member of an archive, its path and type already checked. A file's data is read
/// through it; whatever the visitor leaves unread is read past (and checked) afterwards.
pub struct Member<'a> {
    pub(crate) index: usize,
    pub(crate) path: Vec<String>,
    pub(crate) kind: Kind,
    pub(crate) data: Exact<&'a mut dyn Read>,
    pub(crate) over: &'a Cell<bool>,
}

impl Member<'_> {
    /// 1-based position among the archive's members.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The path by components: relative, none empty, `.` or `..`.
    pub fn path(&self) -> &[String] {
        &self.path
    }

    /// The path joined with `/`.
    pub fn shown(&self) -> String {
        self.path.join("/")
    }

    /// Directory or file.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// A file's data (its declared size was checked against the bounds before this); empty
    /// for a directory.
    pub fn read_all(&mut self) -> Result<Vec<u8>, ArchiveError> {
        // A directory's declared size is bounded only by the stream: it is read past, never
        // kept.
        let Kind::File { size, .. } = self.kind else {
            return Ok(Vec::new());
        };
        let mut data = Vec::with_capacity(size as usize);
        self.data
            .read_to_end(&mut data)
            .map_err(|e| read_error(self.over, self.index, e))?;
        Ok(data)
    }

    /// Copies a file's data to `out` (nothing for a directory): a failure to read is the archive's, a failure to write
    /// is `out`'s (an [`UnpackError::Io`]).
    pub fn copy_to(&mut self, out: &mut dyn Write) -> Result<u64, UnpackError> {
        if self.kind == Kind::Dir {
            return Ok(0);
        }
        let mut buf = [0u8; 64 * 1024];
        let mut copied = 0u64;
        loop {
            let n = self
                .data
                .read(&mut buf)
                .map_err(|e| read_error(self.over, self.index, e))?;
            if n == 0 {
                return Ok(copied);
            }
            out.write_all(&buf[..n]).map_err(|source| UnpackError::Io {
                context: format!("writing {}", self.shown()),
                source,
            })?;
            copied += n as u64;
        }
    }

    /// Reads past whatever the visitor left, so a file cut short is noticed.
    pub(crate) fn finish(mut self) -> Result<(), ArchiveError> {
        io::copy(&mut self.data, &mut io::sink())
            .map(drop)
            .map_err(|e| read_error(self.over, self.index, e))
    }
}

/// The error for a failed read: the stream bound if that is what stopped it (the budget
/// reader can only say so through `over`, as the tar crate wraps its error), else corruption.
pub(crate) fn read_error(over: &Cell<bool>, index: usize, e: io::Error) -> ArchiveError {
    if over.get() {
        ArchiveError::StreamTooLarge {
            max: crate::MAX_STREAM_BYTES,
        }
    } else {
        ArchiveError::Corrupt {
            index,
            reason: e.to_string(),
        }
    }
}

/// Reads exactly `left` bytes: the tar crate's entry reader ends quietly where the stream
/// does, which would pass a file cut short as a shorter file.
pub(crate) struct Exact<R> {
    pub(crate) inner: R,
    pub(crate) left: u64,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the archive ends {} bytes into an entry's data", self.left),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// The path `raw` by components, if it is one a member may have: UTF-8 without NUL, at most
/// [`MAX_PATH_BYTES`] long and [`MAX_PATH_DEPTH`] deep, relative, free of `..`. Empty and `.`
/// components are dropped, so the result may be empty (the root directory, `./`).
pub(crate) fn check_path(raw: &[u8]) -> Result<Vec<String>, Problem> {
    if raw.len() > MAX_PATH_BYTES {
        return Err(Problem::PathTooLong {
            len: raw.len(),
            max: MAX_PATH_BYTES,
        });
    }
    let text = std::str::from_utf8(raw).map_err(|_| Problem::BadPathBytes)?;
    if text.contains('\0') {
        return Err(Problem::BadPathBytes);
    }
    if text.starts_with('/') {
        return Err(Problem::Absolute);
    }
    let parts: Vec<&str> = text
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(Problem::ParentDir);
    }
    if parts.len() > MAX_PATH_DEPTH {
        return Err(Problem::PathTooDeep {
            depth: parts.len(),
            max: MAX_PATH_DEPTH,
        });
    }
    Ok(parts.into_iter().map(str::to_string).collect())
}

/// Refuses every entry type but regular files and directories (extension headers are
/// handled before this is asked).
pub(crate) fn check_kind(kind: tar::EntryType) -> Result<(), Problem> {
    use tar::EntryType as T;
    let name = match kind {
        T::Regular | T::Directory => return Ok(()),
        T::Symlink => return Err(Problem::Symlink),
        T::Link => return Err(Problem::HardLink),
        T::Char => "character device",
        T::Block => "block device",
        T::Fifo => "fifo",
        // Tar readers differ on it (GNU tar reads it as a regular file, others refuse it).
        T::Continuous => "contiguous file (type `7`)",
        T::GNUSparse => "GNU sparse file",
        other => return Err(Problem::Kind(format!("type {:?}", other.as_byte() as char))),
    };
    Err(Problem::Kind(name.to_string()))
}

/// A path as stored, for messages: lossy UTF-8, at most 200 characters.
pub(crate) fn shown(raw: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(raw);
    if text.chars().count() <= MAX {
        return text.into_owned();
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}… ({} bytes)", raw.len())
}
