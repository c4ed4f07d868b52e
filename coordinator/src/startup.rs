//! Building and running the coordinator: load the catalog, open the database, bind, serve.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::catalog::{self, Catalog, CatalogSuite};
use crate::config::CoordinatorConfig;
use crate::database::{self, Database};
use crate::http;
use crate::server::{self, Listener};
use crate::service::{Options, Service};
use crate::store::Store;
use crate::webhooks::{WebhookSettings, Webhooks};

/// A coordinator bound to its port, ready to serve.
pub struct Application {
    listeners: Vec<Listener>,
    addr: SocketAddr,
    https: bool,
    service: Service,
    bounds: server::Bounds,
    header_timeout: std::time::Duration,
    webhooks: WebhookSettings,
    retention: Option<crate::service::RetentionSettings>,
}

impl Application {
    /// Opens the database (Postgres, or SQLite for a file path; migrations applied), loads engines
    /// and suites, binds the port.
    pub async fn build(config: CoordinatorConfig) -> anyhow::Result<Self> {
        let db = database::connect(&config.database_url).await?;
        Self::build_with_database(config, db).await
    }

    /// As [`Application::build`], with a database opened by the caller.
    pub async fn build_with_database(
        config: CoordinatorConfig,
        db: Database,
    ) -> anyhow::Result<Self> {
        let catalog = load_catalog(&config, db.store.as_ref()).await?;
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let addr = listener.local_addr()?;
        let https = config.tls.is_some();
        tracing::info!(%addr, https, engines = catalog.engines.len(), suites = catalog.suites.len(), "coordinator listening");
        Ok(Self {
            listeners: vec![Listener {
                tcp: listener,
                tls: config.tls.as_ref().map(|t| t.acceptor()),
            }],
            addr,
            https,
            bounds: server::Bounds {
                max_in_flight: config.max_in_flight,
                body_timeout: config.body_timeout,
            },
            header_timeout: config.header_timeout,
            webhooks: config.webhooks.clone(),
            retention: config.retention.clone(),
            service: Service::with_options(
                db,
                Arc::new(catalog),
                Options {
                    leases: config.leases,
                    public_read: config.public_read,
                    max_reads: config.max_reads,
                    max_workers_per_token: config.max_workers_per_token,
                    git: config.git.clone(),
                    approve_over_engine_hours: config.approve_over_engine_hours,
                    high_priority_for: config.high_priority_for.clone(),
                },
            ),
        })
    }

    /// The bound address (useful with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The base URL of the bound address: `https://ADDR` when TLS is on, else `http://ADDR`.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Also serves plain HTTP on a free loopback port, and returns its URL: for a worker in
    /// the same process (`sweep run --serve` with TLS), which has no certificate to check the
    /// public address against. The in-flight bound is shared with the main port.
    pub async fn add_loopback_listener(&mut self) -> anyhow::Result<String> {
        let tcp = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("binding a loopback port")?;
        let url = format!("http://{}", tcp.local_addr()?);
        self.listeners.push(Listener { tcp, tls: None });
        Ok(url)
    }

    /// The service behind the routes (for in-process use).
    pub fn service(&self) -> &Service {
        &self.service
    }

    /// Serves until `shutdown` is cancelled, then lets in-flight requests finish (see
    /// [`server`] for the bounds it serves under).
    /// Meanwhile it makes the tables of sweeps as they finish, so their first read is quick,
    /// announces sweeps that end to the webhooks, takes engines other coordinators on the
    /// same database added, adds the next stage of staged sweeps as a stage finishes, and
    /// archives and deletes sweeps past their keep (`retention`).
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let service = self.service.clone();
        let warm = {
            let service = self.service.clone();
            let stop = shutdown.clone();
            tokio::spawn(async move { service.reads().keep_tables_warm(stop).await })
        };
        let engines = {
            let service = self.service.clone();
            let stop = shutdown.clone();
            tokio::spawn(async move { service.submissions().follow_stored_engines(stop).await })
        };
        let announce = {
            let service = self.service.clone();
            let stop = shutdown.clone();
            let sink = Arc::new(Webhooks::start(self.webhooks, stop.clone()));
            tokio::spawn(async move { service.announce_ended_sweeps(sink, stop).await })
        };
        let stages = {
            let service = self.service.clone();
            let stop = shutdown.clone();
            tokio::spawn(async move { service.add_stages_as_they_finish(stop).await })
        };
        let retention = self.retention.map(|settings| {
            let service = self.service.clone();
            let stop = shutdown.clone();
            tokio::spawn(async move { service.let_go_of_old_sweeps(settings, stop).await })
        });
        let app = server::bounded(http::router(self.service), self.bounds);
        let app = http::authenticated(app, service.clone());
        let app = http::timed(app, service);
        let served = server::serve(self.listeners, app, self.header_timeout, shutdown).await;
        // It returns at once once `shutdown` fires; a table being made is abandoned.
        warm.abort();
        announce.abort();
        engines.abort();
        stages.abort();
        if let Some(r) = retention {
            r.abort();
        }
        served
    }
}

async fn load_catalog(config: &CoordinatorConfig, store: &dyn Store) -> anyhow::Result<Catalog> {
    // A bad file is skipped (and logged) inside; only an unreadable directory stops us.
    let mut engines = catalog::load_engines(&config.engines_dir)?.engines;
    let stored = store
        .engines()
        .await
        .context("reading the engine definitions stored in the database")?;
    catalog::merge_stored(&mut engines, &stored);
    let mut suites = std::collections::BTreeMap::new();
    for suite in catalog::load_suites(&config.suites_dir)? {
        let id = store
            .put_suite(&suite)
            .await
            .with_context(|| format!("storing suite {}", suite.name))?;
        suites.insert(suite.name.clone(), CatalogSuite { id, suite });
    }
    Ok(Catalog { engines, suites })
}
