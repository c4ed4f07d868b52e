//! Every rule of the reader, each shown by an archive that breaks it, built in memory by hand
//! (the tar crate's own writer refuses most of them).

use std::io::Write;
use std::time::{Duration, Instant};

use crate::pax::record;
use crate::*;

const GIB2: u64 = 2 << 30;

/// A tar stream written header by header, sizes declared at will.
#[derive(Default)]
struct Raw(Vec<u8>);

impl Raw {
    /// A header for `name` (at most 100 bytes) of type `kind` declaring `size` bytes.
    fn header(mut self, name: &[u8], kind: u8, size: u64) -> Self {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_entry_type(tar::EntryType::new(kind));
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        self.0.extend_from_slice(h.as_bytes());
        self
    }

    /// A whole entry: header, data, padding.
    fn entry(self, name: &str, kind: u8, data: &[u8]) -> Self {
        let mut raw = self.header(name.as_bytes(), kind, data.len() as u64);
        raw.0.extend_from_slice(data);
        raw.0.resize(raw.0.len().next_multiple_of(512), 0);
        raw
    }

    /// Bytes with no regard to the declared sizes.
    fn bytes(mut self, data: &[u8]) -> Self {
        self.0.extend_from_slice(data);
        self
    }

    fn file(self, name: &str, data: &[u8]) -> Self {
        self.entry(name, b'0', data)
    }

    /// The stream with its end blocks.
    fn tar(mut self) -> Vec<u8> {
        self.0.extend_from_slice(&[0; 1024]);
        self.0
    }

    fn gz(self) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&self.tar()).unwrap();
        gz.finish().unwrap()
    }
}

/// The problem `archive` (gzip'ed) is refused for, checked to be found at once.
fn problem(archive: &[u8]) -> (usize, Problem) {
    let started = Instant::now();
    let err = verify(archive).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "{err}");
    match err {
        ArchiveError::Entry { index, problem, .. } => (index, problem),
        other => panic!("not an entry's problem: {other}"),
    }
}

#[test]
fn a_gnu_long_name_declaring_2_gib_is_refused_before_it_is_read() {
    let bomb = Raw::default()
        .header(b"././@LongLink", b'L', GIB2)
        .bytes(b"aaaa")
        .gz();
    let err = verify(&bomb).unwrap_err().to_string();
    assert_eq!(
        err,
        "entry 1 (path ././@LongLink): GNU long name of 2147483648 bytes; at most 4096"
    );
    let link = Raw::default()
        .header(b"././@LongLink", b'K', GIB2)
        .bytes(b"aaaa")
        .gz();
    assert_eq!(
        problem(&link),
        (
            1,
            Problem::LongLink {
                size: GIB2,
                max: 4096
            }
        )
    );
}

#[test]
fn pax_headers_declaring_2_gib_are_refused_before_they_are_read() {
    for kind in [b'x', b'g'] {
        let bomb = Raw::default()
            .file("ok.c", b"x")
            .header(b"PaxHeaders/a", kind, GIB2)
            .bytes(b"30 path=aaaa")
            .gz();
        let max = MAX_PAX_BYTES;
        assert_eq!(
            problem(&bomb),
            (2, Problem::PaxTooLarge { size: GIB2, max })
        );
    }
}

