//! Sweep's pure domain: everything that can be decided without I/O.
//!
//! Data flows one way through these modules: an [`engine::EngineDef`] and the loaded
//! [`epd::Suite`]s validate a [`spec::SweepConfig`] into a [`spec::SweepSpec`]; [`plan`] expands
//! it into builds x suites x chunks; workers exchange [`wire`] types with the coordinator; and
//! [`table`] turns stored results into delta tables, and [`derive`] into sub-suites. Nothing here touches the network, the disk
//! or a clock, so every rule is unit-tested beside its code.

#![warn(missing_docs)]

pub mod auth;
pub mod bounds;
pub mod build;
pub mod crosscheck;
pub mod decode;
pub mod derive;
pub mod engine;
pub mod epd;
pub mod error;
pub mod limit;
pub mod plan;
pub mod provenance;
pub mod reuse;
pub mod schema;
pub mod source;
pub mod spec;
pub mod stats;
pub mod table;
pub mod wire;

pub use error::FieldError;
