//! What the build reads: git repositories (commits, their diffs, the files at HEAD) and the
//! text inside them (code chunked by tree-sitter, markdown by heading, references in prose).

pub mod code;
pub(crate) mod diff;
pub(crate) mod git;
pub(crate) mod markdown;
pub(crate) mod message;
pub(crate) mod refs;
pub(crate) mod shas;
pub mod tags;
pub(crate) mod tree;
