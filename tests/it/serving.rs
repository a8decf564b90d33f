//! The format-3 serving layout: filters compiled into the index accept exactly the rows the
//! reference filter accepts; a merged segment serves the same rows as its members; a hot swap
//! opens only the segments that changed, and a pinned snapshot shares the current one's.

use std::sync::Arc;

use chrono::{Duration, Utc};
use globset::Glob;
use hubdex_formats::{
    BuildStats, FORMAT_VERSION, Manifest, ManifestSegment, MergeIndexes, MergeProgress,
    ModelIdentity, Row, RowFilter, RowType, Scope, Segment, SegmentExtras, Store, read_rows,
    write_merged_segment, write_segment,
};
use hubdex_runtime::{Device, Embedder};
use hubdex_server::{AppState, OpenSnapshot, open_snapshot};
use hubdex_tests::{make_code_repo, model_dir};
use serde_json::json;

use crate::fixture::{fixture, options, runtime, state};

fn check(snap: &OpenSnapshot, name: &str, filter: &RowFilter) {
    for seg in &snap.segments {
        let rows = seg.text.rows().unwrap();
        let want: Vec<usize> =
            rows.iter().enumerate().filter(|(_, r)| filter.matches(r)).map(|(i, _)| i).collect();
        // No query: the filter excludes nothing here (a scope that allows the whole segment).
        let got: Vec<usize> = match seg.text.compile(filter).unwrap() {
            Some(compiled) => {
                let bits = seg.text.filter_bits(&compiled).unwrap();
                assert_eq!(bits.count() as usize, want.len(), "{name}");
                (0..rows.len()).filter(|&i| bits.contains(i as u64)).collect()
            }
            None => (0..rows.len()).collect(),
        };
        assert_eq!(got, want, "{name}: the index and the reference disagree");
        let unmatched = seg.text.unmatched(filter).unwrap();
        if !want.is_empty() {
            assert!(unmatched.is_empty(), "{name}: {unmatched:?}");
        }
    }
}

fn scope(repos: &[&str], types: &[RowType]) -> Option<Scope> {
    let repos: Vec<String> = repos.iter().map(|r| r.to_string()).collect();
    Some(Scope::new(&repos, types).unwrap())
}

#[test]
fn compiled_filters_accept_exactly_the_rows_the_reference_filter_accepts() {
    let f = fixture();
    runtime().block_on(async {
        let st = state(&f.store).await;
        let snap = st.current.load_full();
        let rows = snap.segments[0].text.rows().unwrap();
        let some_author = rows.iter().find_map(|r| r.author.clone()).unwrap();
        let some_path = rows.iter().find_map(|r| r.path.clone()).unwrap();
        let newest = rows.iter().filter_map(|r| r.updated_at).max().unwrap();
        let glob = |g: &str| Some(hubdex_formats::glob_matcher(Glob::new(g).unwrap()).unwrap());
        let cases: Vec<(&str, RowFilter)> = vec![
            ("type commit", RowFilter { types: vec![RowType::Commit], ..Default::default() }),
            (
                "types doc+code",
                RowFilter { types: vec![RowType::Doc, RowType::Code], ..Default::default() },
            ),
            ("repo", RowFilter { repo: Some(rows[0].repo.clone()), ..Default::default() }),
            (
                "author upper",
                RowFilter { author: Some(some_author.to_uppercase()), ..Default::default() },
            ),
            (
                "path_prefix src/",
                RowFilter { path_prefix: Some("src/".into()), ..Default::default() },
            ),
            (
                "path_prefix exact path",
                RowFilter { path_prefix: Some(some_path.clone()), ..Default::default() },
            ),
            ("files_glob *.md", RowFilter { files_glob: glob("**/*.md"), ..Default::default() }),
            ("files_glob *.rs", RowFilter { files_glob: glob("*.rs"), ..Default::default() }),
            (
                "since 30 days",
                RowFilter { since: Some(newest - Duration::days(30)), ..Default::default() },
            ),
            ("until newest", RowFilter { until: Some(newest), ..Default::default() }),
            (
                "type + window",
                RowFilter {
                    types: vec![RowType::Commit],
                    since: Some(newest - Duration::days(400)),
                    until: Some(newest),
                    ..Default::default()
                },
            ),
            ("no such label", RowFilter { labels: vec!["nope".into()], ..Default::default() }),
            (
                "scope: its repository",
                RowFilter { scope: scope(&[&rows[0].repo], &[]), ..Default::default() },
            ),
            (
                "scope: a glob of it",
                RowFilter { scope: scope(&["LOCAL/*"], &[]), ..Default::default() },
            ),
            (
                "scope: another repository",
                RowFilter { scope: scope(&["acme/*"], &[]), ..Default::default() },
            ),
            (
                "scope: issues and commits, with a type filter",
                RowFilter {
                    types: vec![RowType::Commit, RowType::Doc],
                    scope: scope(&["*/*"], &[RowType::Issue, RowType::Commit]),
                    ..Default::default()
                },
            ),
        ];
        for (name, filter) in &cases {
            check(&snap, name, filter);
        }
        let none = RowFilter { labels: vec!["nope".into()], ..Default::default() };
        assert_eq!(snap.segments[0].text.unmatched(&none).unwrap(), ["labels"]);
    });
}

