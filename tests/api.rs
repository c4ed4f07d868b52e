//! The coordinator's HTTP API against a real Postgres: validation and the lease protocol.
//! Workers here are plain HTTP clients of the protocol, so each lease transition can be forced
//! at an exact moment; the end-to-end test drives real worker processes.

mod common;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use common::protocol::{lease, post_as, post_json, register};
use common::sweeps::{small_sweep_json, SMALL_SWEEP as GOOD};
use common::{coordinator_config, InProcess, TestDb};

/// A coordinator on a fresh database, with leases of `lease` and a one-second heartbeat.
async fn server(lease: Duration) -> InProcess<TestDb> {
    let db = TestDb::new().await;
    let mut config = coordinator_config(&db.url);
    config.leases.lease = lease;
    config.leases.heartbeat = Duration::from_secs(1);
    InProcess::start_with_tokens(config, db).await
}

/// Submits [`GOOD`]; returns the new sweep's id and the whole answer.
async fn submit_good(base: &str) -> (i64, Value) {
    let (status, v) = post_as(&format!("{base}/api/v1/sweeps"), "application/toml", GOOD).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    (v["id"].as_i64().unwrap(), v)
}

#[tokio::test]
async fn every_bad_field_is_a_4xx_naming_it() {
    let s = server(Duration::from_secs(30)).await;
    let url = format!("{}/api/v1/sweeps", s.base);
    // (what GOOD says, what the bad config says instead, the field named, words of the message).
    let edits = [
        // Not `stockfish`: configs/engines registers that one.
        (r#""minnow""#, r#""crafty""#, "engine", "unknown engine"),
        (
            r#"knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS""#,
            r#"knob = "CC""#,
            "knob",
            "not a declared knob",
        ),
        ("[300]", "[300, 99999]", "values[1]", "out of range"),
        (
            r#"["bk"]"#,
            r#"["bk", "nope"]"#,
            "suites[1]",
            "unknown suite",
        ),
        ("depth = 1", "depth = 0", "depth", "out of range"),
        ("depth = 1", "depth = 100000", "depth", "out of range"),
        (
            "depth = 1",
            "depth = 1\ncolour = \"red\"",
            "colour",
            "unknown field",
        ),
        (
            "chunk_size = 24",
            "chunk_size = 24\n[baseline]\ndefines = { \"RM -RF\" = 1 }",
            "baseline.defines.RM -RF",
            "not a declared knob",
        ),
    ];
    let cases = edits
        .map(|(from, to, field, words)| {
            assert!(GOOD.contains(from), "{from:?} is not in GOOD");
            (GOOD.replace(from, to), field, words)
        })
        .into_iter()
        .chain([(format!("{GOOD}\n[[[broken"), "body", "")]);
    for (body, field, words) in cases {
        let (status, v) = post_as(&url, "application/toml", body.clone()).await;
        assert!(status.is_client_error(), "{status} for {body}: {v}");
        assert_eq!(v["error"]["field"], field, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(words),
            "{v}"
        );
    }
    // JSON: malformed, and an unknown field.
    let (status, v) = post_as(&url, "application/json", "{\"name\": ").await;
    assert!(status.is_client_error());
    assert_eq!(v["error"]["field"], "name", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("EOF"),
        "{v}"
    );
    let mut good: Value = small_sweep_json();
    good["depht"] = json!(3);
    let (status, v) = post_json(&url, &good).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(v["error"]["field"], "depht");
    // Negative and overflowing numbers.
    good.as_object_mut().unwrap().remove("depht");
    good["depth"] = json!(-3);
    let (_, v) = post_json(&url, &good).await;
    assert_eq!(v["error"]["field"], "depth");
    good["depth"] = json!(1e40);
    let (status, v) = post_json(&url, &good).await;
    assert!(status.is_client_error());
    assert_eq!(v["error"]["field"], "depth");
    // Invalid UTF-8 and a body over the limit.
    let (status, v) = post_as(&url, "application/toml", vec![0xff, 0xfe, b'x']).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let (status, _) = post_as(&url, "application/toml", vec![b'#'; 5 * 1024 * 1024]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Deeply nested JSON is refused at the first level that does not fit the schema (and
    // serde_json's recursion limit backs that up), never by a stack overflow.
    for nested in [
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!(
            "{{\"description\": {}{}}}",
            "{\"a\":".repeat(50_000),
            "}".repeat(50_000)
        ),
    ] {
        let (status, v) = post_as(&url, "application/json", nested).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("invalid type"),
            "{v}"
        );
    }
    assert_eq!(
        common::get_json(&format!("{}/healthz", s.base)).await["status"],
        "ok"
    );
    // A million knob values hit the per-sweep limit (the body itself is under the size limit).
    good["depth"] = json!(3);
    good["values"] = json!(vec![0; 1_000_000]);
    let (status, v) = post_json(&url, &good).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "values");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("at most"),
        "{v}"
    );
    // Shell metacharacters never reach a worker: values are integers, names are declared knobs.
    good["values"] = json!(["300; rm -rf /"]);
    let (status, v) = post_json(&url, &good).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "values[0]");
    good["values"] = json!([300]);
    good["knob"] = json!("X=1 $(reboot)");
    let (_, v) = post_json(&url, &good).await;
    assert_eq!(v["error"]["field"], "knob");
    // Overflowing integers in the worker protocol are refused too.
    let (status, v) = post_json(
        &format!("{}/api/v1/workers", s.base),
        &json!({"name": "w", "host": "h", "cores": 1e30}),
    )
    .await;
    assert!(status.is_client_error(), "{v}");
    assert_eq!(v["error"]["field"], "cores");
    let (status, v) = post_json(
        &format!("{}/api/v1/workers", s.base),
        &json!({"name": "w", "host": "h", "cores": -1}),
    )
    .await;
    assert!(status.is_client_error(), "{v}");
    // The binary-only engines a worker reports are bounded and named.
    let (status, v) = post_json(
        &format!("{}/api/v1/workers", s.base),
        &json!({"name": "w", "host": "h", "cores": 1, "engines": ["stockfish", ""]}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "engines[1]", "{v}");
    let many: Vec<String> = (0..300).map(|i| format!("e{i}")).collect();
    let (status, v) = post_json(
        &format!("{}/api/v1/workers", s.base),
        &json!({"name": "w", "host": "h", "cores": 1, "engines": many}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "engines", "{v}");

    // Nothing was written by any of it.
    let list = common::get_json(&format!("{}/api/v1/sweeps", s.base)).await;
    assert_eq!(list["sweeps"].as_array().unwrap().len(), 0, "{list}");
    // Unknown ids and formats.
    let resp = common::get(&format!("{}/api/v1/sweeps/999", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "not_found"
    );
    let (status, v) = post_as(&url, "application/toml", GOOD).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let resp = common::get(&format!(
        "{}/api/v1/sweeps/{}/table?format=xml",
        s.base, v["id"]
    ))
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["field"],
        "format"
    );
}

fn result_for(pos: &Value, nodes: u64) -> Value {
    json!({"index": pos["index"], "nodes": nodes, "bestmove": pos["bm"][0], "solved": true,
           "score_cp": 10, "score_mate": null, "depth": 1, "time_ms": 1, "error": null})
}

#[tokio::test]
async fn an_expired_lease_moves_the_job_and_fences_the_old_holder() {
    let s = server(Duration::from_secs(1)).await;
    let (sweep, v) = submit_good(&s.base).await;
    // Two work jobs (two builds, one chunk), then 3 cross-checks per build.
    assert_eq!(v["jobs"], 2 + 6);

    let a = register(&s.base, "a").await;
    let b = register(&s.base, "b").await;
    let jobs = lease(&s.base, a).await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    let job_id = job["job_id"].as_i64().unwrap();
    let first_lease = job["attempt"].as_i64().unwrap();
    let positions = job["positions"].as_array().unwrap();
    assert_eq!(positions.len(), 24);
    // A reports one position, then goes silent past its lease.
    let results_url = |w: i64| format!("{}/api/v1/workers/{w}/results", s.base);
    let report = |attempt: i64, results: Vec<Value>, finished: bool| json!({"reports": [{"job_id": job_id, "attempt": attempt, "results": results, "finished": finished}]});
    let first = report(first_lease, vec![result_for(&positions[0], 111)], false);
    let (status, ack) = post_json(&results_url(a), &first).await;
    assert_eq!(status, StatusCode::OK, "{ack}");
    assert_eq!(ack["jobs"][0]["job_id"], job_id);
    assert_eq!(ack["jobs"][0]["status"], "held");
    assert_eq!(ack["jobs"][0]["accepted"], 1);
    // A duplicate report is accepted and ignored.
    let (_, ack) = post_json(&results_url(a), &first).await;
    assert_eq!(
        (
            ack["jobs"][0]["accepted"].as_u64(),
            ack["jobs"][0]["duplicates"].as_u64()
        ),
        (Some(0), Some(1))
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // B gets the same job, under a new lease, without the position A finished.
    let jobs = lease(&s.base, b).await;
    let again = jobs
        .iter()
        .find(|j| j["job_id"] == job_id)
        .expect("the expired job is leased again");
    let second_lease = again["attempt"].as_i64().unwrap();
    assert!(second_lease > first_lease, "{again}");
    let rest = again["positions"].as_array().unwrap();
    assert_eq!(rest.len(), 23);
    assert!(rest.iter().all(|p| p["index"] != positions[0]["index"]));

    // A's late report and heartbeat are refused (status lost, nothing stored); B's are taken.
    let late = report(first_lease, vec![result_for(&positions[1], 999)], false);
    let (status, v) = post_json(&results_url(a), &late).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["jobs"][0]["status"], "lost", "{v}");
    assert_eq!(v["jobs"][0]["accepted"], 0, "{v}");
    let beat_url = |w: i64| format!("{}/api/v1/workers/{w}/heartbeat", s.base);
    let (status, v) = post_json(
        &beat_url(a),
        &json!({"leases": [{"job_id": job_id, "attempt": first_lease}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["jobs"], json!([{"job_id": job_id, "status": "lost"}]));
    let (status, v) = post_json(
        &beat_url(b),
        &json!({"leases": [{"job_id": job_id, "attempt": second_lease}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["jobs"], json!([{"job_id": job_id, "status": "held"}]));
    // One call carries several jobs; a lost lease for one does not fail the others. B now
    // holds both jobs: a stale report on one beside a good one on the other.
    let other = lease(&s.base, b).await.remove(0);
    let other_id = other["job_id"].as_i64().unwrap();
    let mixed = json!({"reports": [
        {"job_id": job_id, "attempt": first_lease, "results": [result_for(&positions[2], 999)], "finished": false},
        {"job_id": other_id, "attempt": other["attempt"],
         "results": [result_for(&other["positions"][0], 333)], "finished": false},
    ]});
    let (status, v) = post_json(&results_url(b), &mixed).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["jobs"][0]["status"], "lost", "{v}");
    assert_eq!(v["jobs"][1]["job_id"], other_id, "{v}");
    assert_eq!(v["jobs"][1]["status"], "held", "{v}");
    assert_eq!(v["jobs"][1]["accepted"], 1, "{v}");
    let all: Vec<Value> = rest.iter().map(|p| result_for(p, 222)).collect();
    let (status, ack) = post_json(&results_url(b), &report(second_lease, all, true)).await;
    assert_eq!(status, StatusCode::OK, "{ack}");
    assert_eq!(ack["jobs"][0]["status"], "held");
    assert_eq!(ack["jobs"][0]["accepted"], 23);

    // A result for a position outside the job is a 4xx for the call, not a silent drop
    // (asked of the job B still holds, so the lease check passes and validation decides).
    let bad = json!({"reports": [{"job_id": other_id, "attempt": other["attempt"],
        "results": [{"index": 5000, "nodes": 1, "bestmove": "e2e4", "solved": false,
                     "score_cp": null, "score_mate": null, "depth": 1, "time_ms": 1,
                     "error": null}], "finished": false}]});
    let (status, v) = post_json(&results_url(b), &bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("5000"),
        "{v}"
    );
    // Unknown workers are 404; too many jobs in one call are refused.
    let (status, v) = post_json(&beat_url(a + b + 1000), &json!({"leases": []})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    let (status, v) = post_json(&results_url(a + b + 1000), &json!({"reports": []})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"job_id": i + 1, "attempt": 1}))
        .collect();
    let (status, v) = post_json(&beat_url(b), &json!({"leases": many})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "leases");

    // Exactly one result per position; A's first result survived, its late one did not.
    let db = sqlx::PgPool::connect(&s.db.url).await.unwrap();
    let rows: Vec<(i32, i64, i64)> = sqlx::query_as(
        "SELECT position_index, count(*), max(nodes) FROM results r JOIN jobs j ON j.id = r.job_id
         WHERE j.id = $1 GROUP BY position_index ORDER BY position_index",
    )
    .bind(job_id)
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(rows.len(), 24);
    assert!(rows.iter().all(|(_, n, _)| *n == 1));
    // Neither of A's late results (positions 1 and 2) was stored.
    assert_eq!(rows[0].2, 111);
    assert!(rows[1..].iter().all(|(_, _, nodes)| *nodes == 222));
    db.close().await;

    let detail = common::get_json(&format!("{}/api/v1/sweeps/{sweep}", s.base)).await;
    assert_eq!(detail["state"], "running", "{detail}");
    assert_eq!(detail["positions_done"], 25);
}

#[tokio::test]
async fn cancel_tells_workers_and_health_answers() {
    let s = server(Duration::from_secs(30)).await;
    let health = common::get_json(&format!("{}/healthz", s.base)).await;
    assert_eq!(health["status"], "ok");
    let (_, v) = post_as(
        &format!("{}/api/v1/sweeps", s.base),
        "application/toml",
        GOOD,
    )
    .await;
    let sweep = v["id"].as_i64().unwrap();
    let w = register(&s.base, "w").await;
    let job = lease(&s.base, w).await.remove(0);
    let (status, _) = post_json(
        &format!("{}/api/v1/sweeps/{sweep}/cancel", s.base),
        &json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, ack) = post_json(
        &format!("{}/api/v1/workers/{w}/heartbeat", s.base),
        &json!({"leases": [{"job_id": job["job_id"], "attempt": job["attempt"]}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{ack}");
    assert_eq!(ack["jobs"][0]["status"], "cancelled", "{ack}");
    // Results sent after the cancel say so too.
    let (status, ack) = post_json(
        &format!("{}/api/v1/workers/{w}/results", s.base),
        &json!({"reports": [{"job_id": job["job_id"], "attempt": job["attempt"],
                             "results": [], "finished": false}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{ack}");
    assert_eq!(ack["jobs"][0]["status"], "cancelled", "{ack}");
    assert!(lease(&s.base, w).await.is_empty());
    let d = common::get_json(&format!("{}/api/v1/sweeps/{sweep}", s.base)).await;
    assert_eq!(d["state"], "cancelled");
}

/// One bad result of an upload (a NUL byte in its best move, a node count past what can be
/// stored) is refused by name and counted as a failed try of its position; the rest of the
/// upload is kept, and the answer is not an error the worker would retry.
#[tokio::test]
async fn a_bad_result_is_named_and_the_rest_of_the_upload_kept() {
    let s = server(Duration::from_secs(30)).await;
    let (sweep, _) = submit_good(&s.base).await;
    let w = register(&s.base, "w").await;
    let job = lease(&s.base, w).await.remove(0);
    let positions = job["positions"].as_array().unwrap();
    let good = result_for(&positions[0], 1234);
    let mut nul = result_for(&positions[1], 99);
    nul["bestmove"] = json!("e2e4\u{0}");
    let mut huge = result_for(&positions[2], 1);
    huge["nodes"] = json!(u64::MAX);
    let (status, ack) = post_json(
        &format!("{}/api/v1/workers/{w}/results", s.base),
        &json!({"reports": [{"job_id": job["job_id"], "attempt": job["attempt"],
                             "results": [good, nul, huge], "finished": false}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{ack}");
    let job_ack = &ack["jobs"][0];
    assert_eq!(job_ack["status"], "held", "{ack}");
    assert_eq!(
        job_ack["accepted"], 3,
        "the good result and two failed tries: {ack}"
    );
    let rejected = job_ack["rejected"].as_array().unwrap();
    let fields: Vec<&str> = rejected
        .iter()
        .map(|r| r["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "reports[0].results[1].bestmove",
            "reports[0].results[2].nodes"
        ],
        "{ack}"
    );
    assert_eq!(rejected[0]["index"], positions[1]["index"], "{ack}");
    // The good result is stored; the bad ones are not figures anywhere.
    let d = common::get_json(&format!("{}/api/v1/sweeps/{sweep}", s.base)).await;
    assert_eq!(d["positions_done"], 1, "{d}");
    let table = common::get_json(&format!("{}/api/v1/sweeps/{sweep}/table", s.base)).await;
    let text = table.to_string();
    assert!(!text.contains("18446744073709551615"), "{text}");
}

/// `GET /api/v1/workers`: the workers page's data, for readers; a bad limit is a 422 naming
/// it, and a worker token may not list the fleet.
#[tokio::test]
async fn workers_are_listed_with_the_jobs_they_hold() {
    let s = server(Duration::from_secs(30)).await;
    submit_good(&s.base).await;
    let holder = register(&s.base, "holder").await;
    let idle = register(&s.base, "idle").await;
    assert_eq!(lease(&s.base, holder).await.len(), 1);

    let list = common::get_json(&format!("{}/api/v1/workers", s.base)).await;
    assert_eq!(list["seen_within_secs"], 86400, "{list}");
    assert_eq!(list["limit"], 200, "{list}");
    let workers = list["workers"].as_array().unwrap();
    let find = |id: i64| {
        workers
            .iter()
            .find(|w| w["id"] == id)
            .unwrap_or_else(|| panic!("worker {id} not listed: {list}"))
    };
    assert_eq!(find(holder)["jobs"], 1, "{list}");
    assert_eq!(find(holder)["name"], "holder", "{list}");
    assert_eq!(find(holder)["host"], "test", "{list}");
    assert_eq!(find(idle)["jobs"], 0, "{list}");
    assert_eq!(find(idle)["results_last_minute"], 0, "{list}");

    let one = common::get_json(&format!("{}/api/v1/workers?limit=1", s.base)).await;
    assert_eq!(one["workers"].as_array().unwrap().len(), 1, "{one}");
    for bad in ["0", "1001", "many"] {
        let resp = common::get(&format!("{}/api/v1/workers?limit={bad}", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "limit={bad}"
        );
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["field"], "limit", "{body}");
    }
    let worker_token = common::tokens_for(&s.base).unwrap().worker;
    let resp = reqwest::Client::new()
        .get(format!("{}/api/v1/workers", s.base))
        .bearer_auth(worker_token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
}

/// The dashboard's files are in the binary, each with its content type, and the page loads
/// every script it names.
#[tokio::test]
async fn dashboard_files_are_served_with_their_content_types() {
    let s = server(Duration::from_secs(30)).await;
    let page = reqwest::get(format!("{}/", s.base)).await.unwrap();
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let html = page.text().await.unwrap();
    for (path, content_type) in [
        ("app.css", "text/css; charset=utf-8"),
        ("app.js", "text/javascript; charset=utf-8"),
        ("plot.js", "text/javascript; charset=utf-8"),
        ("sweep.js", "text/javascript; charset=utf-8"),
    ] {
        assert!(
            html.contains(&format!("\"{path}\"")),
            "index.html names {path}"
        );
        let resp = reqwest::get(format!("{}/{path}", s.base)).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_eq!(resp.headers()["content-type"], content_type, "{path}");
        assert!(!resp.text().await.unwrap().is_empty(), "{path}");
    }
}

/// An unknown positions view is a 422 naming `view`; the known ones answer.
#[tokio::test]
async fn positions_views_are_checked() {
    let s = server(Duration::from_secs(30)).await;
    let (id, _) = submit_good(&s.base).await;
    let url = |view: &str| format!("{}/api/v1/sweeps/{id}/positions?view={view}", s.base);
    let resp = common::get(&url("biggest")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["field"], "view", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("node_change"),
        "{body}"
    );
    for view in ["all", "flips", "node_change"] {
        let report = common::get_json(&url(view)).await;
        assert_eq!(report["total"], 0, "{view}: {report}");
    }
}
