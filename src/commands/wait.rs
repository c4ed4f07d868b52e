//! `sweep submit --wait` and `sweep status ID --wait`: follow a sweep on a coordinator to its
//! end with the progress display of `sweep run` (on stderr), then print its table (on stdout)
//! and exit with a code that says how it ended ([`exit_code`]).
//!
//! Waiting is polite: one `GET /api/v1/sweeps/{id}` a second; a coordinator that answers 503
//! or 429 is asked again no sooner than its `Retry-After` (plus a random part, as workers do),
//! and one that cannot be reached is asked again after a growing pause (up to 30 s), for up to
//! [`GIVE_UP`]. Ctrl-C stops the waiting, never the sweep.

use std::future::Future;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use sweep_client::{sleep_or_cancel, Backoff, ClientError};
use sweep_domain::wire::SweepState;
use tokio_util::sync::CancellationToken;

use super::api::Api;
use super::print::print_table;
use super::progress::ProgressView;
use super::shutdown_token;

/// Exit code of a sweep that finished with errors (`done_with_errors`: some positions ended
/// in errors or some variants did not build; the table has gaps).
pub const EXIT_DONE_WITH_ERRORS: u8 = 3;
/// Exit code of a sweep that `failed` (every build failed, or nothing could finish).
pub const EXIT_FAILED: u8 = 4;
/// Exit code of a sweep that was cancelled.
pub const EXIT_CANCELLED: u8 = 5;
/// Exit code when the wait was interrupted (Ctrl-C or SIGTERM); the sweep goes on.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Time between two polls of a sweep's progress.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// How long the coordinator may stay unreachable (or overloaded) before waiting gives up.
/// Long enough for a coordinator restart or a database failover; the sweep is not affected.
pub const GIVE_UP: Duration = Duration::from_secs(10 * 60);

/// The exit code for a sweep that ended in `state`: 0 only for `done`. (1 is left to the
/// command's own failures, e.g. an unreachable coordinator, and 2 to usage errors, so a
/// script can tell "the sweep had errors" from "the command could not tell".)
pub fn exit_code(state: SweepState) -> ExitCode {
    ExitCode::from(exit_number(state))
}

fn exit_number(state: SweepState) -> u8 {
    match state {
        SweepState::Done => 0,
        SweepState::DoneWithErrors => EXIT_DONE_WITH_ERRORS,
        SweepState::Failed => EXIT_FAILED,
        // A rejected sweep was cancelled by an admin before it ran.
        SweepState::Cancelled | SweepState::Rejected => EXIT_CANCELLED,
        // Not final: only an interrupted wait ends before the sweep does.
        SweepState::Queued | SweepState::Running | SweepState::PendingApproval => EXIT_INTERRUPTED,
    }
}

/// Why waiting stopped before the sweep ended.
#[derive(Debug)]
enum Stop {
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The coordinator refused (4xx, untrusted certificate) or stayed away for [`GIVE_UP`].
    Failed(anyhow::Error),
}

/// Follows sweep `id` until it ends, then prints its table in `format` (`md`, `csv` or
/// `json`) on stdout, its build failures and position errors and its final state on stderr,
/// and returns [`exit_code`] of its state.
pub async fn follow(api: &Api, id: i64, format: &str) -> anyhow::Result<ExitCode> {
    let shutdown = shutdown_token();
    let mut view = ProgressView::new();
    let followed = follow_until_final(api, id, &mut view, &shutdown).await;
    view.finish();
    let detail = match followed {
        Ok(detail) => detail,
        Err(stop) => return stopped(stop, id),
    };
    let table = match patiently(&shutdown, || api.fetch_table(id, format)).await {
        Ok(table) => table,
        Err(stop) => return stopped(stop, id),
    };
    print_table(&table);
    for b in detail.builds.iter().filter(|b| b.build_error.is_some()) {
        eprintln!(
            "build {} failed:\n{}",
            b.name,
            b.build_error.as_deref().unwrap_or("")
        );
    }
    for e in &detail.errors {
        eprintln!("error: {} {} {}: {}", e.build, e.suite, e.position, e.error);
    }
    for line in detail.cross_checks.lines() {
        eprintln!("{line}");
    }
    eprintln!("sweep {id}: {}", detail.summary.state.as_str());
    Ok(exit_code(detail.summary.state))
}

async fn follow_until_final(
    api: &Api,
    id: i64,
    view: &mut ProgressView,
    shutdown: &CancellationToken,
) -> Result<sweep_domain::wire::SweepDetail, Stop> {
    loop {
        let detail = patiently(shutdown, || api.poll_detail(id)).await?;
        view.update(&detail);
        if detail.summary.state.is_final() {
            return Ok(detail);
        }
        if !sleep_or_cancel(POLL_EVERY, shutdown).await {
            return Err(Stop::Interrupted);
        }
    }
}