#[test]
fn more_than_100000_entries_are_refused() {
    let mut raw = Raw::default();
    for i in 0..MAX_ENTRIES {
        raw = raw.header(format!("d{i}/").as_bytes(), b'5', 0);
    }
    let started = Instant::now();
    let at_bound = Raw(raw.0.clone()).tar();
    let tree = read_tree(&at_bound, Compression::None).unwrap();
    assert_eq!(tree.len(), MAX_ENTRIES);
    let over = raw.header(b"one-more/", b'5', 0).tar();
    let err = read_tree(&over, Compression::None).unwrap_err();
    assert!(
        matches!(err, ArchiveError::TooManyEntries { max: 100_000 }),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn paths_deeper_than_64_or_longer_than_4096_are_refused() {
    let deep = |n: usize| vec!["a"; n].join("/");
    let ok = Raw::default()
        .entry("././@LongLink", b'L', format!("{}\0", deep(64)).as_bytes())
        .file("ignored", b"x")
        .gz();
    let tree = read_tree(&ok, Compression::Gzip).unwrap();
    assert_eq!(tree.keys().next().unwrap().len(), 64);
    let too_deep = Raw::default()
        .entry("././@LongLink", b'L', deep(65).as_bytes())
        .file("ignored", b"x")
        .gz();
    let max = MAX_PATH_DEPTH;
    assert_eq!(
        problem(&too_deep),
        (1, Problem::PathTooDeep { depth: 65, max })
    );

    let long = format!("{}/f", "d".repeat(4095));
    let too_long = Raw::default()
        .entry("PaxHeaders/f", b'x', record("path", &long).as_bytes())
        .file("ignored", b"x")
        .gz();
    let max = MAX_PATH_BYTES;
    assert_eq!(
        problem(&too_long),
        (1, Problem::PathTooLong { len: 4097, max })
    );
}

#[test]
fn a_file_declaring_more_than_the_total_is_refused_before_it_is_read() {
    let bomb = Raw::default()
        .file("a.c", b"x")
        .header(b"big", b'0', MAX_FILE_BYTES)
        .bytes(b"only a little")
        .gz();
    let total = MAX_FILE_BYTES + 1;
    let (index, found) = problem(&bomb);
    assert_eq!(index, 2);
    assert_eq!(
        found,
        Problem::FilesTooLarge {
            size: MAX_FILE_BYTES,
            total,
            max: MAX_FILE_BYTES
        }
    );
}

#[test]
fn links_devices_fifos_and_contiguous_files_are_refused() {
    let cases: [(u8, Problem); 6] = [
        (b'2', Problem::Symlink),
        (b'1', Problem::HardLink),
        (b'3', Problem::Kind("character device".into())),
        (b'4', Problem::Kind("block device".into())),
        (b'6', Problem::Kind("fifo".into())),
        (b'7', Problem::Kind("contiguous file (type `7`)".into())),
    ];
    for (kind, expected) in cases {
        let archive = Raw::default()
            .file("ok.c", b"x")
            .entry("it", kind, b"")
            .gz();
        assert_eq!(problem(&archive), (2, expected.clone()));
        // The same on the unpacking side.
        let dir = tempfile::tempdir().unwrap();
        let err = unpack(&archive, dir.path()).unwrap_err();
        assert!(err.to_string().ends_with(&expected.to_string()), "{err}");
    }
}

#[test]
fn dotdot_and_absolute_paths_are_refused_and_nothing_escapes() {
    for (path, expected) in [
        ("../evil", Problem::ParentDir),
        ("a/../../evil", Problem::ParentDir),
        ("/tmp/evil", Problem::Absolute),
    ] {
        let archive = Raw::default().file("ok.c", b"x").file(path, b"x").gz();
        assert_eq!(problem(&archive), (2, expected));
        let outer = tempfile::tempdir().unwrap();
        let dest = outer.path().join("d");
        std::fs::create_dir(&dest).unwrap();
        assert!(unpack(&archive, &dest).is_err());
        let names: Vec<_> = std::fs::read_dir(outer.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{path}");
    }
}

#[test]
fn a_stream_of_global_headers_stops_at_the_stream_bound() {
    // Each header alone is within its bound; together they would run for ever.
    let comment = record("comment", &"c".repeat(60_000));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let one = Raw::default().entry("pax_global_header", b'g', comment.as_bytes());
    let headers = MAX_STREAM_BYTES / one.0.len() as u64 + 1;
    for _ in 0..headers {
        gz.write_all(&one.0).unwrap();
    }
    let bomb = gz.finish().unwrap();
    let err = verify(&bomb).unwrap_err();
    assert!(matches!(err, ArchiveError::StreamTooLarge { .. }), "{err}");
}

#[test]
fn cut_short_dangling_and_disagreeing_archives_are_refused() {
    let cut = Raw::default().header(b"a.c", b'0', 10).bytes(b"abc").0;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&cut).unwrap();
    let err = verify(&gz.finish().unwrap()).unwrap_err();
    assert!(
        matches!(err, ArchiveError::Corrupt { index: 1, .. }),
        "{err}"
    );

    // A directory's data is read past, not kept: declared sizes there are the stream's to
    // bound.
    let dir = Raw::default().header(b"d/", b'5', GIB2).bytes(b"abc").gz();
    let started = Instant::now();
    let err = verify(&dir).unwrap_err();
    assert!(
        matches!(err, ArchiveError::Corrupt { index: 1, .. }),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));

    let dangling = Raw::default().entry("././@LongLink", b'L', b"x\0").gz();
    let (_, found) = problem(&dangling);
    assert!(matches!(found, Problem::DanglingExtension(_)), "{found}");

    let disagree = Raw::default()
        .entry("PaxHeaders/a", b'x', record("size", "5").as_bytes())
        .file("a.c", b"x")
        .gz();
    let header = 1;
    assert_eq!(
        problem(&disagree),
        (1, Problem::SizeMismatch { pax: 5, header })
    );

    let too_big = vec![0u8; MAX_COMPRESSED_BYTES + 1];
    let err = verify(&too_big).unwrap_err();
    assert!(
        matches!(err, ArchiveError::CompressedTooLarge { .. }),
        "{err}"
    );
    assert!(matches!(
        verify(b"not gzip").unwrap_err(),
        ArchiveError::Corrupt { .. }
    ));
}

#[test]
fn pax_paths_and_git_global_headers_are_read() {
    let long = format!("{}/deep.c", "d".repeat(150));
    let archive = Raw::default()
        .entry(
            "pax_global_header",
            b'g',
            record("comment", "abc123").as_bytes(),
        )
        .entry("PaxHeaders/x", b'x', record("path", &long).as_bytes())
        .file("truncated-name", b"int x;")
        .entry("./", b'5', b"")
        .tar();
    let tree = read_tree(&archive, Compression::None).unwrap();
    let path: Vec<String> = long.split('/').map(str::to_string).collect();
    assert_eq!(tree.len(), 1, "{tree:?}");
    assert_eq!(
        tree[&path],
        Node::File {
            data: b"int x;".to_vec(),
            exec: false
        }
    );
}

fn sample_tree() -> Tree {
    let mut tree = Tree::new();
    let long = vec!["x".repeat(120), "y.c".to_string()];
    tree.insert(vec![long[0].clone()], Node::Dir);
    tree.insert(
        long,
        Node::File {
            data: b"long".to_vec(),
            exec: false,
        },
    );
    tree.insert(
        vec!["run.sh".into()],
        Node::File {
            data: b"#!".to_vec(),
            exec: true,
        },
    );
    tree
}

#[test]
fn pack_is_deterministic_and_reads_back_and_unpacks() {
    let tree = sample_tree();
    let one = pack(&tree).unwrap();
    assert_eq!(one.sha256, pack(&tree).unwrap().sha256);
    assert_eq!(read_tree(&one.archive, Compression::Gzip).unwrap(), tree);
    let files = read_files(&one.archive, |path, _| path.ends_with(".sh")).unwrap();
    assert_eq!(files, [("run.sh".to_string(), b"#!".to_vec())]);

    let dir = tempfile::tempdir().unwrap();
    unpack(&one.archive, dir.path()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        let meta = std::fs::metadata(dir.path().join(p)).unwrap();
        meta.permissions().mode() & 0o7777
    };
    assert_eq!(mode("run.sh"), 0o755);
    let long = format!("{}/y.c", "x".repeat(120));
    assert_eq!(std::fs::read(dir.path().join(&long)).unwrap(), b"long");
    assert_eq!(mode(&long), 0o644);
}

#[test]
fn pack_refuses_what_the_reader_would() {
    let mut tree = Tree::new();
    tree.insert(vec!["a".to_string(); 65], Node::Dir);
    let err = pack(&tree).unwrap_err().to_string();
    assert!(err.contains("path of 65 components; at most 64"), "{err}");

    let mut tree = Tree::new();
    let big = vec![0u8; (MAX_FILE_BYTES / 2) as usize + 1];
    for name in ["a", "b"] {
        tree.insert(
            vec![name.to_string()],
            Node::File {
                data: big.clone(),
                exec: false,
            },
        );
    }
    let err = pack(&tree).unwrap_err().to_string();
    assert!(err.contains("entry 2 (path b): a file of"), "{err}");
}
