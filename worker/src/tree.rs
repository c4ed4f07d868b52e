//! Private copies of a source tree, one per build.
//!
//! Every variant is built in its own fresh copy of the unpacked snapshot, never in the snapshot
//! itself: a Makefile that writes object files into its tree would otherwise leave them for
//! the next variant, whose `make` then only relinks the first variant's objects, and every
//! variant silently becomes the same binary. A copy costs milliseconds next to a compile.

use std::fs;
use std::io;
use std::path::Path;

/// Copies the directory `from` into `to` (which must not exist yet): directories, regular files
/// with their permissions and modification times, and symbolic links as links. Errors name the
/// path they concern.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir(to).map_err(at(to))?;
    copy_dir(from, to)
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    for entry in fs::read_dir(from).map_err(at(from))? {
        let entry = entry.map_err(at(from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        match copy_entry(&entry, &src, &dst) {
            Ok(()) => {}
            // Only a checkout used in place (tests, local runs) changes under us, e.g. a
            // `make` there renaming its temporary binary: what vanished was not source.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !src.exists() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn copy_entry(entry: &fs::DirEntry, src: &Path, dst: &Path) -> io::Result<()> {
    // The entry's own type: a symbolic link is copied as a link, never followed.
    let kind = entry.file_type().map_err(at(src))?;
    if kind.is_dir() {
        fs::create_dir(dst).map_err(at(dst))?;
        copy_dir(src, dst)
    } else if kind.is_file() {
        fs::copy(src, dst).map_err(at(src))?;
        // Keep the snapshot's timestamps: `make` compares them, and a copy stamped in
        // directory order could make a generated file look older than its input.
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .map_err(at(src))?;
        fs::File::open(dst)
            .and_then(|f| f.set_modified(modified))
            .map_err(at(dst))
    } else if kind.is_symlink() {
        // Snapshots hold no links (unpacking refuses them); a local checkout may, and a
        // link copied as a link means what it meant in the checkout.
        let target = fs::read_link(src).map_err(at(src))?;
        std::os::unix::fs::symlink(target, dst).map_err(at(dst))
    } else {
        // Sockets and FIFOs are not source; one left in a checkout by a running tool
        // must not fail the build.
        Ok(())
    }
}

/// Adds the path to an I/O error, keeping its kind.
fn at(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, SystemTime};

    #[test]
    fn copies_files_dirs_modes_times_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::create_dir_all(src.join("sub/deeper")).unwrap();
        fs::write(src.join("Makefile"), "all:\n").unwrap();
        fs::write(src.join("sub/deeper/a.c"), "int a;").unwrap();
        fs::write(src.join("gen.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(src.join("gen.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        fs::File::open(src.join("Makefile"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::os::unix::fs::symlink("sub/deeper/a.c", src.join("link.c")).unwrap();

        let dst = dir.path().join("copy");
        copy_tree(&src, &dst).unwrap();
        assert_eq!(fs::read(dst.join("sub/deeper/a.c")).unwrap(), b"int a;");
        let mode = fs::metadata(dst.join("gen.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        let modified = fs::metadata(dst.join("Makefile"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(modified, old);
        assert_eq!(
            fs::read_link(dst.join("link.c")).unwrap(),
            Path::new("sub/deeper/a.c")
        );

        // Writing into the copy leaves the original alone.
        fs::write(dst.join("sub/deeper/a.o"), "obj").unwrap();
        assert!(!src.join("sub/deeper/a.o").exists());
    }

    #[test]
    fn refuses_an_existing_destination_and_names_paths() {
        let dir = tempfile::tempdir().unwrap();
        let err = copy_tree(dir.path(), dir.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        let missing = dir.path().join("missing");
        let err = copy_tree(&missing, &dir.path().join("to")).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