/// Writes `rows` as the build segment of `repo` (their repo and ids rewritten) in `work` and
/// uploads it to `store`.
async fn upload_as(
    store: &Store,
    work: &std::path::Path,
    repo: &str,
    rows: &[Row],
    model: &ModelIdentity,
) -> ManifestSegment {
    let mut rows: Vec<Row> = rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.id = hubdex_formats::row_id(r.kind(), repo, &r.id, 0);
            r.repo = repo.to_string();
            r
        })
        .collect();
    let dir = work.join(repo.replace('/', "_"));
    write_segment(&dir, repo, &mut rows, SegmentExtras::default(), model).unwrap();
    store.upload_segment(&dir, |_| {}).await.unwrap()
}

/// Writes one segment per repository from `rows` (their repo and ids rewritten) and publishes
/// a snapshot of them, each served by its own merged segment (a group of one).
async fn publish(
    store: &Store,
    parts: &[(&str, &[Row])],
    model: &Manifest,
    parent: Option<&str>,
) -> String {
    let work = tempfile::tempdir().unwrap();
    let (mut entries, mut merged) = (Vec::new(), Vec::new());
    for (repo, rows) in parts {
        entries.push(upload_as(store, work.path(), repo, rows, &model.model).await);
        // Each served by a merged segment of its own (a group of one), so a change to one
        // repository rewrites only its unit whatever the merge plan would group.
        let (cache, unit_work) = (work.path().join("cache"), work.path().join("units"));
        let group = std::slice::from_ref(entries.last().unwrap());
        let unit = store.merged_segment(group, &model.model, &cache, &unit_work);
        merged.push(unit.await.unwrap());
    }
    let n = store.snapshots().await.unwrap().len();
    let id = format!("20300101T0000{n:02}Z-serving{n}");
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        snapshot: id.clone(),
        created_at: Utc::now(),
        parent: parent.map(str::to_string),
        model: model.model.clone(),
        build: BuildStats::default(),
        segments: entries,
        merged,
        earlier_snapshots: None,
    };
    store.publish(&manifest, false).await.unwrap();
    id
}

#[test]
fn a_hot_swap_opens_only_the_changed_segment_and_a_pinned_snapshot_shares_the_rest() {
    let f = fixture();
    runtime().block_on(async {
        let src = Store::open(&f.store.display().to_string()).unwrap();
        let m = src.latest_manifest().await.unwrap();
        let cache = tempfile::tempdir().unwrap();
        let dir = src.fetch_segment(&m.segments[0], cache.path()).await.unwrap();
        // A local store's files enter the cache as verified copies, never links: a write in
        // place in the store cannot reach them.
        {
            use std::os::unix::fs::MetadataExt as _;
            let id = &m.segments[0].id;
            let stored = f.store.join("segments").join(id).join("rows.parquet");
            let cached = std::fs::metadata(dir.join("rows.parquet")).unwrap();
            assert_ne!(cached.ino(), std::fs::metadata(&stored).unwrap().ino());
            assert_eq!(
                std::fs::read(dir.join("rows.parquet")).unwrap(),
                std::fs::read(stored).unwrap()
            );
        }
        let rows = read_rows(&dir.join("rows.parquet"), true).unwrap();
        let (a, b) = rows.split_at(rows.len() / 2);

        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("store").display().to_string()).unwrap();
        let first = publish(&store, &[("o/a", a), ("o/b", b)], &m, None).await;
        let snap = open_snapshot(&store, &tmp.path().join("cache"), None).await.unwrap();
        let embedder = Embedder::load(&model_dir(), Device::Cpu).unwrap();
        let st = AppState::new(store, tmp.path().join("cache"), snap, Arc::new(embedder));
        assert_eq!(st.open.opened(), 2);

        // o/b changes; o/a does not.
        let second = publish(&st.store, &[("o/a", a), ("o/b", &b[1..])], &m, Some(&first)).await;
        assert_eq!(st.refresh().await, second);
        assert_eq!(st.open.opened(), 3, "only the changed segment was opened");
        assert!(
            st.metrics_text().contains("hubdex_segments_opened_total 3"),
            "{}",
            st.metrics_text()
        );

        let current = st.current.load_full();
        let pinned = st.snapshot(Some(&first)).await.unwrap();
        // Its own o/b is still among the recently used; o/a it shares with the current one.
        assert_eq!(st.open.opened(), 3, "pinning the first snapshot reopened nothing");
        let a_now = current.segments_of_repo("o/a")[0];
        let a_then = pinned.segments_of_repo("o/a")[0];
        assert!(Arc::ptr_eq(a_now, a_then), "one open copy of o/a serves both snapshots");
        let b_now = current.segments_of_repo("o/b")[0];
        let b_then = pinned.segments_of_repo("o/b")[0];
        assert!(!Arc::ptr_eq(b_now, b_then));
    });
}

