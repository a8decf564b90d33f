#![warn(missing_docs)]
//! hubdex-indexer: crawl sources into rows, embed them, write segments and publish snapshots.
//!
//! The binary `hubdex-index` is a thin CLI over [`build()`].

mod config;
mod embed_bench;
pub mod github;
mod graph;
mod local;
mod pipeline;
mod progress;
pub mod sources;
mod temp;

pub use config::{
    CodeRules, Config, GENERATED_GLOBS, RepoConfig, RepoRules, VENDORED_GLOBS, code_skip_globs,
};
pub use embed_bench::{EmbedBenchReport, embed_bench, embed_bench_corpus};
pub use pipeline::budget::{DEFAULT_MEMORY_BUDGET, MemoryBudget, parse_size};
pub use pipeline::build::{BuildOptions, BuildReport, build, build_with};
pub use pipeline::lifecycle::{DeltaReport, GcReport, delta, gc, parse_duration};
pub use pipeline::stages::{CrawlReport, Shard, crawl, crawl_with, embed, embed_with, publish};
pub use sources::diff::{DIFF_MAX_LINES, cut_diff};
pub use sources::git::GitError;
pub use sources::markdown::{MdChunk, chunk_markdown};
pub use sources::refs::find_refs;
pub use sources::tags::symbols_of;
