//! The stage commands a workflow runs (crawl and embed per shard, one publish) give the same
//! rows and vectors as one `build`; publish refuses a staged segment that fails verification;
//! the index workflow's own steps run as written.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use hubdex_formats::{Store, read_rows};
use hubdex_indexer::{BuildOptions, Shard, build, crawl, embed, publish};

use crate::fixture::runtime;

/// Runs git in `repo`.
fn git(repo: &std::path::Path, args: &[&str]) {
    assert!(Command::new("git").arg("-C").arg(repo).args(args).status().unwrap().success());
}

/// Three repositories under one directory.
fn repos(dir: &std::path::Path) -> PathBuf {
    let root = dir.join("src");
    for name in ["alpha", "beta", "gamma"] {
        hubdex_tests::make_repo(&root.join(name));
        std::fs::write(
            root.join(name).join("NAME.md"),
            format!("# {name}\n\nThe {name} project.\n"),
        )
        .unwrap();
        let repo = root.join(name);
        git(&repo, &["add", "."]);
        git(
            &repo,
            &[
                "-c",
                "user.name=T",
                "-c",
                "user.email=t@e",
                "commit",
                "-q",
                "-m",
                &format!("Name the {name} project"),
            ],
        );
    }
    root
}

fn opts(store: &std::path::Path, src: &std::path::Path) -> BuildOptions {
    let mut o = BuildOptions::new(
        store.to_str().unwrap(),
        hubdex_tests::model_dir(),
        vec![src.to_path_buf()],
    );
    o.cache = store.with_extension("cache");
    o
}

/// repo → (id, content hash, embedding) of every row in the store's current snapshot.
pub(crate) fn snapshot_rows(
    store: &std::path::Path,
) -> BTreeMap<String, Vec<(String, String, Vec<i8>)>> {
    runtime().block_on(async {
        let s = Store::open(store.to_str().unwrap()).unwrap();
        let m = s.latest_manifest().await.unwrap();
        let cache = tempfile::tempdir().unwrap();
        let mut out = BTreeMap::new();
        for seg in &m.segments {
            let dir = s.fetch_segment(seg, cache.path()).await.unwrap();
            let rows = read_rows(&dir.join("rows.parquet"), true).unwrap();
            out.insert(
                seg.repo.clone(),
                rows.into_iter().map(|r| (r.id, r.content_sha256, r.embedding)).collect(),
            );
        }
        out
    })
}

#[test]
fn two_shards_through_the_stage_commands_equal_one_build() {
    let dir = tempfile::tempdir().unwrap();
    let src = repos(dir.path());
    let one = dir.path().join("one");
    let staged = dir.path().join("staged");
    runtime().block_on(build(&opts(&one, &src))).unwrap();
    let o = opts(&staged, &src);
    let shards: Vec<Shard> = vec!["1/2".parse().unwrap(), "2/2".parse().unwrap()];
    runtime().block_on(async {
        let mut crawled = Vec::new();
        for s in &shards {
            crawled.extend(crawl(&o, "run-1", *s).await.unwrap().repos);
        }
        crawled.sort();
        assert_eq!(
            crawled,
            vec!["local/alpha", "local/beta", "local/gamma"],
            "every repo in exactly one shard"
        );
        for s in &shards {
            embed(&o, "run-1", *s).await.unwrap();
        }
        let r = publish(&o, "run-1").await.unwrap();
        assert!(r.published);
        assert!(
            Store::open(staged.to_str().unwrap())
                .unwrap()
                .list("staging")
                .await
                .unwrap()
                .is_empty(),
            "staging is cleaned up"
        );
    });
    assert_eq!(snapshot_rows(&staged), snapshot_rows(&one), "same rows and vectors as one build");
    // The manifest's build figures are those of the one-process build (timings aside).
    let stats = |store: &std::path::Path| {
        let m = runtime()
            .block_on(Store::open(store.to_str().unwrap()).unwrap().current_manifest())
            .unwrap()
            .expect("a snapshot");
        (m.build.rows, m.build.embedded, m.build.reused, m.build.embed_seconds > 0.0)
    };
    let (one_stats, staged_stats) = (stats(&one), stats(&staged));
    assert!(one_stats.1 > 0, "the one build embedded rows: {one_stats:?}");
    assert_eq!(staged_stats, one_stats, "staged (rows, embedded, reused, timed) = one build's");
}