#[test]
fn a_merged_segment_serves_the_same_rows_as_its_members() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("shop"), dir.path().join("widgets"));
    make_code_repo(&one);
    hubdex_tests::make_repo(&two);
    let store_dir = dir.path().join("store");
    let mut opts = options(&store_dir, &one);
    opts.sources.push(two.clone());
    runtime().block_on(async {
        hubdex_indexer::build(&opts).await.unwrap();
        let store = Store::open(&store_dir.display().to_string()).unwrap();
        let m = store.latest_manifest().await.unwrap();
        assert_eq!(m.segments.len(), 2);
        assert_eq!(m.merged.len(), 1, "two small repositories are served merged");
        assert_eq!(m.merged[0].members.len(), 2);

        let cache = dir.path().join("cache");
        let merged = open_snapshot(&store, &cache, None).await.unwrap();
        assert_eq!(merged.segments.len(), 1);
        // The same snapshot served by its members, each alone (a group of one).
        let mut members = Vec::new();
        for s in &m.segments {
            let d = store.fetch_segment(s, &cache).await.unwrap();
            assert!(Segment::open(&d).is_err(), "a format-5 build segment has no serving files");
            let alone = dir.path().join("alone").join(&s.id);
            let usearch = hubdex_formats::GraphBuilder::Usearch;
            write_merged_segment(
                &alone,
                "alone",
                &[d],
                &m.model,
                MergeIndexes::SideBySide,
                1,
                usearch,
            )
            .unwrap();
            members.push(Arc::new(Segment::open(&alone).unwrap()));
        }
        let unmerged = OpenSnapshot::new(Manifest { merged: Vec::new(), ..m.clone() }, members);

        for s in &m.segments {
            let by_repo = RowFilter { repo: Some(s.repo.clone()), ..Default::default() };
            let ids = |snap: &OpenSnapshot| {
                let mut ids: Vec<String> = Vec::new();
                for seg in &snap.segments {
                    let Some(c) = seg.text.compile(&by_repo).unwrap() else { continue };
                    let bits = seg.text.filter_bits(&c).unwrap();
                    for (i, r) in seg.text.rows().unwrap().into_iter().enumerate() {
                        if bits.contains(i as u64) {
                            ids.push(r.id);
                        }
                    }
                }
                ids.sort();
                ids
            };
            let want = ids(&unmerged);
            assert_eq!(want.len() as u64, s.rows);
            assert_eq!(ids(&merged), want, "{}: same rows by repo filter", s.repo);
            // A caller scoped to this repository sees the same rows in the merged segment.
            let by_scope = RowFilter { scope: scope(&[&s.repo], &[]), ..Default::default() };
            let seg = &merged.segments[0];
            let c = seg.text.compile(&by_scope).unwrap().expect("the merged segment holds two");
            let bits = seg.text.filter_bits(&c).unwrap();
            let mut scoped: Vec<String> = seg
                .text
                .rows()
                .unwrap()
                .into_iter()
                .enumerate()
                .filter(|(i, _)| bits.contains(*i as u64))
                .map(|(_, r)| r.id)
                .collect();
            scoped.sort();
            assert_eq!(scoped, want, "{}: same rows by scope", s.repo);
            // Time-ordered answers carry no score: they must be identical.
            let args = json!({"repo": s.repo, "since": "2000-01-01", "limit": 200});
            let req = hubdex_server::ScanRequest::from_args(args.as_object().unwrap()).unwrap();
            let a = hubdex_server::scan(&merged, &req).unwrap();
            let b = hubdex_server::scan(&unmerged, &req).unwrap();
            let ids_of = |x: &hubdex_server::ScanAnswer| {
                x.results.iter().map(|r| r.id.clone()).collect::<Vec<_>>()
            };
            assert_eq!(ids_of(&a), ids_of(&b), "{}: scan", s.repo);
            // Every row reads back the same, and read_span finds the repository's files.
            let sample: Vec<String> = want.iter().take(20).cloned().collect();
            let fa = hubdex_server::fetch(&merged, &sample, None).unwrap();
            let fb = hubdex_server::fetch(&unmerged, &sample, None).unwrap();
            assert_eq!(
                serde_json::to_value(&fa.results).unwrap(),
                serde_json::to_value(&fb.results).unwrap()
            );
            assert!(fa.not_found.is_empty());
        }
    });
}

