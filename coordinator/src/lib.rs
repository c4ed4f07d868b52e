//! The Sweep coordinator: accepts sweeps over HTTP, plans them into jobs, leases jobs to
//! workers, keeps every result, and serves delta tables.
//!
//! Layout: [`startup`] wires the pieces; [`http`] holds thin route adapters; [`service`] the
//! use cases; [`store`] all persistence, as rows and SQL; [`queue`] the worker protocol's
//! engine over the store's rows; [`database`] opens both over one database; [`catalog`] and [`snapshot`] the engines, suites and
//! source archives, [`git`] git sources; [`metrics`] what `/metrics` shows; [`server`] serves with bounds, over HTTPS when [`tls`] has a certificate.

#![warn(missing_docs)]

pub mod catalog;
pub mod config;
pub mod database;
pub mod git;
pub mod http;
pub mod metrics;
pub mod queue;
pub mod server;
pub mod service;
pub mod snapshot;
pub mod startup;
pub mod store;
pub mod tls;
pub mod transfer;
pub mod webhooks;

pub use config::CoordinatorConfig;
pub use startup::Application;