/// What the user sees when waiting stops early, and the exit code.
fn stopped(stop: Stop, id: i64) -> anyhow::Result<ExitCode> {
    match stop {
        Stop::Interrupted => {
            eprintln!(
                "stopped waiting: sweep {id} was NOT cancelled and goes on \
                 (`sweep status {id} --wait` follows it again, `sweep cancel {id}` stops it)"
            );
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        Stop::Failed(e) => Err(e.context(format!(
            "waiting for sweep {id} (the sweep itself is not affected)"
        ))),
    }
}

/// Runs `call` until it succeeds, retrying what may heal: after an overloaded coordinator's
/// `Retry-After` (and a random part of up to half of it), or after a pause growing from 1 s to
/// 30 s when it cannot be reached. Stops at once on a refusal or on `shutdown`, and after
/// [`GIVE_UP`] without an answer.
async fn patiently<T, F, Fut>(shutdown: &CancellationToken, call: F) -> Result<T, Stop>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    patiently_for(shutdown, GIVE_UP, call).await
}

async fn patiently_for<T, F, Fut>(
    shutdown: &CancellationToken,
    give_up: Duration,
    mut call: F,
) -> Result<T, Stop>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    let mut failing_since: Option<Instant> = None;
    loop {
        let result = tokio::select! {
            _ = shutdown.cancelled() => return Err(Stop::Interrupted),
            result = call() => result,
        };
        let e = match result {
            Ok(value) => return Ok(value),
            Err(e) if e.is_retryable() => e,
            Err(e) => return Err(Stop::Failed(e.into())),
        };
        let since = *failing_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= give_up {
            return Err(Stop::Failed(anyhow::Error::new(e).context(format!(
                "no answer from the coordinator for {} s",
                since.elapsed().as_secs()
            ))));
        }
        let pause = e.pause(&mut backoff);
        match &e {
            // An overloaded coordinator is doing its job; say so quietly.
            ClientError::Overloaded { .. } => {
                tracing::info!(error = %e, "asking again in {:.1} s", pause.as_secs_f64())
            }
            _ => tracing::warn!(error = %e, "asking again in {:.1} s", pause.as_secs_f64()),
        }
        if !sleep_or_cancel(pause, shutdown).await {
            return Err(Stop::Interrupted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_done_exits_zero_and_each_end_has_its_code() {
        assert_eq!(exit_number(SweepState::Done), 0);
        let codes = [
            exit_number(SweepState::DoneWithErrors),
            exit_number(SweepState::Failed),
            exit_number(SweepState::Cancelled),
            EXIT_INTERRUPTED,
        ];
        for (i, c) in codes.iter().enumerate() {
            // 1 is a failed command and 2 a usage error (clap): never a sweep's end.
            assert!(*c > 2, "{c}");
            assert!(!codes[..i].contains(c), "{codes:?}");
        }
    }

    #[tokio::test]
    async fn overloaded_answers_are_asked_again_after_retry_after() {
        let shutdown = CancellationToken::new();
        let mut calls = 0;
        let start = Instant::now();
        let got = patiently_for(&shutdown, GIVE_UP, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(ClientError::Overloaded {
                        retry_after: Duration::from_secs(1),
                        message: "busy".into(),
                    })
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert!(matches!(got, Ok(3)), "{got:?}");
        assert!(
            start.elapsed() >= Duration::from_secs(2),
            "two Retry-After waits of 1 s: {:?}",
            start.elapsed()
        );
    }

    #[tokio::test]
    async fn refusals_stop_at_once_and_silence_gives_up() {
        let shutdown = CancellationToken::new();
        let refused = patiently_for(&shutdown, GIVE_UP, || async {
            Err::<(), _>(ClientError::Fatal {
                status: 404,
                code: "not_found".into(),
                message: "no sweep 9".into(),
            })
        })
        .await;
        assert!(
            matches!(&refused, Err(Stop::Failed(e)) if e.to_string().contains("no sweep 9")),
            "{refused:?}"
        );
        let start = Instant::now();
        let silent = patiently_for(&shutdown, Duration::from_millis(1500), || async {
            Err::<(), _>(ClientError::Retryable("connection refused".into()))
        })
        .await;
        assert!(matches!(silent, Err(Stop::Failed(_))), "{silent:?}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn shutdown_interrupts_a_pause() {
        let shutdown = CancellationToken::new();
        let stopper = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            stopper.cancel();
        });
        let start = Instant::now();
        let got = patiently_for(&shutdown, GIVE_UP, || async {
            Err::<(), _>(ClientError::Overloaded {
                retry_after: Duration::from_secs(30),
                message: "busy".into(),
            })
        })
        .await;
        assert!(matches!(got, Err(Stop::Interrupted)), "{got:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
