//! Hostile source uploads against a real coordinator process on Postgres: archives whose
//! extension headers declare gigabytes are refused (422, naming the problem) at once, without
//! the coordinator's memory growing; ordinary archives, including GNU tar's long names and pax
//! headers, are still stored, and a worker unpacks what the coordinator accepted.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{create_token, get_bytes, start_coordinator_with, TestDb};
use sha2::{Digest, Sha256};
use sweep_coordinator::snapshot::{pack, Node, Tree};

/// What the first header of a bomb declares.
const DECLARED: u64 = 2 << 30;

/// A gzip'ed tar whose first header is of type `kind`, declaring [`DECLARED`] bytes, and
/// followed by that many zero bytes: about 2 MB compressed, as in issue 46. Made in
/// milliseconds: one MiB of zeros is deflated once and its blocks repeated (each run of
/// sync-flushed blocks from a fresh encoder decodes the same after anything).
fn bomb(kind: tar::EntryType, name: &str) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_entry_type(kind);
    header.set_size(DECLARED);
    header.set_mode(0o644);
    header.set_cksum();
    let zeros = vec![0u8; 1 << 20];
    let runs = DECLARED / zeros.len() as u64;
    let mut crc = flate2::Crc::new();
    crc.update(header.as_bytes());
    let mut zeros_crc = flate2::Crc::new();
    zeros_crc.update(&zeros);
    // gzip header: deflate, no name, no time, unknown OS.
    let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    gz.extend(deflated(header.as_bytes()));
    let run = deflated(&zeros);
    for _ in 0..runs {
        gz.extend_from_slice(&run);
        crc.combine(&zeros_crc);
    }
    // An empty final block, then the trailer: CRC-32 and length mod 2^32.
    gz.extend([3, 0]);
    gz.extend(crc.sum().to_le_bytes());
    gz.extend(((512 + DECLARED) as u32).to_le_bytes());
    gz
}

/// `data` deflated into non-final blocks ending on a byte boundary.
fn deflated(data: &[u8]) -> Vec<u8> {
    let mut deflate = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    deflate.write_all(data).unwrap();
    deflate.flush().unwrap();
    deflate.get_ref().clone()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The peak resident set of process `pid` (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/PID/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// PUTs `body` as a source; the status, the JSON answer and how long it took.
async fn put(base: &str, token: &str, body: Vec<u8>) -> (u16, serde_json::Value, Duration) {
    let url = format!("{base}/api/v1/sources/{}", sha256_hex(&body));
    let started = Instant::now();
    let resp = reqwest::Client::new()
        .put(url)
        .bearer_auth(token)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let json = resp.json().await.unwrap_or(serde_json::Value::Null);
    (status, json, started.elapsed())
}

/// A directory with a path longer than a tar header holds (GNU long names, pax `path`).
fn long_path_tree(dir: &Path) -> String {
    let long = format!("{}/{}/deep.c", "d".repeat(90), "e".repeat(90));
    let file = dir.join(&long);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "int deep;").unwrap();
    std::fs::write(dir.join("main.c"), "int main;").unwrap();
    long
}

/// `tar -cz` of `dir` by the system's GNU tar in `format` (`gnu`: long names; `posix`: pax).
fn system_tar(dir: &Path, format: &str) -> Vec<u8> {
    let out = Command::new("tar")
        .arg(format!("--format={format}"))
        .args(["-cz", "-C"])
        .arg(dir)
        .arg(".")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bombs_are_refused_at_once_and_ordinary_archives_still_go_through() {
    let made = Instant::now();
    let long_name = bomb(tar::EntryType::GNULongName, "././@LongLink");
    let pax = bomb(tar::EntryType::XHeader, "PaxHeaders/evil");
    eprintln!(
        "bombs made in {:?}: {} and {} bytes",
        made.elapsed(),
        long_name.len(),
        pax.len()
    );
    assert!(long_name.len() < 4 << 20, "{}", long_name.len());
    // What the coordinator would read: the header, then zeros.
    let mut start = vec![0u8; 1024];
    let mut gunzip = flate2::read::GzDecoder::new(&long_name[..]);
    std::io::Read::read_exact(&mut gunzip, &mut start).unwrap();
    assert_eq!(&start[257..262], b"ustar");
    assert_eq!(start[156], b'L');
    assert!(start[512..].iter().all(|&b| b == 0));

    let db = TestDb::new().await;
    let (coordinator, base) = start_coordinator_with(&db.url, &[]);
    let token = create_token(&db.url, "submitter", "mallory");

    // An ordinary snapshot, and GNU tar's own archives with long paths, are stored; a worker
    // unpacks what was stored to the same files.
    let mut tree = Tree::new();
    let data = b"int main(){}".to_vec();
    tree.insert(vec!["a.c".into()], Node::File { data, exec: false });
    let (status, ack, _) = put(&base, &token, pack(&tree).unwrap().archive).await;
    assert_eq!(status, 201, "{ack}");
    let src = tempfile::tempdir().unwrap();
    let long = long_path_tree(src.path());
    for format in ["gnu", "posix"] {
        let archive = system_tar(src.path(), format);
        let sha = sha256_hex(&archive);
        let (status, ack, _) = put(&base, &token, archive).await;
        assert_eq!(status, 201, "{format}: {ack}");
        let stored = get_bytes(&format!("{base}/api/v1/sources/{sha}")).await;
        let cache = tempfile::tempdir().unwrap();
        let store = sweep_worker::source::SourceStore::new(cache.path());
        let dir = store.install(&sha, stored).await.unwrap();
        assert_eq!(std::fs::read(dir.join(&long)).unwrap(), b"int deep;");
        assert_eq!(std::fs::read(dir.join("main.c")).unwrap(), b"int main;");
    }

    let pid = coordinator.0.id();
    let before = peak_rss_kib(pid);
    let expected = [
        (long_name, "GNU long name of 2147483648 bytes; at most 4096"),
        (pax, "pax header of 2147483648 bytes; at most 65536"),
    ];
    for (body, problem) in expected {
        let (status, answer, took) = put(&base, &token, body).await;
        eprintln!("refused in {took:?}: {answer}");
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["error"]["field"], "body", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("entry 1 (path "), "{message}");
        assert!(message.contains(problem), "{message}");
        assert!(took < Duration::from_millis(500), "{took:?}");
    }
    let after = peak_rss_kib(pid);
    eprintln!("coordinator peak RSS: {before} KiB before the bombs, {after} KiB after");
    assert!(after - before < 64 * 1024, "{before} KiB -> {after} KiB");
}
