//! Uploaded and git sources, end to end: a coordinator process on Postgres, real worker
//! processes, the CLI's `submit --source DIR`, and git repositories made by the test.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::direct::direct_totals_from;
use common::sweeps::declare_knob;
use common::sweeps::OWN_SOURCE_SWEEP;
use common::{
    assert_table_matches, cli, copy_minnow, create_token, get_bytes, get_json, get_text, post_toml,
    start_coordinator, start_coordinator_with, start_two_workers, wait_final, TestDb,
};

/// Replaces `from` by `to` in `file` (which must contain it).
fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", file.display());
    std::fs::write(file, text.replace(from, to)).unwrap();
}

/// Makes the minnow source in `dir` reduce null moves less (R base 2 instead of 3).
fn reduce_null_moves_less(dir: &Path) {
    edit(
        &dir.join("minnow.h"),
        "#define NULLMOVE_R_BASE 3",
        "#define NULLMOVE_R_BASE 2",
    );
}

/// The id of the sweep a submission created (or found).
async fn id_of(resp: reqwest::Response) -> i64 {
    let body: serde_json::Value = resp.json().await.unwrap();
    body["id"].as_i64().unwrap()
}

/// Asserts a submission was refused (422) naming `field`.
async fn assert_refused_naming(resp: reqwest::Response, field: &str) {
    assert_eq!(resp.status().as_u16(), 422);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["field"], field, "{body}");
}

/// The sweep each test submits with a source of its own.
const SWEEP: &str = OWN_SOURCE_SWEEP;

fn submit_as(base: &str, token: &str, config: &Path, source: &Path) -> (i32, String, String) {
    cli(&[
        "submit",
        config.to_str().unwrap(),
        "--source",
        source.to_str().unwrap(),
        "--coordinator",
        base,
        "--token",
        token,
    ])
}

