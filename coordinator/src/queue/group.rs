//! Calls served together ("group commit"). Every call of one kind queues its ask; whoever
//! gets a turn serves every ask queued so far at once, and the others find their answer
//! waiting when their turn comes. Under load the database then runs a handful of statements
//! and one commit for many calls instead of several per call: what lease calls
//! ([`super::claim`]), result uploads ([`super::uploads`]) and heartbeats ([`super::beats`])
//! are built on.
//!
//! Serving runs in a task of its own, so a caller that goes away while it serves (a closed
//! connection) cannot cut the others' answers short. A few turns may serve at once, so one
//! slow transaction does not hold every other call of its kind back.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, Semaphore};

use crate::store::StoreError;

/// One ask waiting for its answer.
struct Pending<A, R> {
    ask: A,
    reply: oneshot::Sender<R>,
}

/// A queue of asks of one kind and the turns to serve them.
pub(crate) struct Group<A, R> {
    pending: Arc<Mutex<Vec<Pending<A, R>>>>,
    turns: Arc<Semaphore>,
}

impl<A, R> Clone for Group<A, R> {
    fn clone(&self) -> Self {
        Self {
            pending: self.pending.clone(),
            turns: self.turns.clone(),
        }
    }
}

impl<A: Send + 'static, R: Send + 'static> Group<A, R> {
    /// A group whose asks are served by at most `turns` servings at once.
    pub fn new(turns: usize) -> Self {
        Self {
            pending: Arc::default(),
            turns: Arc::new(Semaphore::new(turns.max(1))),
        }
    }

    /// Queues `ask` and returns its answer: `serve` gets every ask queued when this call's
    /// turn comes (this one included, unless another turn took it meanwhile) and must return
    /// one answer per ask, in order. `None` when the answer never came (its serving
    /// panicked, or returned too few answers).
    pub async fn call<S, F>(&self, ask: A, serve: S) -> Option<R>
    where
        S: FnOnce(Vec<A>) -> F + Send + 'static,
        F: Future<Output = Vec<R>> + Send + 'static,
    {
        let (reply, mut answer) = oneshot::channel();
        self.pending
            .lock()
            .expect("group queue lock")
            .push(Pending { ask, reply });
        let Ok(turn) = self.turns.clone().acquire_owned().await else {
            return None;
        };
        match answer.try_recv() {
            Ok(served) => return Some(served),
            Err(oneshot::error::TryRecvError::Closed) => return None,
            // Not served yet, though another turn may be serving it right now: serve
            // whatever is queued, then wait.
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let batch = std::mem::take(&mut *self.pending.lock().expect("group queue lock"));
        if !batch.is_empty() {
            let (asks, replies): (Vec<A>, Vec<oneshot::Sender<R>>) =
                batch.into_iter().map(|p| (p.ask, p.reply)).unzip();
            let serving = tokio::spawn(async move {
                let _turn = turn;
                let answers = serve(asks).await;
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(answer);
                }
            });
            // Serving answers every ask before it ends; a panic in it drops the answers.
            let _ = serving.await;
        } else {
            drop(turn);
        }
        answer.await.ok()
    }
}

/// The error of an ask whose answer never came (its serving panicked); `what` names the
/// kind of call.
pub(crate) fn abandoned(what: &str) -> StoreError {
    StoreError::Internal(anyhow::anyhow!("a {what} ended without an answer"))
}

/// The same error for each ask of a failed serving (store errors are not `Clone`).
pub(crate) fn replicate(e: &StoreError) -> StoreError {
    match e {
        StoreError::NotFound(what) => StoreError::NotFound(what.clone()),
        StoreError::LeaseLost {
            job_id,
            worker_id,
            attempt,
        } => StoreError::LeaseLost {
            job_id: *job_id,
            worker_id: *worker_id,
            attempt: *attempt,
        },
        StoreError::Invalid(m) => StoreError::Invalid(m.clone()),
        StoreError::TooManyWorkers { limit, lease } => StoreError::TooManyWorkers {
            limit: *limit,
            lease: *lease,
        },
        // Still "unavailable", so each caller is told to retry.
        StoreError::Unavailable(e) => StoreError::Unavailable(sqlx::Error::Protocol(e.to_string())),
        StoreError::Internal(e) => StoreError::Internal(anyhow::anyhow!("{e:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn every_ask_gets_its_own_answer_and_servings_group_them() {
        let group: Group<u32, u32> = Group::new(1);
        let servings = Arc::new(AtomicUsize::new(0));
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..200u32 {
            let group = group.clone();
            let servings = servings.clone();
            calls.spawn(async move {
                let answer = group
                    .call(i, move |asks: Vec<u32>| async move {
                        servings.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                        asks.into_iter().map(|a| a * 10).collect()
                    })
                    .await;
                (i, answer)
            });
        }
        while let Some(done) = calls.join_next().await {
            let (i, answer) = done.expect("call");
            assert_eq!(answer, Some(i * 10), "ask {i} got another's answer");
        }
        let n = servings.load(Ordering::SeqCst);
        assert!(
            n < 200,
            "200 concurrent asks took {n} servings: none were grouped"
        );
    }

    #[tokio::test]
    async fn a_serving_with_too_few_answers_answers_none() {
        let group: Group<u32, u32> = Group::new(2);
        let answer = group.call(1, |_asks: Vec<u32>| async { Vec::new() }).await;
        assert_eq!(answer, None);
    }
}
