//! The bounded reader every archive Sweep reads goes through.
//!
//! The tar crate is asked for raw entries, so it never reads a body on its own: GNU long
//! names and links (`L`, `K`) and pax headers (`x`, `g`) are read here, each only after its
//! declared size was checked against its bound. The decompressed stream as a whole is read
//! through a budget, so no archive makes the reader run past [`MAX_STREAM_BYTES`].

use std::cell::Cell;
use std::io::{self, Read};

use flate2::read::GzDecoder;

use crate::error::{ArchiveError, Problem};
use crate::members::{check_kind, check_path, read_error, shown, Exact, Kind, Member};
use crate::pax::{self, Pax};
use crate::{
    MAX_COMPRESSED_BYTES, MAX_ENTRIES, MAX_FILE_BYTES, MAX_LONG_NAME_BYTES, MAX_PAX_BYTES,
    MAX_STREAM_BYTES,
};

/// How the tar stream is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// gzip'ed (snapshots).
    Gzip,
    /// A plain tar (`git archive`).
    None,
}

/// Reads the archive `bytes`, calling `visit` with each member (a regular file or a
/// directory) in archive order, after its header, path and declared size passed every rule;
/// the first rule broken, or error `visit` returns, ends the walk. A root directory entry
/// (`./`) is counted but not visited.
pub fn for_each_member<E, F>(bytes: &[u8], compression: Compression, mut visit: F) -> Result<(), E>
where
    E: From<ArchiveError>,
    F: FnMut(&mut Member<'_>) -> Result<(), E>,
{
    // A plain tar is its own stream, bounded by the stream's budget below.
    if compression == Compression::Gzip && bytes.len() > MAX_COMPRESSED_BYTES {
        return Err(ArchiveError::CompressedTooLarge {
            size: bytes.len(),
            max: MAX_COMPRESSED_BYTES,
        }
        .into());
    }
    let over = Cell::new(false);
    let decoded: Box<dyn Read + '_> = match compression {
        Compression::Gzip => Box::new(GzDecoder::new(bytes)),
        Compression::None => Box::new(bytes),
    };
    let budget = Budget {
        inner: decoded,
        left: MAX_STREAM_BYTES,
        over: &over,
    };
    let mut archive = tar::Archive::new(budget);
    let mut state = State::default();
    let entries = archive
        .entries()
        .map_err(|e| read_error(&over, 1, e))?
        .raw(true);
    for entry in entries {
        let mut entry = entry.map_err(|e| read_error(&over, state.members + 1, e))?;
        if let Some(mut member) = state.next(&mut entry, &over)? {
            visit(&mut member)?;
            member.finish()?;
        }
    }
    state.finish()?;
    // The end blocks and the gzip trailer: a wrong checksum or length refuses the archive.
    io::copy(&mut archive.into_inner(), &mut io::sink())
        .map_err(|e| read_error(&over, state.members + 1, e))?;
    Ok(())
}

/// Reads at most `left` bytes of `inner`; trying to read past them sets `over` and fails.
struct Budget<'f, R> {
    inner: R,
    left: u64,
    over: &'f Cell<bool>,
}

impl<R: Read> Read for Budget<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // A stream exactly at the bound is fine; one byte more is not.
            let mut probe = [0u8; 1];
            if self.inner.read(&mut probe)? == 0 {
                return Ok(0);
            }
            self.over.set(true);
            return Err(io::Error::other("the tar stream is over its bound"));
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Extension headers read, waiting for the member they describe.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: bool,
    pax: Option<Pax>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.long_name.is_none() && !self.long_link && self.pax.is_none()
    }

    /// The path of the member these headers describe (a pax `path` over a GNU long name
    /// over the header's own) and the pax `size`, if any; empties `self`.
    fn take_for(&mut self, header_path: Vec<u8>) -> (Vec<u8>, Option<u64>) {
        let Pending { long_name, pax, .. } = std::mem::take(self);
        let (pax_path, pax_size) = pax.map_or((None, None), |p| (p.path, p.size));
        (pax_path.or(long_name).unwrap_or(header_path), pax_size)
    }
}

#[derive(Default)]
struct State {
    /// Members seen (visited or not).
    members: usize,
    /// Declared sizes of the files seen.
    files: u64,
    pending: Pending,
}

fn entry_error(index: usize, path: &[u8], problem: Problem) -> ArchiveError {
    ArchiveError::Entry {
        index,
        path: shown(path),
        problem,
    }
}