/// (build, suite) -> (nodes, solved) of a direct run of `config` built from `source`.
async fn direct(config: &Path, source: &Path) -> BTreeMap<(String, String), (u64, u64)> {
    direct_totals_from(config, source)
        .await
        .into_iter()
        .map(|((build, _, suite), v)| ((build, suite), v))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_submitters_sweep_their_own_versions_and_uploads_are_checked() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let alice = create_token(&db.url, "submitter", "alice");
    let bob = create_token(&db.url, "submitter", "bob");
    let reader = create_token(&db.url, "reader", "rita");
    let _workers = start_two_workers(&base, &[]);

    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("sweep.toml");
    std::fs::write(&config, SWEEP).unwrap();
    // Alice's copy is the bundled engine, with a symlink that stays inside the tree and
    // files her .gitignore and the dotfile rule leave out; Bob's reduces null moves less.
    let a = tmp.path().join("alice");
    copy_minnow(&a);
    std::os::unix::fs::symlink("minnow.h", a.join("alias.h")).unwrap();
    std::fs::write(a.join(".gitignore"), "*.o\nscratch/\n").unwrap();
    std::fs::write(a.join("junk.o"), "object").unwrap();
    std::fs::create_dir(a.join("scratch")).unwrap();
    std::fs::write(a.join(".env"), "SECRET=1").unwrap();
    let b = tmp.path().join("bob");
    copy_minnow(&b);
    reduce_null_moves_less(&b);

    let (code, out_a, err) = submit_as(&base, &alice, &config, &a);
    assert_eq!(code, 0, "alice: {err}");
    assert!(err.contains("uploaded"), "{err}");
    let (code, out_b, err) = submit_as(&base, &bob, &config, &b);
    assert_eq!(code, 0, "bob: {err}");
    let ids: Vec<i64> = [out_a, out_b]
        .iter()
        .map(|o| o.trim().parse().unwrap())
        .collect();
    assert_ne!(ids[0], ids[1], "different sources are different sweeps");

    let expected_a = direct(&config, &a).await;
    let expected_b = direct(&config, &b).await;
    assert_ne!(
        expected_a, expected_b,
        "the two versions must search differently for this test to mean anything"
    );
    let mut shas = Vec::new();
    for (id, expected, who) in [(ids[0], &expected_a, "alice"), (ids[1], &expected_b, "bob")] {
        let detail = wait_final(&base, id, Duration::from_secs(600)).await;
        assert_eq!(detail["state"], "done", "{detail}");
        let source = &detail["source"];
        assert_eq!(source["kind"], "uploaded", "{detail}");
        assert_eq!(source["uploader"], who, "{detail}");
        assert_eq!(source["sha256"], detail["source_sha256"]);
        shas.push(source["sha256"].as_str().unwrap().to_string());
        let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
        assert_table_matches(&table, expected);
        let md = get_text(&format!("{base}/api/v1/sweeps/{id}/table?format=md")).await;
        let short = &shas.last().unwrap()[..12];
        // Under the heading naming the sweep (with its date and Sweep's version), the source
        // it was built from and the suite versions it ran.
        let (heading, rest) = md.split_once("\n\n").unwrap();
        assert!(
            heading.starts_with(&format!("## sweep {id}: own change (minnow), submitted 20")),
            "{md}"
        );
        assert!(
            heading.ends_with(&format!(" UTC, Sweep {}", env!("CARGO_PKG_VERSION"))),
            "{md}"
        );
        assert!(
            rest.starts_with(&format!(
                "source {short} (uploaded by {who}); suites ecm_hard_quick "
            )),
            "{md}"
        );
    }

    // The snapshot held neither the ignored files nor the dotfile, and the link as a file.
    let archive = get_bytes(&format!("{base}/api/v1/sources/{}", shas[0])).await;
    let names = tar_names(&archive);
    assert!(names.contains(&"alias.h".to_string()), "{names:?}");
    for left_out in ["junk.o", "scratch", ".env", ".gitignore"] {
        assert!(
            !names.contains(&left_out.to_string()),
            "{left_out}: {names:?}"
        );
    }

    let http = reqwest::Client::new();
    let url = |sha: &str| format!("{base}/api/v1/sources/{sha}");
    // HEAD: 200 for a stored source, 404 for an unknown one.
    let head = |sha: String| {
        let req = http.head(url(&sha)).bearer_auth(&alice);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(head(shas[0].clone()).await, 200);
    assert_eq!(head("0".repeat(64)).await, 404);
    // A body whose sha256 is not the path's is refused.
    let resp = http
        .put(url(&"0".repeat(64)))
        .bearer_auth(&alice)
        .body(archive.clone())
        .send()
        .await
        .unwrap();
    assert_refused_naming(resp, "sha256").await;
    // A reader may not upload.
    let resp = http
        .put(url(&shas[0]))
        .bearer_auth(&reader)
        .body(archive.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    // Something that is not a gzip'ed tar is refused, naming the body.
    let junk = b"not a tarball".to_vec();
    let junk_sha = sha256_hex(&junk);
    let resp = http
        .put(url(&junk_sha))
        .bearer_auth(&alice)
        .body(junk)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    // A sweep naming a source nobody uploaded is refused naming source.sha256.
    let resp = post_toml(
        &format!("{base}/api/v1/sweeps"),
        format!("{SWEEP}\n[source]\nsha256 = \"{}\"\n", "1".repeat(64)),
    )
    .await;
    assert_refused_naming(resp, "source.sha256").await;

    // A symlink leading out of the tree stops the submission, naming the link.
    std::os::unix::fs::symlink("/etc/passwd", b.join("evil")).unwrap();
    let (code, _, err) = submit_as(&base, &bob, &config, &b);
    assert_ne!(code, 0);
    assert!(
        err.contains("evil is a symlink to /etc/passwd, outside the source tree"),
        "{err}"
    );
}

/// The issue's "done when": a knob that exists only in the author's working copy (the
/// coordinator's registered minnow has never heard of it) is swept with one command, with no
/// edit or restart on the coordinator's side, and the table holds the numbers of direct builds
/// of that copy with each value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knob_only_in_the_authors_copy_is_swept_with_one_command() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let alice = create_token(&db.url, "submitter", "alice");
    let _workers = start_two_workers(&base, &[]);

    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("alice");
    copy_minnow(&copy);
    // Her new knob takes over the null-move base reduction (3 is the bundled value).
    edit(
        &copy.join("minnow.h"),
        "#ifndef NULLMOVE_R_BASE\n",
        "#ifndef ALICE_R_BASE\n#define ALICE_R_BASE 3\n#endif\n#define NULLMOVE_R_BASE ALICE_R_BASE\n#ifndef NULLMOVE_R_BASE\n",
    );
    let config = tmp.path().join("alice.toml");
    const SWEEP_OF_HER_KNOB: &str = r#"
name = "alice's new knob"
engine = "minnow"
knob = "ALICE_R_BASE"
values = [2, 4]
suites = ["ecm_hard_quick"]
depth = 5
chunk_size = 30
"#;
    let declared = format!("{SWEEP_OF_HER_KNOB}\n{}", declare_knob("ALICE_R_BASE"));
    std::fs::write(&config, declared).unwrap();

    let (code, out, err) = submit_as(&base, &alice, &config, &copy);
    assert_eq!(code, 0, "{err}");
    let id: i64 = out.trim().parse().unwrap();
    let expected = direct(&config, &copy).await;
    let builds: std::collections::BTreeSet<&str> =
        expected.keys().map(|(b, _)| b.as_str()).collect();
    assert_eq!(
        builds.into_iter().collect::<Vec<_>>(),
        ["ALICE_R_BASE=2", "ALICE_R_BASE=4", "head_reference"]
    );
    let nodes = |build: &str| expected[&(build.to_string(), "ecm_hard_quick".to_string())].0;
    assert_ne!(
        nodes("ALICE_R_BASE=2"),
        nodes("ALICE_R_BASE=4"),
        "the knob must change the search for this test to mean anything"
    );
    let detail = wait_final(&base, id, Duration::from_secs(600)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    assert_eq!(detail["source"]["uploader"], "alice", "{detail}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    assert_table_matches(&table, &expected);

    // The registered source does not define it: the same config without --source is
    // refused, naming the knob.
    let (code, _, err) = cli(&[
        "submit",
        config.to_str().unwrap(),
        "--coordinator",
        &base,
        "--token",
        &alice,
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("knobs[0].name") && err.contains("ALICE_R_BASE"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_source_keeps_the_commit_it_was_submitted_at() {
    let db = TestDb::new().await;
    let tmp = tempfile::tempdir().unwrap();
    // Git sources are off unless listed: this coordinator may fetch the test's repositories.
    let allow = format!("file://{}/", tmp.path().display());
    let (_coordinator, base) =
        start_coordinator_with(&db.url, &["--lease-secs", "30", "--git-allow", &allow]);
    let repo_dir = tmp.path().join("minnow-repo");
    copy_minnow(&repo_dir);
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(&repo_dir)
            .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    git(&["init", "--quiet", "--initial-branch=main"]);
    git(&["add", "-A"]);
    git(&["commit", "--quiet", "-m", "one"]);
    let first = git(&["rev-parse", "HEAD"]);

    let sweeps_url = format!("{base}/api/v1/sweeps");
    let submit = |rev: &str| {
        let body = format!(
            "{SWEEP}\n[source]\ngit = \"{}\"\nrev = \"{rev}\"\n",
            repo_dir.display()
        );
        let url = sweeps_url.clone();
        async move { post_toml(&url, body).await }
    };
    let resp = submit("main").await;
    assert_eq!(resp.status().as_u16(), 201);
    let id = id_of(resp).await;

    // The branch moves after submission.
    reduce_null_moves_less(&repo_dir);
    git(&["commit", "--quiet", "-am", "two"]);
    let second = git(&["rev-parse", "HEAD"]);

    let detail = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
    let source = &detail["source"];
    assert_eq!(source["kind"], "git", "{detail}");
    assert_eq!(source["git_commit"], first.as_str(), "{detail}");
    assert_eq!(source["git_rev"], "main");
    assert_eq!(source["git_url"], repo_dir.display().to_string());
    let sha = source["sha256"].as_str().unwrap().to_string();
    let archive = get_bytes(&format!("{base}/api/v1/sources/{sha}")).await;
    let header = tar_file(&archive, "minnow.h");
    assert!(header.contains("#define NULLMOVE_R_BASE 3"), "{header}");

    // A new submission resolves the branch anew: the new commit, another snapshot.
    let resp = submit("main").await;
    assert_eq!(resp.status().as_u16(), 201);
    let id2 = id_of(resp).await;
    let detail2 = get_json(&format!("{base}/api/v1/sweeps/{id2}")).await;
    assert_eq!(detail2["source"]["git_commit"], second.as_str());
    assert_ne!(detail2["source"]["sha256"].as_str().unwrap(), sha);
    // The same commit by sha gives the same snapshot (the archive is deterministic).
    let resp = submit(&first).await;
    let id3 = id_of(resp).await;
    assert_eq!(
        id3, id,
        "same spec, same source, still queued: the same sweep"
    );

    // An unknown revision and an option-looking URL are refused, naming the field.
    let resp = submit("no-such-branch").await;
    assert_refused_naming(resp, "source.rev").await;
    let resp = post_toml(
        &format!("{base}/api/v1/sweeps"),
        format!("{SWEEP}\n[source]\ngit = \"--upload-pack=touch /tmp/x\"\n"),
    )
    .await;
    assert_refused_naming(resp, "source.git").await;
}

fn sha256_hex(bytes: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// Unpacks a tar.gz with the system's tar into a fresh directory.
fn unpack(archive: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.tar.gz");
    std::fs::write(&file, archive).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&file)
        .arg("-C")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    (dir, out)
}

fn tar_names(archive: &[u8]) -> Vec<String> {
    let (_dir, out) = unpack(archive);
    std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn tar_file(archive: &[u8], name: &str) -> String {
    let (_dir, out) = unpack(archive);
    std::fs::read_to_string(out.join(name)).unwrap()
}