/// The fixture's current snapshot and the rows (with their vectors) of its first segment.
async fn first_segment_rows() -> (Manifest, Vec<Row>) {
    let src = Store::open(&fixture().store.display().to_string()).unwrap();
    let m = src.latest_manifest().await.unwrap();
    let cache = tempfile::tempdir().unwrap();
    let dir = src.fetch_segment(&m.segments[0], cache.path()).await.unwrap();
    let rows = read_rows(&dir.join("rows.parquet"), true).unwrap();
    (m, rows)
}

/// hubdex's own graph writer (`GraphBuilder::HnswWriter`) writes a merged segment that opens like
/// usearch's: the same rows, and each row's own vector finds it first; written on one thread
/// and on two, the same graph. A publish whose merges in turn may hold less for a graph than
/// usearch's would writes that same graph; one whose allowance holds usearch's does not.
#[test]
fn a_merged_graph_written_on_codes_serves_its_rows_and_is_the_same_on_any_thread_count() {
    use hubdex_formats::{
        GraphBuilder, MergeIndexes, MergeLimits, VECTOR_SCALAR, VectorIndex, merged_id,
    };
    runtime().block_on(async {
        let (m, rows) = first_segment_rows().await;
        let work = tempfile::tempdir().unwrap();
        let store = Store::open(&work.path().join("store").display().to_string()).unwrap();
        let entry = upload_as(&store, work.path(), "o/r", &rows, &m.model).await;
        let member = store.fetch_segment(&entry, &work.path().join("cache")).await.unwrap();
        let id = merged_id(std::slice::from_ref(&entry));
        let write = |name: &str, threads: usize| {
            let dir = work.path().join(name);
            let (members, in_turn) = (std::slice::from_ref(&member), MergeIndexes::InTurn);
            let meta = write_merged_segment(
                &dir,
                &id,
                members,
                &m.model,
                in_turn,
                threads,
                GraphBuilder::HnswWriter,
            )
            .unwrap();
            (dir, meta)
        };
        let ((one, meta), (two, _)) = (write("one", 1), write("two", 2));
        let graph = |d: &std::path::Path| std::fs::read(d.join("vectors.hnsw")).unwrap();
        assert_eq!(graph(&one), graph(&two));
        assert_eq!(meta.rows, rows.len() as u64);
        assert_eq!(Segment::open(&one).unwrap().meta.rows, rows.len() as u64);
        let index = VectorIndex::open(
            &one.join("vectors.hnsw"),
            m.model.dim,
            meta.rows,
            meta.second_vectors,
            VECTOR_SCALAR,
        )
        .unwrap();
        // In the merged segment's order: its member's (sorted by id when it was written).
        let ordered = read_rows(&member.join("rows.parquet"), true).unwrap();
        let mut first = 0;
        for (i, r) in ordered.iter().enumerate() {
            let q: Vec<f32> = r.embedding.iter().map(|&x| f32::from(x)).collect();
            let hit = index.search(&q, 1, None).unwrap()[0];
            // Rows with equal vectors (the same text) may answer for each other.
            first +=
                usize::from(hit.0 == i as u64 || ordered[hit.0 as usize].embedding == r.embedding);
        }
        assert!(first * 100 >= ordered.len() * 98, "{first} of {} found first", ordered.len());

        // Served by a publish (each into a store of its own, which holds no write of the unit
        // yet): in turn with a graph allowance of 1 byte, the writer's graph; with room for
        // usearch's, usearch's.
        for (name, in_turn_bytes, same) in [("codes", 1, true), ("usearch", u64::MAX, false)] {
            let limits = MergeLimits { memory_bytes: 1, parallel: 1, in_turn_bytes };
            let dir = work.path().join(format!("publish-{name}"));
            let store = Store::open(&dir.join("store").display().to_string()).unwrap();
            let entry = upload_as(&store, &dir, "o/r", &rows, &m.model).await;
            let group = std::slice::from_ref(&entry);
            let (cache, units) = (dir.join("cache"), dir.join("units"));
            let unit = store
                .merge_for_serving(group, &m.model, &cache, &units, limits, &|_| {})
                .await
                .unwrap()
                .remove(0);
            let fetched = store.fetch_segment(&unit, &dir.join("fetched")).await.unwrap();
            assert_eq!(graph(&fetched) == graph(&one), same, "{name}");
        }
    });
}

