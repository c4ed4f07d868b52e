//! What callers do with an archive, all through [`for_each_member`]: check it, read it into
//! memory, pick some files, or unpack it into a directory.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::error::{ArchiveError, UnpackError};
use crate::members::Kind;
use crate::pack::{Node, Tree};
use crate::read::{for_each_member, Compression};

/// Checks a gzip'ed snapshot against every rule and bound, keeping nothing.
pub fn verify(archive: &[u8]) -> Result<(), ArchiveError> {
    for_each_member(archive, Compression::Gzip, |_| Ok::<_, ArchiveError>(()))
}

/// The tree an archive holds (the files' data in memory: at most
/// [`crate::MAX_FILE_BYTES`]).
pub fn read_tree(bytes: &[u8], compression: Compression) -> Result<Tree, ArchiveError> {
    let mut tree = Tree::new();
    for_each_member(bytes, compression, |member| {
        let node = match member.kind() {
            Kind::Dir => Node::Dir,
            Kind::File { exec, .. } => Node::File {
                data: member.read_all()?,
                exec,
            },
        };
        tree.insert(member.path().to_vec(), node);
        Ok::<_, ArchiveError>(())
    })?;
    Ok(tree)
}

/// The regular files of a gzip'ed snapshot that `wants` (given each file's path and size)
/// asks for, as (path, contents), in archive order. The whole archive is checked; files not
/// wanted are read past without being kept.
pub fn read_files(
    archive: &[u8],
    wants: impl Fn(&str, u64) -> bool,
) -> Result<Vec<(String, Vec<u8>)>, ArchiveError> {
    let mut out = Vec::new();
    for_each_member(archive, Compression::Gzip, |member| {
        if let Kind::File { size, .. } = member.kind() {
            let path = member.shown();
            if wants(&path, size) {
                out.push((path, member.read_all()?));
            }
        }
        Ok::<_, ArchiveError>(())
    })?;
    Ok(out)
}

/// Unpacks a gzip'ed snapshot into `dest` (which must exist, and should be new and empty: a
/// failure leaves what was written so far). Files get mode 0755 if any execute bit was set,
/// else 0644; no link, device or setuid bit is ever made.
pub fn unpack(archive: &[u8], dest: &Path) -> Result<(), UnpackError> {
    for_each_member(archive, Compression::Gzip, |member| {
        let shown = member.shown();
        let target = member
            .path()
            .iter()
            .fold(dest.to_path_buf(), |p, c| p.join(c));
        let io = |what: &str| {
            let context = format!("{what} {shown}");
            move |source| UnpackError::Io { context, source }
        };
        match member.kind() {
            Kind::Dir => fs::create_dir_all(&target).map_err(io("creating"))?,
            Kind::File { exec, .. } => {
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent).map_err(io("creating the directory of"))?;
                }
                let mut file = fs::File::create(&target).map_err(io("creating"))?;
                member.copy_to(&mut file)?;
                let mode = if exec { 0o755 } else { 0o644 };
                fs::set_permissions(&target, fs::Permissions::from_mode(mode))
                    .map_err(io("setting the mode of"))?;
            }
        }
        Ok(())
    })
}
