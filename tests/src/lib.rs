//! Helpers shared by hubdex's end-to-end tests: where the binaries, the model and the Python
//! tools are, and a generator of git repositories with a known history.

pub mod fakegh;
pub mod ghdata;
mod gitrepo;
mod paths;
pub mod synth;

pub use gitrepo::{
    CODE_FILES, GeneratedRepo, KNOWN_SUBJECT, LATE_FUNCTION, PARAPHRASES, make_code_repo,
    make_long_diff_repo, make_near_duplicate_repo, make_repo,
};
pub use paths::{
    bin, environment, free_port, model_dir, node_dir, python, resaved_model, wait_for_http,
};
pub use synth::{
    HashEmbedder, Mix, add_commit, add_commit_at, synthetic_history,
    synthetic_history_with_references,
};
