//! The multi-host harness: tfdata's dispatcher, workers and readers as
//! separate hosts (network namespaces on one switch) inside a private
//! sandbox, with links to cut and a delay proxy. See docs/multi-host-tests.md.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)] // test code

pub mod cluster;
pub mod delay_proxy;
pub mod network;
#[path = "../../../tfdata-dataset/tests/optional_tool/mod.rs"]
pub mod optional_tool;
pub mod sandbox;
