//! When to ask a coordinator again: exponential backoff with jitter, a coordinator's own
//! `Retry-After` honoured, and every wait cut short by cancellation.

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::error::ClientError;

impl ClientError {
    /// How long to wait before retrying: the backoff's next step, or longer when the
    /// coordinator asked for a longer wait. A random part of up to half the asked wait is
    /// added, so the clients it turned away do not all come back at the same instant.
    pub fn pause(&self, backoff: &mut Backoff) -> Duration {
        let step = backoff.next_delay();
        match self {
            ClientError::Overloaded { retry_after, .. } => {
                let spread = rand::thread_rng().gen_range(Duration::ZERO..=*retry_after / 2);
                step.max(*retry_after + spread)
            }
            _ => step,
        }
    }
}

/// Exponential backoff with full jitter: waits grow from `initial` to `cap`.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    /// Backoff starting at `initial`, never waiting longer than `cap`.
    pub fn new(initial: Duration, cap: Duration) -> Self {
        Backoff {
            initial,
            cap,
            attempt: 0,
        }
    }

    /// The policy for coordinator calls: 100 ms doubling up to 5 s.
    pub fn coordinator() -> Self {
        Backoff::new(Duration::from_millis(100), Duration::from_secs(5))
    }

    /// The next wait: a random duration between half and all of the current step, so many
    /// workers retrying after a coordinator restart do not arrive in lockstep.
    pub fn next_delay(&mut self) -> Duration {
        let factor = 1u32 << self.attempt.min(16);
        let step = self.initial.saturating_mul(factor).min(self.cap);
        self.attempt = self.attempt.saturating_add(1);
        let half = step / 2;
        half + rand::thread_rng().gen_range(Duration::ZERO..=half)
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// Sleeps for `d` unless `cancel` fires first; returns `false` when cancelled.
pub async fn sleep_or_cancel(d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

/// Runs `call` until it succeeds or fails for a reason retrying cannot fix, waiting with
/// [`Backoff::coordinator`] between retryable failures. Returns [`ClientError::Cancelled`] as
/// soon as `cancel` fires, even in the middle of a request.
pub async fn with_retry<T, F, Fut>(
    what: &str,
    cancel: &CancellationToken,
    mut call: F,
) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut backoff = Backoff::coordinator();
    loop {
        let result = tokio::select! {
            _ = cancel.cancelled() => return Err(ClientError::Cancelled),
            r = call() => r,
        };
        match result {
            Err(e) if e.is_retryable() => {
                let delay = e.pause(&mut backoff);
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "{what} failed; retrying");
                if !sleep_or_cancel(delay, cancel).await {
                    return Err(ClientError::Cancelled);
                }
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_cap_with_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
        for _ in 0..40 {
            let d = b.next_delay();
            assert!(d <= Duration::from_secs(5));
        }
        let late = b.next_delay();
        assert!(late >= Duration::from_millis(2500), "{late:?}");
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    #[test]
    fn an_overloaded_answer_is_waited_out_with_a_spread() {
        // At least the asked wait, plus up to half again.
        let busy = ClientError::Overloaded {
            retry_after: Duration::from_secs(3),
            message: "busy".into(),
        };
        for _ in 0..20 {
            let pause = busy.pause(&mut Backoff::coordinator());
            assert!(pause >= Duration::from_secs(3) && pause <= Duration::from_millis(4500));
        }
        // Anything else retryable waits the backoff's step.
        let down = ClientError::Retryable("down".into());
        assert!(down.pause(&mut Backoff::coordinator()) <= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn retry_stops_on_cancel_and_on_fatal() {
        let cancel = CancellationToken::new();
        let mut calls = 0;
        let r: Result<(), _> = with_retry("t", &cancel, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(ClientError::Retryable("down".into()))
                } else {
                    Err(ClientError::LeaseLost("gone".into()))
                }
            }
        })
        .await;
        assert_eq!(r, Err(ClientError::LeaseLost("gone".into())));
        assert_eq!(calls, 3);

        cancel.cancel();
        let r: Result<(), _> = with_retry("t", &cancel, || async {
            Err(ClientError::Retryable("down".into()))
        })
        .await;
        assert_eq!(r, Err(ClientError::Cancelled));
    }
}
