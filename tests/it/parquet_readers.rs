//! rows.parquet opens as is in pyarrow and DuckDB.

use std::process::Command;

use serde_json::Value;

use crate::fixture::fixture;

#[test]
fn pyarrow_and_duckdb_read_rows_parquet() {
    let f = fixture();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/read_parquet.py");
    let out = Command::new(hubdex_tests::python()).arg(script).arg(&f.store).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files"], 1);
    let columns: Vec<&str> =
        v["pyarrow"]["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    for c in [
        "id",
        "type",
        "repo",
        "entity",
        "number",
        "title",
        "body",
        "body_chars",
        "truncated",
        "url",
        "state",
        "labels",
        "milestone",
        "assignees",
        "author",
        "created_at",
        "updated_at",
        "closed_at",
        "merged_at",
        "path",
        "line_start",
        "line_end",
        "heading_path",
        "chunk_index",
        "commit_sha",
        "files_changed",
        "language",
        "symbol",
        "refs",
        "content_sha256",
        "embedding",
    ] {
        assert!(columns.contains(&c), "pyarrow does not see column {c}: {columns:?}");
    }
    assert_eq!(v["pyarrow"]["rows"].as_u64().unwrap(), f.first.rows);
    // Format 8 keeps each vector as i8 (scaled to 127): what the graphs hold.
    assert_eq!(v["pyarrow"]["embedding_type"], "fixed_size_list<item: int8 not null>[384]");
    assert_eq!(v["duckdb"]["rows"].as_u64().unwrap(), f.first.rows);
    assert_eq!(v["duckdb"]["by_type"]["commit"].as_u64().unwrap() as usize, f.repo.commits);
    assert!(v["duckdb"]["by_type"]["doc"].as_u64().unwrap() >= 3);
    assert_eq!(v["duckdb"]["dim"], 384);
    assert_eq!(v["duckdb"]["newest_commit_title"], Value::from(f.repo.big_diff_subject.clone()));
    // Cosine over the i8 vectors cast to float works offline: a row is its own nearest
    // neighbour, and DuckDB ranks the rest as numpy does.
    assert_eq!(v["duckdb"]["nearest_to_first"][0], v["numpy"]["first_id"]);
    assert!(v["duckdb"]["self_cosine"].as_f64().unwrap() > 0.9999, "{v}");
    assert_eq!(v["duckdb"]["nearest_to_first"], v["numpy"]["nearest_to_first"]);
}
