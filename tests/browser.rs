//! The dashboard in a real browser: headless Chromium (Debian's `chromium`) driven over
//! WebDriver by Debian's `chromedriver` (package `chromium-driver`), against a real coordinator
//! process on a fresh Postgres database and a real worker, with a finished sweep (the bundled
//! engine, three knob values), a sweep with a build that never compiles (the fake `flaky`
//! engine of tests/fixtures) and a running one. Screenshots go to `target/screenshots/` for
//! people to look at.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use common::{get_json, repo, start_coordinator_with, start_worker_with, tokens_for, wait_final};
use common::{Proc, TestDb};

/// The finished sweep: the bundled engine's null-move minimum depth (default 2) on two suites.
const KNOB: &str = "NULLMOVE_MIN_DEPTH";
const VALUES: [i64; 4] = [1, 3, 4, 6];
const SUITES: [&str; 2] = ["ecm_confident_quick", "ecm_hard_quick"];

/// Chromium and chromedriver: `SWEEP_CHROMIUM` / `SWEEP_CHROMEDRIVER`, else Debian's paths.
/// Missing binaries fail the test, naming the packages: a browser test that silently passes
/// without a browser would prove nothing.
fn browser_binaries() -> (PathBuf, PathBuf) {
    let pick = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(default))
    };
    let chromium = pick("SWEEP_CHROMIUM", "/usr/bin/chromium");
    let driver = pick("SWEEP_CHROMEDRIVER", "/usr/bin/chromedriver");
    for bin in [&chromium, &driver] {
        assert!(
            bin.exists(),
            "{} is missing: the browser test needs Debian's packages \
             (apt-get install chromium chromium-driver; .ci/run installs them)",
            bin.display()
        );
    }
    (chromium, driver)
}