#[test]
fn publish_refuses_a_staged_segment_that_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    let src = repos(dir.path());
    let store = dir.path().join("store");
    let o = opts(&store, &src);
    let first = runtime().block_on(build(&o)).unwrap();
    std::fs::write(src.join("alpha").join("MORE.md"), "# More\n\nAnother page.\n").unwrap();
    let alpha = src.join("alpha");
    git(&alpha, &["add", "."]);
    git(&alpha, &["-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "-m", "More pages"]);
    runtime().block_on(async {
        crawl(&o, "run-2", Shard::ALL).await.unwrap();
        embed(&o, "run-2", Shard::ALL).await.unwrap();
        // Corrupt the new alpha segment after it was staged.
        let s = Store::open(store.to_str().unwrap()).unwrap();
        let entry: hubdex_formats::ManifestSegment = serde_json::from_slice(
            &s.get_opt("staging/run-2/segments/local__alpha.json").await.unwrap().unwrap(),
        )
        .unwrap();
        let target = store.join("segments").join(&entry.id).join("rows.parquet");
        let mut bytes = std::fs::read(&target).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&target, bytes).unwrap();
        let err = publish(&o, "run-2").await.unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("failed verification") && msg.contains("rows.parquet"), "{msg}");
        assert_eq!(
            s.latest().await.unwrap().unwrap().snapshot,
            first.snapshot,
            "LATEST did not move"
        );
        // The run never published: its staged records stay until gc finds them older than
        // the grace period, then go with the segment only they named.
        let grace = chrono::Duration::hours(1);
        let young = hubdex_indexer::gc(&s, 5, grace, chrono::Utc::now()).await.unwrap();
        assert_eq!(young.young_staged_runs, ["run-2"], "{young:?}");
        assert!(young.deleted_staged_runs.is_empty() && young.deleted_segments.is_empty());
        assert!(!s.list("staging/run-2").await.unwrap().is_empty());
        let later = chrono::Utc::now() + chrono::Duration::hours(2);
        let old = hubdex_indexer::gc(&s, 5, grace, later).await.unwrap();
        assert_eq!(old.deleted_staged_runs, ["run-2"], "{old:?}");
        assert!(old.deleted_segments.contains(&entry.id), "{old:?}");
        assert!(s.list("staging").await.unwrap().is_empty());
        assert_eq!(s.latest().await.unwrap().unwrap().snapshot, first.snapshot);
        assert!(s.verified_latest().await.is_ok(), "the snapshot keeps every file it names");
    });
}

/// What a workflow expression (the inside of `${{ … }}`) gives, with `context` holding the
/// names that have a value (`vars.X`, `matrix.shard`, `github.run_id`): its first `||`
/// alternative that has a value or is a quoted literal, else "". An `a && 'x'` alternative
/// counts only when `a` has a value; any other name outside `vars.`, `inputs.` and
/// `secrets.` (which are simply undefined here) is one this test does not know, and fails it.
fn evaluate(expr: &str, context: &BTreeMap<String, String>) -> String {
    let value = |name: &str| -> Option<String> {
        let name = name.trim();
        if let Some(literal) = name.strip_prefix('\'').and_then(|n| n.strip_suffix('\'')) {
            return Some(literal.to_string());
        }
        if let Some(v) = context.get(name) {
            return Some(v.clone()).filter(|v| !v.is_empty());
        }
        let undefined = ["vars.", "inputs.", "secrets."].iter().any(|p| name.starts_with(p));
        assert!(undefined, "the workflow uses ${{{{ {name} }}}}, which this test does not set");
        None
    };
    for alternative in expr.split("||") {
        let found = match alternative.split_once("&&") {
            Some((condition, then)) => value(condition).and_then(|_| value(then)),
            None => value(alternative),
        };
        if let Some(v) = found {
            return v;
        }
    }
    String::new()
}

/// `text` with every `${{ … }}` evaluated.
fn substitute(text: &str, context: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let end = rest[start..].find("}}").expect("a closed expression") + start;
        out.push_str(&rest[..start]);
        out.push_str(&evaluate(&rest[start + 3..end], context));
        rest = &rest[end + 2..];
    }
    out + rest
}

/// A step's or the workflow's `env:`, evaluated.
fn env_of(node: &yaml_rust2::Yaml, context: &BTreeMap<String, String>) -> Vec<(String, String)> {
    node.as_hash()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let value = v.as_str().map(str::to_string).or(v.as_i64().map(|n| n.to_string()));
            (k.as_str().unwrap().to_string(), substitute(&value.unwrap(), context))
        })
        .collect()
}