#[test]
fn a_merged_segment_is_stored_as_a_write_of_its_own_and_any_complete_write_is_reused() {
    use hubdex_formats::{MergeIndexes, MergeLimits, is_write_of, merged_id};
    runtime().block_on(async {
        let (m, rows) = first_segment_rows().await;
        let work = tempfile::tempdir().unwrap();
        let store = Store::open(&work.path().join("store").display().to_string()).unwrap();
        let entry = upload_as(&store, work.path(), "o/r", &rows, &m.model).await;
        let group = std::slice::from_ref(&entry);
        let (unit_cache, unit_work) = (work.path().join("cache"), work.path().join("units"));
        let serve = || {
            let limits = MergeLimits::one_at_a_time();
            store.merge_for_serving(group, &m.model, &unit_cache, &unit_work, limits, &|_| {})
        };
        let first = serve().await.unwrap().remove(0);
        let members = merged_id(group);
        assert!(is_write_of(&first.id, &members) && first.id != members, "{}", first.id);

        // A second builder writes the same unit: tantivy's files differ in bytes between any
        // two writes (and a vector graph built on several threads does), so it is another write
        // with an id of its own, and neither builder's files touch the other's.
        let fetched = store.fetch_segment(&entry, &unit_cache).await.unwrap();
        let again = work.path().join("again");
        let (side_by_side, usearch) =
            (MergeIndexes::SideBySide, hubdex_formats::GraphBuilder::Usearch);
        let meta =
            write_merged_segment(&again, &members, &[fetched], &m.model, side_by_side, 2, usearch)
                .unwrap();
        assert!(is_write_of(&meta.id, &members), "{}", meta.id);
        assert_ne!(meta.id, first.id);
        let second = store.upload_segment(&again, |_| {}).await.unwrap();
        for unit in [&first, &second] {
            let fresh = tempfile::tempdir().unwrap();
            let d = store.fetch_segment(unit, fresh.path()).await.unwrap();
            assert_eq!(Segment::open(&d).unwrap().meta.rows, rows.len() as u64, "{}", unit.id);
        }

        // A later build writes nothing: it finds a complete write (the first, by id) and
        // serves it.
        let _ = std::fs::remove_dir_all(&unit_work);
        let reused = serve().await.unwrap().remove(0);
        let both = [first.id.clone(), second.id.clone()];
        assert_eq!(reused.id, both.iter().min().unwrap().clone());
        assert!(!unit_work.exists(), "nothing written");
        // A write whose segment.json is missing (its upload was killed) is not served.
        let min = both.iter().min().unwrap();
        let root = work.path().join("store/segments");
        std::fs::remove_file(root.join(min).join("segment.json")).unwrap();
        let other = serve().await.unwrap().remove(0);
        assert_eq!(&other.id, both.iter().max().unwrap());
    });
}

