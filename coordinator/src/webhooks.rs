//! Telling the operator's receivers that sweeps ended: each event a JSON POST to every
//! configured URL (`--webhook`, repeatable), its body signed with HMAC-SHA256 under the
//! operator's secret (`--webhook-secret`) in `X-Sweep-Signature: sha256=<hex>`, retried with
//! backoff until the receiver answers 2xx or the attempts run out.
//!
//! Nothing waits for a receiver: the service hands events over through a bounded channel
//! ([`Webhooks::send`] never blocks; a full channel drops the event and says so in the log),
//! and one task delivers them, a few at once, so a slow or dead receiver holds up neither the
//! worker protocol nor the other receivers for long.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use sweep_domain::wire::SweepEvent;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::service::EventSink;

/// Events waiting for delivery at most; past it an event is dropped (and logged).
const QUEUED_EVENTS: usize = 1024;
/// Deliveries in flight at once, over all receivers.
const DELIVERIES_AT_ONCE: usize = 8;
/// Tries of one delivery: the first, then retries after 1, 2, 4, 8, 16 and 32 s.
const ATTEMPTS: u32 = 7;
/// How long one try may take, connection included.
const TRY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where events go and how they are signed.
#[derive(Clone, Default)]
pub struct WebhookSettings {
    /// The receivers (http or https URLs); none: no events are sent.
    pub urls: Vec<reqwest::Url>,
    /// The HMAC-SHA256 key every event body is signed with; required with any URL.
    pub secret: String,
}

impl std::fmt::Debug for WebhookSettings {
    // The secret is never printed (configs are logged at start).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("urls", &self.urls)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl WebhookSettings {
    /// Settings from the command line's `--webhook` URLs and secret, or the reason they are
    /// refused, naming the flag.
    pub fn parse(urls: &[String], secret: Option<String>) -> anyhow::Result<Self> {
        let urls = urls
            .iter()
            .map(|u| {
                let url = reqwest::Url::parse(u)
                    .map_err(|e| anyhow::anyhow!("--webhook `{u}`: not a URL ({e})"))?;
                anyhow::ensure!(
                    matches!(url.scheme(), "http" | "https") && url.host().is_some(),
                    "--webhook `{u}`: must be an http:// or https:// URL with a host"
                );
                Ok(url)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let secret = secret.unwrap_or_default();
        anyhow::ensure!(
            urls.is_empty() || !secret.is_empty(),
            "--webhook needs --webhook-secret (or SWEEP_WEBHOOK_SECRET): every event is signed"
        );
        Ok(Self { urls, secret })
    }
}

/// The signature header's value for `body` under `secret`: `sha256=` and the hex HMAC.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The sending side of the delivery task.
#[derive(Clone)]
pub struct Webhooks {
    queue: mpsc::Sender<SweepEvent>,
}

impl Webhooks {
    /// Starts the delivery task; it ends when `stop` fires (retries in progress are dropped).
    pub fn start(settings: WebhookSettings, stop: CancellationToken) -> Self {
        let (queue, events) = mpsc::channel(QUEUED_EVENTS);
        tokio::spawn(deliver_all(settings, events, stop));
        Self { queue }
    }
}

impl EventSink for Webhooks {
    fn send(&self, event: SweepEvent) {
        if let Err(e) = self.queue.try_send(event) {
            let event = match e {
                mpsc::error::TrySendError::Full(e) | mpsc::error::TrySendError::Closed(e) => e,
            };
            tracing::warn!(sweep_id = event.sweep.id, event = %event.event, "webhook event dropped: too many waiting");
        }
    }
}

/// Delivers every event to every receiver, [`DELIVERIES_AT_ONCE`] at a time.
async fn deliver_all(
    settings: WebhookSettings,
    mut events: mpsc::Receiver<SweepEvent>,
    stop: CancellationToken,
) {
    let client = match reqwest::Client::builder().timeout(TRY_TIMEOUT).build() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "webhooks disabled: no HTTP client");
            return;
        }
    };
    let settings = Arc::new(settings);
    let slots = Arc::new(Semaphore::new(DELIVERIES_AT_ONCE));
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            e = events.recv() => match e { Some(e) => e, None => return },
        };
        let body = match serde_json::to_vec(&event) {
            Ok(b) => Arc::new(b),
            Err(e) => {
                tracing::error!(error = %e, "a webhook event did not serialize");
                continue;
            }
        };
        for url in &settings.urls {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let delivery = Delivery {
                client: client.clone(),
                url: url.clone(),
                signature: signature(&settings.secret, &body),
                body: body.clone(),
                event: event.event.clone(),
                id: event.delivery.clone(),
            };
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = delivery.run() => {}
                }
                drop(slot);
            });
        }
    }
}

/// One event on its way to one receiver.
struct Delivery {
    client: reqwest::Client,
    url: reqwest::Url,
    body: Arc<Vec<u8>>,
    signature: String,
    event: String,
    id: String,
}

impl Delivery {
    /// Tries until the receiver answers 2xx, [`ATTEMPTS`] times at most, waiting 1 s, 2 s,
    /// 4 s ... between tries.
    async fn run(self) {
        let mut wait = Duration::from_secs(1);
        for attempt in 1..=ATTEMPTS {
            match self.try_once().await {
                Ok(()) => {
                    tracing::info!(url = %self.url, delivery = %self.id, attempt, "webhook delivered");
                    return;
                }
                Err(why) if attempt < ATTEMPTS => {
                    tracing::debug!(url = %self.url, delivery = %self.id, attempt, %why, "webhook refused; trying again");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                Err(why) => {
                    tracing::warn!(url = %self.url, delivery = %self.id, attempts = ATTEMPTS, %why, "webhook not delivered; giving up");
                }
            }
        }
    }

    /// One POST; the receiver's status when it is not 2xx, or why there was none.
    async fn try_once(&self) -> Result<(), String> {
        let answer = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Sweep-Event", &self.event)
            .header("X-Sweep-Delivery", &self.id)
            .header("X-Sweep-Signature", &self.signature)
            .body(self.body.as_ref().clone())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if answer.status().is_success() {
            Ok(())
        } else {
            Err(format!("answered {}", answer.status()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231s_hmac_sha256() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn settings_name_the_flag_they_refuse() {
        let err = |urls: &[&str], secret: Option<&str>| {
            let urls: Vec<String> = urls.iter().map(|u| u.to_string()).collect();
            WebhookSettings::parse(&urls, secret.map(str::to_string))
                .unwrap_err()
                .to_string()
        };
        assert!(err(&["ftp://x/"], Some("k")).contains("--webhook `ftp://x/`"));
        assert!(err(&["not a url"], Some("k")).contains("not a URL"));
        assert!(err(&["http://x/hook"], None).contains("--webhook-secret"));
        let ok = WebhookSettings::parse(&["https://x/hook".into()], Some("s3cr3t".into())).unwrap();
        assert_eq!(ok.urls.len(), 1);
        assert!(
            !format!("{ok:?}").contains("s3cr3t"),
            "the secret is never printed"
        );
        assert!(WebhookSettings::parse(&[], None).unwrap().urls.is_empty());
    }
}