/// Runs the steps of `jobs` in .github/workflows/index.yml that run hubdex-index, in order and
/// once for each value of a job's `matrix.shard`, as GitHub's runner would: each `run:` script
/// through `bash -eo pipefail` in `workdir` (where `hubdex/bin/hubdex-index` is this build's
/// binary and `hubdex.toml` the config), with the workflow's and the step's `env:`. `vars` are
/// the repository variables defined. Returns (subcommand, stderr) of each step, in order.
fn run_workflow(
    workdir: &std::path::Path,
    jobs: &[&str],
    run_id: &str,
    vars: &[(&str, &str)],
) -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../.github/workflows/index.yml");
    let text = std::fs::read_to_string(path).unwrap();
    let workflow = yaml_rust2::YamlLoader::load_from_str(&text).unwrap().remove(0);
    let mut context: BTreeMap<String, String> =
        vars.iter().map(|(k, v)| (format!("vars.{k}"), v.to_string())).collect();
    context.insert("github.run_id".into(), run_id.into());
    let runtime_library = hubdex_runtime::runtime_library_path();
    let mut ran = Vec::new();
    for job in jobs {
        let job = &workflow["jobs"][*job];
        let shards: Vec<String> = match job["strategy"]["matrix"]["shard"].as_vec() {
            Some(shards) => shards.iter().map(|s| s.as_i64().unwrap().to_string()).collect(),
            None => vec![String::new()],
        };
        for shard in shards {
            context.insert("matrix.shard".into(), shard);
            for step in job["steps"].as_vec().unwrap() {
                let Some(script) = step["run"].as_str() else { continue };
                if !script.contains("hubdex/bin/hubdex-index") {
                    continue;
                }
                let script = substitute(script, &context);
                let out = Command::new("bash")
                    .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
                    .current_dir(workdir)
                    .env("HUBDEX_CACHE", workdir.join("cache"))
                    .env("ORT_DYLIB_PATH", &runtime_library)
                    .envs(env_of(&workflow["env"], &context))
                    .envs(env_of(&step["env"], &context))
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
                assert!(out.status.success(), "{script}\n{stderr}");
                let subcommand = script.split("hubdex/bin/hubdex-index ").nth(1).unwrap();
                ran.push((subcommand.split(' ').next().unwrap().to_string(), stderr));
            }
        }
    }
    ran
}

/// The index workflow's hubdex-index steps, run as written (`run_workflow`), with no
/// repository variable defined (each is then an empty string, which must leave hubdex.toml's
/// store and the default budget in force), publish what one build publishes and leave nothing
/// staged; its gc step then keeps that snapshot. A second run with variables defined (a small
/// budget, keep one snapshot, no grace period) after a run whose publish never came deletes
/// the first snapshot and the abandoned run's staged rows.
#[test]
fn the_index_workflow_s_steps_run_as_written_and_collect_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let src = repos(dir.path());
    let one = dir.path().join("one");
    runtime().block_on(build(&opts(&one, &src))).unwrap();
    let workdir = dir.path().join("checkout");
    let store = dir.path().join("store");
    std::fs::create_dir_all(workdir.join("hubdex/bin")).unwrap();
    std::os::unix::fs::symlink(
        hubdex_tests::bin("hubdex-index"),
        workdir.join("hubdex/bin/hubdex-index"),
    )
    .unwrap();
    let repos: String = ["alpha", "beta", "gamma"]
        .iter()
        .map(|n| format!("[[repos]]\nname = {:?}\n", src.join(n).display().to_string()))
        .collect();
    std::fs::write(
        workdir.join("hubdex.toml"),
        format!(
            "store = {:?}\nmodel = {:?}\n{repos}",
            store.display().to_string(),
            hubdex_tests::model_dir().display().to_string()
        ),
    )
    .unwrap();

    let first = run_workflow(&workdir, &["crawl", "embed", "publish"], "101", &[]);
    let steps: Vec<&str> = first.iter().map(|(s, _)| s.as_str()).collect();
    let expected = ["crawl"; 4].into_iter().chain(["embed"; 4]).chain(["publish", "gc"]);
    assert_eq!(steps, expected.collect::<Vec<_>>(), "four shards crawled and embedded");
    assert_eq!(snapshot_rows(&store), snapshot_rows(&one), "same rows and vectors as one build");
    let gc = &first.last().unwrap().1;
    assert!(gc.contains("kept 1 snapshots; deleted 0 snapshots"), "{gc}");
    let s = Store::open(store.to_str().unwrap()).unwrap();
    let latest = || runtime().block_on(s.latest()).unwrap().unwrap().snapshot;
    let first_snapshot = latest();
    assert!(runtime().block_on(s.list("staging")).unwrap().is_empty(), "nothing staged");

    // A run whose embed job never ran (cancelled): its crawl's staged rows stay.
    run_workflow(&workdir, &["crawl"], "102", &[]);
    assert!(!runtime().block_on(s.list("staging/102")).unwrap().is_empty());
    std::fs::write(src.join("alpha").join("MORE.md"), "# More\n\nAnother page.\n").unwrap();
    git(&src.join("alpha"), &["add", "."]);
    git(
        &src.join("alpha"),
        &["-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "-m", "More"],
    );
    let vars =
        [("HUBDEX_MEMORY_BUDGET", "512MiB"), ("HUBDEX_GC_KEEP", "1"), ("HUBDEX_GC_GRACE", "0s")];
    let second = run_workflow(&workdir, &["crawl", "embed", "publish"], "103", &vars);
    assert_ne!(latest(), first_snapshot, "the new commit was published");
    let gc = &second.last().unwrap().1;
    assert!(gc.contains("kept 1 snapshots; deleted 1 snapshots"), "{gc}");
    assert!(gc.contains("and 1 staged runs"), "the cancelled run's: {gc}");
    assert!(runtime().block_on(s.list("staging")).unwrap().is_empty(), "nothing staged");
    assert!(runtime().block_on(s.verified_latest()).is_ok(), "the snapshot keeps every file");
}