#[test]
fn merges_run_side_by_side_write_the_same_units_as_merges_one_at_a_time() {
    use hubdex_formats::{MERGED_TARGET_ROWS, MergeLimits, boundary_after, plan_merges};
    runtime().block_on(async {
        let (m, rows) = first_segment_rows().await;
        let third = rows.len() / 3;
        let parts = [&rows[..third], &rows[third..2 * third], &rows[2 * third..]];
        // Repository names after which the merge plan's content-defined boundary falls, so
        // each repository is a serving unit of its own: three merges to run.
        let mut names = Vec::new();
        for (p, part) in parts.iter().enumerate() {
            let name = (0..)
                .map(|k| format!("o/r{p}-{k}"))
                .find(|n| boundary_after(n, part.len() as u64, MERGED_TARGET_ROWS))
                .unwrap();
            names.push(name);
        }
        let work = tempfile::tempdir().unwrap();
        let mut units = Vec::new();
        for (way, limits) in [
            ("side by side", MergeLimits { parallel: 3, ..MergeLimits::one_at_a_time() }),
            ("one at a time", MergeLimits::one_at_a_time()),
            // An allowance smaller than any merge's estimate: each still runs, alone, writing
            // its text index and vector graph in turn (on usearch: any graph fits).
            (
                "within 1 byte",
                MergeLimits { memory_bytes: 1, parallel: 3, in_turn_bytes: u64::MAX },
            ),
        ] {
            let store_dir = work.path().join(way.replace(' ', "-"));
            let store = Store::open(&store_dir.join("store").display().to_string()).unwrap();
            let mut entries = Vec::new();
            for (name, part) in names.iter().zip(parts) {
                entries.push(upload_as(&store, &store_dir, name, part, &m.model).await);
            }
            assert_eq!(plan_merges(&entries).len(), 3, "each repository a unit of its own");
            let (cache, unit_work) = (store_dir.join("cache"), store_dir.join("units"));
            let heard = std::sync::Mutex::new(Vec::new());
            let progress = |p: MergeProgress| heard.lock().unwrap().push(p);
            let merged = store
                .merge_for_serving(&entries, &m.model, &cache, &unit_work, limits, &progress)
                .await
                .unwrap();
            assert_eq!(merged.len(), 3, "{way}");
            // Before the first unit, then a unit at a time, its rows added as it is done.
            let heard = heard.lock().unwrap().clone();
            let all: u64 = entries.iter().map(|e| e.rows).sum();
            assert_eq!(heard.len(), 4, "{way}: {heard:?}");
            assert_eq!(heard[0], MergeProgress { done: 0, units: 3, rows_done: 0, rows: all });
            for (i, p) in heard.iter().enumerate() {
                assert_eq!((p.done, p.units, p.rows), (i, 3, all), "{way}: {heard:?}");
            }
            let mut steps: Vec<u64> =
                heard.windows(2).map(|w| w[1].rows_done - w[0].rows_done).collect();
            let mut unit_rows: Vec<u64> = entries.iter().map(|e| e.rows).collect();
            steps.sort_unstable();
            unit_rows.sort_unstable();
            assert_eq!(steps, unit_rows, "{way}: each unit's rows once");
            // In plan order (by repository), each unit holding its repository's segment.
            for (unit, entry) in merged.iter().zip(&entries) {
                assert_eq!(unit.members, std::slice::from_ref(&entry.id), "{way}");
            }
            units.push((way, merged));
        }
        // What a unit's files hold: tantivy names its segment files with a fresh uuid and lists
        // them in meta.json, so those differ between any two writes (and so does the id of the
        // write, its second part); every other byte is the same, however many merges ran at
        // once (these units are small enough for a one-thread vector graph).
        let contents = |unit: &ManifestSegment| -> Vec<(String, String)> {
            unit.files
                .iter()
                .filter(|f| !f.path.ends_with("meta.json") && !f.path.ends_with(".managed.json"))
                .map(|f| {
                    let ext = f.path.rsplit_once('.').map_or("", |(_, e)| e);
                    let stem = if f.path.starts_with("text/") { "text/*" } else { &f.path };
                    (format!("{stem}.{ext}"), f.sha256.clone())
                })
                .collect()
        };
        let (first_way, first) = &units[0];
        for (way, merged) in &units[1..] {
            for (a, b) in first.iter().zip(merged) {
                let of = |u: &ManifestSegment| u.id.rsplit_once('-').unwrap().0.to_string();
                assert_eq!((of(a), a.rows, &a.members), (of(b), b.rows, &b.members), "{way}");
                assert!(hubdex_formats::is_write_of(&a.id, &of(a)), "{}", a.id);
                assert_eq!(contents(a), contents(b), "{way} against {first_way}");
            }
        }
    });
}