impl State {
    /// The member `entry` is, or `None` when it is an extension header (read into
    /// `pending`) or the root directory.
    fn next<'e, R: Read>(
        &mut self,
        entry: &'e mut tar::Entry<'_, R>,
        over: &'e Cell<bool>,
    ) -> Result<Option<Member<'e>>, ArchiveError> {
        let index = self.members + 1;
        let header_path = entry.path_bytes().into_owned();
        let kind = entry.header().entry_type();
        if kind.is_gnu_longname()
            || kind.is_gnu_longlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions()
        {
            self.extension(entry, over, index)
                .map_err(|f| f.or_entry(|p| entry_error(index, &header_path, p)))?;
            return Ok(None);
        }
        if self.members >= MAX_ENTRIES {
            return Err(ArchiveError::TooManyEntries { max: MAX_ENTRIES });
        }
        self.members += 1;
        let (path_bytes, pax_size) = self.pending.take_for(header_path);
        let fail = |problem| entry_error(index, &path_bytes, problem);
        let size = entry.size();
        check_kind(kind).map_err(fail)?;
        if let Some(pax) = pax_size.filter(|&s| s != size) {
            return Err(fail(Problem::SizeMismatch { pax, header: size }));
        }
        let path = check_path(&path_bytes).map_err(fail)?;
        let kind = match kind {
            tar::EntryType::Directory if path.is_empty() => return Ok(None),
            tar::EntryType::Directory => Kind::Dir,
            _ if path.is_empty() => return Err(fail(Problem::EmptyPath)),
            _ => {
                self.file(size, &fail)?;
                let exec = entry.header().mode().unwrap_or(0o644) & 0o111 != 0;
                Kind::File { size, exec }
            }
        };
        let data = Exact {
            inner: entry as &mut dyn Read,
            left: size,
        };
        Ok(Some(Member {
            index,
            path,
            kind,
            data,
            over,
        }))
    }

    /// Adds a file of `size` declared bytes to the total, refusing it past the bound.
    fn file(
        &mut self,
        size: u64,
        fail: &dyn Fn(Problem) -> ArchiveError,
    ) -> Result<(), ArchiveError> {
        let total = self.files.saturating_add(size);
        if total > MAX_FILE_BYTES {
            return Err(fail(Problem::FilesTooLarge {
                size,
                total,
                max: MAX_FILE_BYTES,
            }));
        }
        self.files = total;
        Ok(())
    }

    /// Reads a GNU long name or link or a local pax header into `pending`; checks a global
    /// pax header.
    fn extension<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        over: &Cell<bool>,
        index: usize,
    ) -> Result<(), Failure> {
        let size = entry.size();
        let kind = entry.header().entry_type();
        let twice = |what| Failure::Problem(Problem::DanglingExtension(what));
        if kind.is_gnu_longname() {
            if self.pending.long_name.is_some() {
                return Err(twice("two GNU long names before one entry"));
            }
            let too_large = |size| Problem::LongName {
                size,
                max: MAX_LONG_NAME_BYTES,
            };
            let mut body = read_body(entry, over, index, size, MAX_LONG_NAME_BYTES, too_large)?;
            // Written NUL-terminated.
            while body.last() == Some(&0) {
                body.pop();
            }
            self.pending.long_name = Some(body);
        } else if kind.is_gnu_longlink() {
            if self.pending.long_link {
                return Err(twice("two GNU long link names before one entry"));
            }
            let too_large = |size| Problem::LongLink {
                size,
                max: MAX_LONG_NAME_BYTES,
            };
            // Read only to be bounded: links are refused by their type.
            read_body(entry, over, index, size, MAX_LONG_NAME_BYTES, too_large)?;
            self.pending.long_link = true;
        } else if kind.is_pax_global_extensions() {
            let body = read_body(entry, over, index, size, MAX_PAX_BYTES, pax_too_large)?;
            pax::parse(&body, true).map_err(Failure::Problem)?;
        } else {
            if self.pending.pax.is_some() {
                return Err(twice("two pax headers before one entry"));
            }
            let body = read_body(entry, over, index, size, MAX_PAX_BYTES, pax_too_large)?;
            self.pending.pax = Some(pax::parse(&body, false).map_err(Failure::Problem)?);
        }
        Ok(())
    }

    /// Extension headers with no member after them are refused.
    fn finish(&self) -> Result<(), ArchiveError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        Err(ArchiveError::Entry {
            index: self.members + 1,
            path: String::new(),
            problem: Problem::DanglingExtension("extension headers with no entry after them"),
        })
    }
}

fn pax_too_large(size: u64) -> Problem {
    Problem::PaxTooLarge {
        size,
        max: MAX_PAX_BYTES,
    }
}

/// An entry's problem (its path is added by the caller) or an archive-wide error.
enum Failure {
    Problem(Problem),
    Archive(ArchiveError),
}

impl Failure {
    fn or_entry(self, fail: impl Fn(Problem) -> ArchiveError) -> ArchiveError {
        match self {
            Failure::Problem(p) => fail(p),
            Failure::Archive(a) => a,
        }
    }
}

/// The body of an extension header, read only if its declared `size` is at most `max`.
fn read_body<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    over: &Cell<bool>,
    index: usize,
    size: u64,
    max: u64,
    too_large: impl Fn(u64) -> Problem,
) -> Result<Vec<u8>, Failure> {
    if size > max {
        return Err(Failure::Problem(too_large(size)));
    }
    let mut body = Vec::with_capacity(size as usize);
    Exact {
        inner: entry,
        left: size,
    }
    .read_to_end(&mut body)
    .map_err(|e| Failure::Archive(read_error(over, index, e)))?;
    Ok(body)
}
