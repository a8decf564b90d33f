//! End-to-end tests across hubdex's crates and binaries. Modules by feature.

mod access;
mod answers;
mod bad_input;
mod budget;
mod build;
mod conformance;
mod docs;
mod fixture;
mod github;
mod golden;
mod grep;
mod http;
mod lifecycle;
mod mcp_clients;
mod parquet_readers;
mod pickaxe;
mod quality;
mod registry;
mod related;
mod reliability;
mod security;
mod serving;
mod stages;
mod telemetry;
