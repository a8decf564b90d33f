#![warn(missing_docs)]
//! hubdex-indexer: crawl sources into rows, embed them, write segments and publish snapshots.
//!
//! The binary `hubdex-index` is a thin CLI over [`build()`].

mod budget;
mod build;
pub mod code;
mod config;
mod diff;
mod edges;
mod embed_bench;
mod git;
pub mod github;
mod history;
mod lifecycle;
mod local;
mod markdown;
mod message;
mod progress;
mod refs;
mod scratch;
mod shas;
mod spans;
mod spill;
mod stages;
mod tree;

pub use budget::{DEFAULT_MEMORY_BUDGET, MemoryBudget, parse_size};
pub use build::{BuildOptions, BuildReport, build, build_with};
pub use config::{CODE_SKIP_GLOBS, CodeRules, Config, RepoConfig, RepoRules};
pub use diff::{DIFF_MAX_LINES, cut_diff};
pub use embed_bench::{EmbedBenchReport, embed_bench, embed_bench_corpus};
pub use git::GitError;
pub use lifecycle::{DeltaReport, GcReport, delta, gc, parse_duration};
pub use markdown::{MdChunk, chunk_markdown};
pub use refs::find_refs;
pub use stages::{CrawlReport, Shard, crawl, crawl_with, embed, embed_with, publish};
