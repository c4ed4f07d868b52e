//! A coordinator running inside the test process, for tests that call its service directly or
//! tune its configuration beyond what the command line offers.

use sweep_coordinator::service::Service;
use sweep_coordinator::{Application, CoordinatorConfig};
use tokio_util::sync::CancellationToken;

use super::{register_tokens, repo, service_tokens};

/// A coordinator served from this process, told to stop when dropped.
pub struct InProcess<D = ()> {
    /// Its base URL (`http://ADDR`, or `https://ADDR` when configured with TLS).
    pub base: String,
    /// Its service.
    pub service: Service,
    /// What it runs on and what must outlive it (e.g. its [`super::TestDb`]): dropped after
    /// the coordinator is told to stop.
    pub db: D,
    stop: CancellationToken,
}

impl<D> Drop for InProcess<D> {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A configuration for `database_url` on a free loopback port, with the repository's engines
/// and suites.
pub fn coordinator_config(database_url: &str) -> CoordinatorConfig {
    let mut config = CoordinatorConfig::new(database_url, "127.0.0.1:0".parse().unwrap());
    config.engines_dir = repo().join("configs/engines");
    config.suites_dir = repo().join("suites");
    config
}

impl<D> InProcess<D> {
    /// Builds `config`'s coordinator and serves it until dropped; `db` is kept with it.
    pub async fn start(config: CoordinatorConfig, db: D) -> Self {
        let app = Application::build(config)
            .await
            .expect("coordinator builds");
        let base = app.url();
        let service = app.service().clone();
        let stop = CancellationToken::new();
        tokio::spawn(app.run_until_stopped(stop.clone()));
        Self {
            base,
            service,
            db,
            stop,
        }
    }

    /// [`InProcess::start`], with an admin and a worker token registered for its URL (see
    /// [`register_tokens`]) so the request helpers authenticate.
    pub async fn start_with_tokens(config: CoordinatorConfig, db: D) -> Self {
        let coord = Self::start(config, db).await;
        register_tokens(&coord.base, service_tokens(&coord.service).await);
        coord
    }
}