/// Starts chromedriver on a free port and waits until it is ready; returns it and its URL.
async fn start_chromedriver(driver: &Path) -> (Proc, String) {
    let port = common::free_port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting chromedriver");
    let proc = Proc(child);
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    loop {
        let ready = reqwest::get(format!("{url}/status"))
            .await
            .ok()
            .map(|r| r.status().is_success())
            .unwrap_or(false);
        if ready {
            return (proc, url);
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "chromedriver never answered on {url}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A headless Chromium session.
async fn browser(chromium: &Path, driver_url: &str) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1600"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(driver_url)
        .await
        .expect("a Chromium session through chromedriver")
}

/// An engines and a suites directory with the bundled engine (and two of its suites) and
/// the fake `flaky` engine (and its suite), with their sources named by absolute paths.
fn catalog(dir: &Path) -> (PathBuf, PathBuf) {
    let (engines, suites) = (dir.join("engines"), dir.join("suites"));
    std::fs::create_dir_all(&engines).unwrap();
    std::fs::create_dir_all(&suites).unwrap();
    let minnow = std::fs::read_to_string(repo().join("configs/engines/minnow.toml")).unwrap();
    let minnow = minnow.replace(
        "\"../../engines/minnow\"",
        &format!("{:?}", repo().join("engines/minnow")),
    );
    std::fs::write(engines.join("minnow.toml"), minnow).unwrap();
    let flaky = std::fs::read_to_string(repo().join("tests/fixtures/engines/flaky.toml")).unwrap();
    let flaky = flaky.replace(
        "\"../flaky\"",
        &format!("{:?}", repo().join("tests/fixtures/flaky")),
    );
    std::fs::write(engines.join("flaky.toml"), flaky).unwrap();
    for suite in [
        "suites/ecm_confident_quick.epd",
        "suites/ecm_hard_quick.epd",
        "tests/fixtures/suites/fakes.epd",
    ] {
        let from = repo().join(suite);
        std::fs::copy(&from, suites.join(from.file_name().unwrap())).unwrap();
    }
    (engines, suites)
}

/// Submits a TOML config over the API; returns the sweep id.
async fn submit(base: &str, toml: &str) -> i64 {
    let resp = common::post(&format!("{base}/api/v1/sweeps"))
        .header("content-type", "application/toml")
        .body(toml.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert!(status.is_success(), "submit: {status} {body}");
    body["id"].as_i64().unwrap()
}

/// Polls the sweep until its state is `state`.
async fn wait_state(base: &str, id: i64, state: &str) -> Value {
    let start = Instant::now();
    loop {
        let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
        if d["state"] == state {
            return d;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "sweep {id} never became {state}: {d}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the CSS selector finds an element whose text contains `text`.
async fn wait_text(c: &Client, css: &str, text: &str) -> String {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < Duration::from_secs(30) {
        if let Ok(el) = c.find(Locator::Css(css)).await {
            last = el.text().await.unwrap_or_default();
            if last.contains(text) {
                return last;
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    panic!("`{css}` never showed `{text}` (last: `{last}`)");
}

/// Waits until the CSS selector finds exactly `n` elements; returns them.
async fn wait_count(c: &Client, css: &str, n: usize) -> Vec<fantoccini::elements::Element> {
    let start = Instant::now();
    let mut found = 0;
    while start.elapsed() < Duration::from_secs(30) {
        let all = c.find_all(Locator::Css(css)).await.unwrap();
        found = all.len();
        if found == n {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    panic!("`{css}`: {found} elements, expected {n}");
}

/// Writes a screenshot of the window to `target/screenshots/NAME.png`.
async fn screenshot(c: &Client, name: &str) {
    let dir = repo().join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_in_a_real_browser() {
    let (chromium, driver) = browser_binaries();
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (engines, suites) = catalog(dir.path());
    let (_coordinator, base) = start_coordinator_with(
        &db.url,
        &[
            "--engines-dir",
            engines.to_str().unwrap(),
            "--suites-dir",
            suites.to_str().unwrap(),
        ],
    );
    let _worker = start_worker_with(
        &base,
        &dir.path().join("cache"),
        "w1",
        1,
        &["--allow-build-programs", "make,sh"],
    );

    // A finished sweep: four knob values of the bundled engine on two suites.
    let values = VALUES.map(|v| v.to_string()).join(", ");
    let suites = SUITES.map(|s| format!("{s:?}")).join(", ");
    let finished = submit(
        &base,
        &format!(
            "name = \"null-move minimum depth\"\nengine = \"minnow\"\nknob = \"{KNOB}\"\n\
             values = [{values}]\nsuites = [{suites}]\ndepth = 4\nchunk_size = 45\n\
             counters = [\"null_tried\"]\n"
        ),
    )
    .await;
    let d = wait_final(&base, finished, Duration::from_secs(600)).await;
    assert_eq!(d["state"], "done", "{d}");
    // A sweep whose FAULT=9 variant never compiles.
    let failed = submit(
        &base,
        "name = \"failing <b>build</b>\"\nengine = \"flaky\"\nknob = \"FAULT\"\nvalues = [6, 9]\n\
         suites = [\"fakes\"]\ndepth = 1\nchunk_size = 5\n",
    )
    .await;
    let d = wait_final(&base, failed, Duration::from_secs(120)).await;
    assert_eq!(d["state"], "done_with_errors", "{d}");
    // A running sweep: deep searches on hard positions, cancelled from the page below.
    let running = submit(
        &base,
        &format!(
            "name = \"running\"\nengine = \"minnow\"\nknob = \"{KNOB}\"\nvalues = [3]\n\
             suites = [\"ecm_hard_quick\"]\ndepth = 14\nchunk_size = 10\n"
        ),
    )
    .await;
    wait_state(&base, running, "running").await;

    let (_chromedriver, driver_url) = start_chromedriver(&driver).await;
    let c = browser(&chromium, &driver_url).await;
    let outcome = drive(&c, &base, finished, failed, running).await;
    c.close().await.ok();
    outcome.unwrap();
}

/// The browser's part; errors come back so the session is closed either way.
async fn drive(
    c: &Client,
    base: &str,
    finished: i64,
    failed: i64,
    running: i64,
) -> Result<(), fantoccini::error::CmdError> {
    // Without a token the page says it needs one; signing in through its own form (the
    // token stays in the browser).
    c.goto(&format!("{base}/")).await?;
    wait_text(c, "#auth-note", "needs a token").await;
    sign_in_as_admin(c, base).await?;

    // The list: all three sweeps with their states, progress bars and an ETA column.
    wait_count(c, "#sweeps tbody tr", 3).await;
    for (id, state) in [
        (finished, "done"),
        (failed, "done_with_errors"),
        (running, "running"),
    ] {
        wait_text(c, &format!("#sweeps tr[data-id='{id}'] .state"), state).await;
        let row = c
            .find(Locator::Css(&format!("#sweeps tr[data-id='{id}']")))
            .await?;
        row.find(Locator::Css(".progress .bar .fill")).await?;
    }
    let row = c
        .find(Locator::Css(&format!("#sweeps tr[data-id='{finished}']")))
        .await?
        .text()
        .await?;
    assert!(
        row.contains("minnow") && row.contains("registered"),
        "{row}"
    );
    // A finished sweep has no ETA, and never a made-up one; nor a share of the workers.
    let cell = |id: i64, n: usize| {
        let css = format!("#sweeps tr[data-id='{id}'] td:nth-child({n})");
        async move { c.find(Locator::Css(&css)).await?.text().await }
    };
    assert_eq!(cell(finished, 9).await?, "—");
    assert_eq!(cell(finished, 8).await?, "—");
    // The one sweep still running has all of them.
    assert_eq!(cell(running, 8).await?, "100 %");
    // Names from the API are text, never markup.
    let name = c
        .find(Locator::Css(&format!(
            "#sweeps tr[data-id='{failed}'] td:nth-child(2)"
        )))
        .await?;
    assert_eq!(name.text().await?, "failing <b>build</b>");
    assert!(name.find_all(Locator::Css("b")).await?.is_empty());
    screenshot(c, "list").await;

    // The finished sweep: in each plot, one point per knob value for each suite; the knob
    // column; positions with their boards.
    c.goto(&format!("{base}/#/sweeps/{finished}")).await?;
    for plot in ["nodes", "solved"] {
        wait_count(
            c,
            &format!("svg[data-plot='{plot}'] circle[data-knob]"),
            VALUES.len() * SUITES.len(),
        )
        .await;
        for suite in SUITES {
            let points = c
                .find_all(Locator::Css(&format!(
                    "svg[data-plot='{plot}'] circle[data-series='{suite}']"
                )))
                .await?;
            let mut knobs = Vec::new();
            for p in points {
                knobs.push(p.attr("data-knob").await?.unwrap_or_default());
            }
            knobs.sort_by_key(|k| k.parse::<i64>().unwrap_or(i64::MIN));
            assert_eq!(knobs, VALUES.map(|v| v.to_string()), "{plot} plot, {suite}");
        }
    }
    let knob_cells = c
        .find_all(Locator::Css("#tables table[data-group='combined'] td.knob"))
        .await?;
    let mut shown = Vec::new();
    for cell in knob_cells {
        shown.push(cell.text().await?);
    }
    assert_eq!(shown, ["default", "1", "3", "4", "6"], "knob column");
    // The counter column, summed once the sweep finished: a number per build, and the knob
    // changes it (null-move minimum depth decides how often null moves are tried).
    let mut tried = Vec::new();
    for cell in c
        .find_all(Locator::Css(
            "#tables table[data-group='combined'] td.counter",
        ))
        .await?
    {
        tried.push(cell.text().await?);
    }
    assert_eq!(tried.len(), 5, "{tried:?}");
    assert!(
        tried
            .iter()
            .all(|t| t.replace(',', "").parse::<u64>().is_ok()),
        "{tried:?}"
    );
    assert!(tried.iter().any(|t| *t != tried[0]), "{tried:?}");
    // minnow's bench per build, as the workers reported it: a number in every row.
    let mut benches = Vec::new();
    for cell in c
        .find_all(Locator::Css(
            "#tables table[data-group='combined'] td.bench",
        ))
        .await?
    {
        benches.push(cell.text().await?);
    }
    assert_eq!(benches.len(), 5, "{benches:?}");
    assert!(
        benches.iter().all(|t| t
            .split_whitespace()
            .next()
            .unwrap_or("")
            .replace(',', "")
            .parse::<u64>()
            .is_ok()),
        "{benches:?}"
    );
    // How each build's binary was made: one row per build, from the worker's record.
    let records = wait_count(c, "#build-records tr[data-build]", 5).await;
    let first = records[0].text().await?;
    assert!(first.contains("make") && first.contains('1'), "{first}");
    wait_text(c, "#tables", "node ratio").await;
    c.wait()
        .for_element(Locator::Css("#node-changes .card .board"))
        .await?;
    let squares = c
        .find_all(Locator::Css("#node-changes .card:first-child .board .sq"))
        .await?;
    assert_eq!(squares.len(), 64, "a board diagram has 64 squares");
    let card = c
        .find(Locator::Css("#node-changes .card:first-child"))
        .await?
        .text()
        .await?;
    assert!(
        card.contains("baseline") && card.contains("variant") && card.contains("bm "),
        "{card}"
    );
    screenshot(c, "sweep").await;
    let provenance = c.find(Locator::Css("#provenance dl")).await?.text().await?;
    assert!(
        provenance.contains("sha256") && provenance.contains(KNOB),
        "{provenance}"
    );
    let overflow = c
        .execute(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
            vec![],
        )
        .await?;
    assert_eq!(
        overflow,
        json!(0),
        "the sweep page is wider than the window"
    );
    c.execute(
        "document.getElementById('positions').scrollIntoView()",
        vec![],
    )
    .await?;
    screenshot(c, "positions").await;

    // The failed build's compiler output, the reason last.
    c.goto(&format!("{base}/#/sweeps/{failed}")).await?;
    wait_text(
        c,
        ".build-failure[data-build='FAULT=9'] pre.compiler-output",
        "FAULT=9 never compiles",
    )
    .await;
    c.find(Locator::Css(
        ".build-failure[data-build='FAULT=9'] button.retry",
    ))
    .await?;
    screenshot(c, "failed-build").await;
    // Retrying it from the page (the admin token may): its jobs are queued again.
    c.find(Locator::Css(
        ".build-failure[data-build='FAULT=9'] button.retry",
    ))
    .await?
    .click()
    .await?;
    wait_text(c, "#notice", "queued again").await;

    // The workers page: the worker, its host and cores.
    c.goto(&format!("{base}/#/workers")).await?;
    let worker = wait_text(c, "#workers tr[data-worker='w1']", "w1").await;
    let host = get_json(&format!("{base}/api/v1/workers")).await["workers"][0]["host"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(worker.contains(&host), "{worker}");
    screenshot(c, "workers").await;

    // The submit form shows the coordinator's validation error beside the form.
    c.goto(&format!("{base}/#/submit")).await?;
    let config = c.wait().for_element(Locator::Css("#config")).await?;
    config.clear().await?;
    config
        .send_keys("name = \"bad\"\nengine = \"nope\"\nsuites = [\"fakes\"]\ndepth = 1\n")
        .await?;
    c.find(Locator::Css("#submit-form button"))
        .await?
        .click()
        .await?;
    wait_text(c, "#submit-error .field", "engine").await;

    // Cancelling the running sweep from its page (confirming the dialog).
    c.goto(&format!("{base}/#/sweeps/{running}")).await?;
    c.wait()
        .for_element(Locator::Css("#cancel"))
        .await?
        .click()
        .await?;
    c.accept_alert().await?;
    wait_text(c, "#sweep-head .state", "cancelled").await;
    let d = get_json(&format!("{base}/api/v1/sweeps/{running}")).await;
    assert_eq!(d["state"], "cancelled", "{d}");
    Ok(())
}

/// Types the admin token into the dashboard's token form at `base`.
async fn sign_in_as_admin(c: &Client, base: &str) -> Result<(), fantoccini::error::CmdError> {
    c.goto(&format!("{base}/")).await?;
    let admin = tokens_for(base).unwrap().admin;
    c.wait()
        .for_element(Locator::Css("#token"))
        .await?
        .send_keys(&admin)
        .await?;
    c.find(Locator::Css("#token-form button"))
        .await?
        .click()
        .await?;
    Ok(())
}

/// A sweep finished on a coordinator of its own, with what must live as long as the test.
struct Finished {
    /// The coordinator's address.
    base: String,
    /// The sweep's id.
    id: i64,
    /// Its table, from the API.
    table: Value,
    _worker: Proc,
    _coordinator: Proc,
    _dir: tempfile::TempDir,
    _db: TestDb,
}

/// A coordinator on a fresh database with the test catalog, one one-core worker, and the
/// sweep of config `toml` submitted and finished `done`.
async fn finished_sweep(toml: &str) -> Finished {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (engines, suites) = catalog(dir.path());
    let (coordinator, base) = start_coordinator_with(
        &db.url,
        &[
            "--engines-dir",
            engines.to_str().unwrap(),
            "--suites-dir",
            suites.to_str().unwrap(),
        ],
    );
    let worker = start_worker_with(&base, &dir.path().join("cache"), "w1", 1, &[]);
    let id = submit(&base, toml).await;
    let d = wait_final(&base, id, Duration::from_secs(600)).await;
    assert_eq!(d["state"], "done", "{d}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table")).await;
    Finished {
        base,
        id,
        table,
        _worker: worker,
        _coordinator: coordinator,
        _dir: dir,
        _db: db,
    }
}

/// A staged sweep's page: a section per stage, each with its own tables, the promotion line
/// naming the variants the API says were promoted, and the stage in the heading.
#[tokio::test(flavor = "multi_thread")]
async fn a_staged_sweep_shows_each_stage_and_its_promotion() {
    let (chromium, driver) = browser_binaries();
    let sweep = finished_sweep(&format!(
        "name = \"staged\"\nengine = \"minnow\"\nknob = \"{KNOB}\"\nvalues = [1, 3, 4]\n\
         chunk_size = 45\n[[stages]]\nsuites = [\"ecm_confident_quick\"]\ndepth = 4\n\
         [[stages]]\nsuites = [\"ecm_hard_quick\"]\ndepth = 4\npromote = 1\n\
         max_solved_loss = 90\n"
    ))
    .await;
    // Kept whole: its worker and coordinator stop when it is dropped.
    let (base, id, table) = (&sweep.base, sweep.id, &sweep.table);
    let promoted = table["stages"][0]["promoted"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{table}"))
        .to_string();

    let (_chromedriver, driver_url) = start_chromedriver(&driver).await;
    let c = browser(&chromium, &driver_url).await;
    let outcome = async {
        sign_in_as_admin(&c, base).await?;
        c.goto(&format!("{base}/#/sweeps/{id}")).await?;
        let stages = wait_count(&c, "h4.stage", 2).await;
        let first = stages[0].text().await?;
        assert!(
            first.contains("Stage 1 of 2") && first.contains("every variant"),
            "{first}"
        );
        let second = stages[1].text().await?;
        assert!(second.contains("best 1 of stage 1"), "{second}");
        let line = wait_text(&c, "p.promotion", "Promoted to stage 2").await;
        assert!(line.contains(&promoted), "{line} ({promoted})");
        // Stage 2's tables hold the baseline and the promoted variant only.
        let rows = c
            .find_all(Locator::Css(
                "table.delta[data-group='ecm_hard_quick'] tr[data-build]",
            ))
            .await?;
        assert_eq!(rows.len(), 2);
        wait_text(&c, "#sweep-head .stage", "stage 2 of 2").await;
        screenshot(&c, "staged").await;
        Ok::<(), fantoccini::error::CmdError>(())
    }
    .await;
    c.close().await.ok();
    outcome.unwrap();
}

/// A coordinate search's page: the search's heading, one path row per step the API lists,
/// and its choice; the delta tables hold the measured cells alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_search_shows_its_path_and_choice() {
    let (chromium, driver) = browser_binaries();
    let sweep = finished_sweep(
        "name = \"searched\"\nengine = \"minnow\"\nsuites = [\"ecm_confident_quick\"]\n\
         depth = 4\nchunk_size = 45\n[grid]\nNULLMOVE_R_BASE = [2, 3, 4]\n\
         NULLMOVE_MIN_DEPTH = [2, 3]\n[search]\nstrategy = \"coordinate\"\n",
    )
    .await;
    let (base, id, table) = (&sweep.base, sweep.id, &sweep.table);
    let search = &table["search"];
    let chosen = search["chosen"]
        .as_str()
        .unwrap_or_else(|| panic!("{table}"));
    let steps = search["path"].as_array().unwrap().len();
    let measured = search["planned"].as_array().unwrap().len();

    let (_chromedriver, driver_url) = start_chromedriver(&driver).await;
    let c = browser(&chromium, &driver_url).await;
    let outcome = async {
        sign_in_as_admin(&c, base).await?;
        c.goto(&format!("{base}/#/sweeps/{id}")).await?;
        let heading = wait_text(&c, "h4.search", "Coordinate search over 6 cells").await;
        assert!(
            heading.contains("started at NULLMOVE_MIN_DEPTH=2,NULLMOVE_R_BASE=3"),
            "{heading}"
        );
        let rows = wait_count(&c, "table.search-path tbody tr", steps).await;
        assert_eq!(rows.len(), steps);
        let line = wait_text(&c, "p.search-result", "Chosen: ").await;
        assert!(line.contains(chosen), "{line} ({chosen})");
        assert!(
            line.contains(&format!("{measured} of 6 cells measured")),
            "{line}"
        );
        // Each knob's plot holds the other knob at the choice: MIN_DEPTH's 2 cells through
        // it and R's 3, not every measured cell in one zigzag.
        wait_text(&c, "p.plot-anchor", chosen).await;
        let points = c
            .find_all(Locator::Css("svg[data-plot='nodes'] circle.point"))
            .await?;
        // The measured cells sharing the choice's setting of `held` (`KNOB=value`).
        let through = |held: &str| {
            let setting = chosen.split(',').find(|s| s.starts_with(held)).unwrap();
            let cells = search["planned"].as_array().unwrap();
            cells
                .iter()
                .filter(|cell| cell.as_str().unwrap().split(',').any(|s| s == setting))
                .count()
        };
        assert_eq!(
            points.len(),
            through("NULLMOVE_R_BASE=") + through("NULLMOVE_MIN_DEPTH=")
        );
        // The combined table: the baseline and the measured cells, no other.
        let rows = c
            .find_all(Locator::Css(
                "table.delta[data-group='combined'] tr[data-build]",
            ))
            .await?;
        assert_eq!(rows.len(), measured + 1);
        screenshot(&c, "search").await;
        Ok::<(), fantoccini::error::CmdError>(())
    }
    .await;
    c.close().await.ok();
    outcome.unwrap();
}

/// A sweep held for approval: its page says why, and an admin approves one and rejects
/// another (saying why, in the browser's prompt) with the page's buttons.
#[tokio::test(flavor = "multi_thread")]
async fn an_admin_approves_and_rejects_held_sweeps_from_their_pages() {
    let (chromium, driver) = browser_binaries();
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (engines, suites) = catalog(dir.path());
    let (_coordinator, base) = start_coordinator_with(
        &db.url,
        &[
            "--engines-dir",
            engines.to_str().unwrap(),
            "--suites-dir",
            suites.to_str().unwrap(),
            "--approve-over-engine-hours",
            "0.0000003",
        ],
    );
    let alice = common::create_token(&db.url, "submitter", "alice");
    let held = |values: &str| {
        let body = format!(
            "name = \"held {values}\"\nengine = \"minnow\"\nknob = \"{KNOB}\"\n\
             values = [{values}]\nsuites = [\"ecm_confident_quick\"]\ndepth = 2\nchunk_size = 45\n"
        );
        let alice = alice.clone();
        let base = base.clone();
        async move {
            let resp = reqwest::Client::new()
                .post(format!("{base}/api/v1/sweeps"))
                .bearer_auth(&alice)
                .header("content-type", "application/toml")
                .body(body)
                .send()
                .await
                .unwrap();
            let v: Value = resp.json().await.unwrap();
            assert!(v["pending_approval"].is_string(), "{v}");
            v["id"].as_i64().unwrap()
        }
    };
    let approved = held("3").await;
    let rejected = held("4").await;
    let _worker = start_worker_with(&base, &dir.path().join("cache"), "w1", 1, &[]);

    let (_chromedriver, driver_url) = start_chromedriver(&driver).await;
    let c = browser(&chromium, &driver_url).await;
    let outcome = async {
        sign_in_as_admin(&c, &base).await?;
        c.goto(&format!("{base}/#/sweeps/{approved}")).await?;
        wait_text(&c, "#sweep-head .state", "pending_approval").await;
        wait_text(&c, "#sweep-head .approval", "no estimate").await;
        c.wait()
            .for_element(Locator::Css("#approve"))
            .await?
            .click()
            .await?;
        wait_text(&c, "#sweep-head .state", "done").await;

        c.goto(&format!("{base}/#/sweeps/{rejected}")).await?;
        c.wait()
            .for_element(Locator::Css("#reject"))
            .await?
            .click()
            .await?;
        c.send_alert_text("too deep for today").await?;
        c.accept_alert().await?;
        wait_text(&c, "#sweep-head .state", "rejected").await;
        wait_text(&c, "#sweep-head .approval", "too deep for today").await;
        screenshot(&c, "rejected").await;
        Ok::<(), fantoccini::error::CmdError>(())
    }
    .await;
    c.close().await.ok();
    outcome.unwrap();
    let d = get_json(&format!("{base}/api/v1/sweeps/{rejected}")).await;
    assert_eq!(d["approval_note"], "too deep for today", "{d}");
}
