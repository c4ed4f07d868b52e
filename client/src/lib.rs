//! How a program talks to a coordinator over HTTP, written once for the CLI's commands and the
//! worker, so that both trust the same servers, read a refusal the same way and come back
//! as politely after a failure.
//!
//! [`trust`] makes every HTTP client (which certificates an `https://` coordinator is checked
//! against); [`ClientError`] is what a failed call means to its caller (drop the work, ask
//! again later, give up), read from the answer by [`classify_response`] or from a request that
//! got none by [`transport_error`]; [`Backoff`], [`with_retry`] and [`sleep_or_cancel`] are
//! when to ask again; [`send`] and [`send_json`] send one request and read its whole answer,
//! with the token [`bearer_headers`] makes. What to ask is the caller's business: the
//! worker's protocol calls live in the worker, the API's in the CLI.

#![warn(missing_docs)]

mod error;
mod request;
mod retry;
pub mod trust;

pub use error::{classify_response, classify_status, transport_error, ClientError};
pub use request::{bearer_headers, send, send_json, BadToken};
pub use retry::{sleep_or_cancel, with_retry, Backoff};
