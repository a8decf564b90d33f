//! One generated repository and one store built from it, shared by the tests of this binary.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use hubdex_formats::Store;
use hubdex_indexer::{BuildOptions, BuildReport, build};
use hubdex_runtime::{Device, Embedder};
use hubdex_server::{AppState, default_cache, open_snapshot};
use hubdex_tests::{GeneratedRepo, make_repo, model_dir};

/// The shared fixture.
pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) repo: GeneratedRepo,
    pub(crate) store: PathBuf,
    pub(crate) first: BuildReport,
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

pub(crate) fn options(store: &Path, source: &Path) -> BuildOptions {
    let mut o =
        BuildOptions::new(&store.display().to_string(), model_dir(), vec![source.to_path_buf()]);
    o.cache = store.with_extension("cache");
    o
}

/// Builds the fixture once per test binary.
pub(crate) fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = make_repo(&dir.path().join("widgets"));
        let store = dir.path().join("store");
        // On a thread of its own: a test may first ask for the fixture from inside its runtime.
        let first = std::thread::scope(|s| {
            s.spawn(|| runtime().block_on(build(&options(&store, &repo.dir)))).join()
        })
        .expect("the first build's thread")
        .expect("first build");
        Fixture { _dir: dir, repo, store, first }
    })
}

/// Server state over the fixture's store, as `hubdex serve` would hold it.
pub(crate) async fn state(store: &Path) -> Arc<AppState> {
    let store = Store::open(&store.display().to_string()).expect("open store");
    let cache = tempfile::tempdir().expect("cache dir").keep();
    let _ = default_cache;
    let snap = open_snapshot(&store, &cache, None).await.expect("open snapshot");
    let embedder = Embedder::load(&model_dir(), Device::Cpu).expect("load model");
    Arc::new(AppState::new(store, cache, snap, Arc::new(embedder)))
}

/// A caller holding a scoped token: `repos` (globs) and `types` (none: every type).
pub(crate) fn scoped_caller(
    name: &str,
    repos: &[&str],
    types: &[hubdex_formats::RowType],
) -> hubdex_server::Caller {
    let repos: Vec<String> = repos.iter().map(|r| r.to_string()).collect();
    hubdex_server::Caller {
        name: name.into(),
        kind: hubdex_server::CallerKind::ScopedToken,
        scope: Some(hubdex_formats::Scope::new(&repos, types).unwrap()),
    }
}
