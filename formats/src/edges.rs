//! Cross-references between entities: `edges.parquet` (what users join in DuckDB) and the edge
//! index `edges/` (what the server maps to answer `related`).
//!
//! An edge goes from a source entity (always in the segment's own repository: the row or the
//! git history that states it is there) to a target entity, in this repository or another one.
//! Entities are the rows' aggregation keys (`issue/<n>` for issues and pull requests alike,
//! `commit/<sha>`, `release/<tag>`, `file/<path>`); an end no row holds (an issue of a
//! repository indexed from git alone, a repository not indexed at all) is still an end, with
//! its URL.
//!
//! The edge index is one tantivy index: `src` and `dst` (`"<repo> <entity>"`, raw terms),
//! `dst_repo` (raw), `kind` (fast, the kind's position in [`EdgeKind::ALL`]) and the edge
//! itself as stored JSON. An answer reads the postings of one key and the stored edges it
//! returns, nothing else.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};
use tantivy::columnar::Column;
use tantivy::indexer::NoMergePolicy;
use tantivy::schema::{FAST, Field as TField, INDEXED, IndexRecordOption, STORED, STRING, Value};
use tantivy::{
    DocAddress, DocId, DocSet, Index, IndexReader, Searcher, SegmentReader, TERMINATED,
    TantivyDocument, Term,
};

use crate::error::FormatError;
use crate::rows::{read_batches, utf8_column, zstd_writer};
use crate::serving::{commit_as_one_segment, open_searcher, terms_with_prefix};

/// The file name of a build segment's edges.
pub const EDGES_PARQUET: &str = "edges.parquet";
/// The directory of a segment's edge index.
pub const EDGES_DIR: &str = "edges";

/// What an edge says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// A commit or pull request closes an issue (GitHub's closing keywords).
    Closes,
    /// Any other reference: `#N`, `owner/repo#N`, an issue, PR or commit URL, a commit SHA.
    Mentions,
    /// A commit reverts another.
    Reverts,
    /// A commit came in through a pull request.
    PullRequestOf,
    /// A commit (or an issue or PR, through the commits that close or merge it) first shipped
    /// in a release.
    ShippedIn,
}

impl EdgeKind {
    /// Every kind, in a fixed order (the order the edge index numbers them by).
    pub const ALL: [EdgeKind; 5] = [
        EdgeKind::Closes,
        EdgeKind::Mentions,
        EdgeKind::Reverts,
        EdgeKind::PullRequestOf,
        EdgeKind::ShippedIn,
    ];
    /// The names of [`EdgeKind::ALL`].
    pub const NAMES: [&'static str; 5] =
        ["closes", "mentions", "reverts", "pull_request_of", "shipped_in"];

    /// The kind's name, as in edges.parquet and answers.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<EdgeKind> {
        Self::NAMES.iter().position(|n| *n == name).map(|i| Self::ALL[i])
    }
}

/// One cross-reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    /// What kind of reference it is.
    pub kind: EdgeKind,
    /// The source's repository: the segment's own.
    pub source_repo: String,
    /// The source entity (`issue/12`, `commit/<sha>`).
    pub source: String,
    /// The target's repository (the source's own for `#N`).
    pub target_repo: String,
    /// The target entity (`issue/7`, `commit/<sha>`, `release/v1.2.0`).
    pub target: String,
    /// The target on the web, when its repository has a web address.
    pub target_url: Option<String>,
    /// The row that states the edge (a commit row for `shipped_in`).
    pub evidence_id: Option<String>,
    /// The phrase that states it ("Fixes #12", "This reverts commit 1a2b3c4",
    /// "tag v1.2.0 contains 1a2b3c4").
    pub evidence: String,
}

/// The key of an entity in the edge index: `"<repo> <entity>"` (repository names have no
/// spaces).
pub fn entity_key(repo: &str, entity: &str) -> String {
    format!("{repo} {entity}")
}

/// The type of an entity, from its key's prefix: `issue` (issues and pull requests share the
/// number space), `commit`, `release` or `file`.
pub fn entity_type(entity: &str) -> &str {
    entity.split_once('/').map_or("", |(t, _)| t)
}

/// Where an entity is under its repository's web address: `issues/12`, `commit/<sha>`,
/// `releases/tag/<tag>`, `blob/HEAD/<path>`.
pub fn entity_web_path(entity: &str) -> Option<String> {
    let (kind, rest) = entity.split_once('/')?;
    Some(match kind {
        "issue" => format!("issues/{rest}"),
        "commit" => format!("commit/{rest}"),
        "release" => format!("releases/tag/{rest}"),
        "file" => format!("blob/HEAD/{rest}"),
        _ => return None,
    })
}

fn schema() -> SchemaRef {
    let s = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        s("kind", false),
        s("source_repo", false),
        s("source", false),
        s("target_repo", false),
        s("target", false),
        s("target_url", true),
        s("evidence_id", true),
        s("evidence", false),
    ]))
}

/// Sorts `edges` (by kind, source, target, evidence) so the same edges give the same bytes,
/// and writes them to `path`.
pub fn write_edges(path: &Path, edges: &mut [Edge]) -> Result<(), FormatError> {
    edges.sort_by(|a, b| {
        (a.kind, &a.source, &a.target_repo, &a.target, &a.evidence_id).cmp(&(
            b.kind,
            &b.source,
            &b.target_repo,
            &b.target,
            &b.evidence_id,
        ))
    });
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let mut w = zstd_writer(path, schema(), None)?;
    for chunk in edges.chunks(8192) {
        let col = |f: &dyn Fn(&Edge) -> Option<&str>| -> Arc<dyn Array> {
            Arc::new(chunk.iter().map(f).collect::<StringArray>())
        };
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                col(&|e| Some(e.kind.as_str())),
                col(&|e| Some(&e.source_repo)),
                col(&|e| Some(&e.source)),
                col(&|e| Some(&e.target_repo)),
                col(&|e| Some(&e.target)),
                col(&|e| e.target_url.as_deref()),
                col(&|e| e.evidence_id.as_deref()),
                col(&|e| Some(&e.evidence)),
            ],
        )?;
        w.write(&batch).map_err(pq)?;
    }
    w.close().map_err(pq)?;
    Ok(())
}

/// Reads edges.parquet; an absent file is no edges (a segment built before edges existed).
pub fn read_edges(path: &Path) -> Result<Vec<Edge>, FormatError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let bad = |detail: String| FormatError::Schema { what: path.display().to_string(), detail };
    let mut out = Vec::new();
    for batch in read_batches(path)? {
        let batch = batch?;
        let col = |name: &str| utf8_column(&batch, name, path);
        let cols: Vec<&StringArray> = [
            "kind",
            "source_repo",
            "source",
            "target_repo",
            "target",
            "target_url",
            "evidence_id",
            "evidence",
        ]
        .iter()
        .map(|n| col(n))
        .collect::<Result<_, _>>()?;
        let opt = |c: &StringArray, i: usize| (!c.is_null(i)).then(|| c.value(i).to_string());
        for i in 0..batch.num_rows() {
            let kind = EdgeKind::parse(cols[0].value(i))
                .ok_or_else(|| bad(format!("unknown edge kind {:?}", cols[0].value(i))))?;
            out.push(Edge {
                kind,
                source_repo: cols[1].value(i).to_string(),
                source: cols[2].value(i).to_string(),
                target_repo: cols[3].value(i).to_string(),
                target: cols[4].value(i).to_string(),
                target_url: opt(cols[5], i),
                evidence_id: opt(cols[6], i),
                evidence: cols[7].value(i).to_string(),
            });
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    src: TField,
    dst: TField,
    dst_repo: TField,
    kind: TField,
    edge: TField,
}

fn index_schema() -> (tantivy::schema::Schema, Fields) {
    let mut b = tantivy::schema::Schema::builder();
    let f = Fields {
        src: b.add_text_field("src", STRING),
        dst: b.add_text_field("dst", STRING),
        dst_repo: b.add_text_field("dst_repo", STRING),
        kind: b.add_u64_field("kind", FAST | INDEXED),
        edge: b.add_bytes_field("edge", STORED),
    };
    (b.build(), f)
}

/// Writes the edge index of `edges` into `dir`.
pub(crate) fn write_edge_index<'a>(
    dir: &Path,
    edges: impl Iterator<Item = &'a Edge>,
) -> Result<(), FormatError> {
    let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
    let (schema, f) = index_schema();
    let index = Index::create_in_dir(dir, schema).map_err(tv)?;
    let writer = index.writer_with_num_threads::<TantivyDocument>(1, 32 << 20).map_err(tv)?;
    writer.set_merge_policy(Box::new(NoMergePolicy));
    for e in edges {
        let mut doc = TantivyDocument::default();
        doc.add_text(f.src, entity_key(&e.source_repo, &e.source));
        doc.add_text(f.dst, entity_key(&e.target_repo, &e.target));
        doc.add_text(f.dst_repo, &e.target_repo);
        doc.add_u64(f.kind, e.kind as u64);
        let json = serde_json::to_vec(e).map_err(|err| FormatError::json("an edge", err))?;
        doc.add_bytes(f.edge, &json);
        writer.add_document(doc).map_err(tv)?;
    }
    commit_as_one_segment(&index, writer, dir)?;
    Ok(())
}

/// Which end of an edge a key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Edges from the entity.
    Out,
    /// Edges to the entity.
    In,
}

/// An open edge index (mmap).
pub struct EdgeIndex {
    _reader: IndexReader,
    searcher: Searcher,
    f: Fields,
    kinds: Option<Column<u64>>,
    /// Every repository an edge here points into: an incoming lookup for another one skips
    /// this index.
    target_repos: BTreeSet<String>,
    path: PathBuf,
}

impl std::fmt::Debug for EdgeIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeIndex").field("path", &self.path).finish()
    }
}

impl EdgeIndex {
    /// Opens the edge index in `dir`. The caller has verified its files.
    pub fn open(dir: &Path) -> Result<EdgeIndex, FormatError> {
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let index = Index::open_in_dir(dir).map_err(tv)?;
        let (_, f) = index_schema();
        let (reader, searcher) = open_searcher(&index, dir, 4)?;
        let mut target_repos = BTreeSet::new();
        let mut kinds = None;
        if let Some(seg) = searcher.segment_readers().first() {
            let inv = seg.inverted_index(f.dst_repo).map_err(tv)?;
            let mut terms = inv.terms().stream().map_err(|e| FormatError::io(dir, e))?;
            while terms.advance() {
                target_repos.insert(String::from_utf8_lossy(terms.key()).into_owned());
            }
            kinds = Some(seg.fast_fields().u64("kind").map_err(tv)?);
        }
        Ok(EdgeIndex { _reader: reader, searcher, f, kinds, target_repos, path: dir.to_path_buf() })
    }

    fn segment(&self) -> Option<&SegmentReader> {
        self.searcher.segment_readers().first()
    }

    /// Edges in the index.
    pub fn len(&self) -> u64 {
        self.searcher.num_docs()
    }

    /// Whether the index holds no edges.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether an edge here points into `repo`.
    pub fn points_into(&self, repo: &str) -> bool {
        self.target_repos.contains(repo)
    }

    fn key_field(&self, dir: Direction) -> TField {
        match dir {
            Direction::Out => self.f.src,
            Direction::In => self.f.dst,
        }
    }

    /// The edges from (`Out`) or to (`In`) an entity, as (doc, kind), in index order. Reading
    /// an edge itself is [`EdgeIndex::edge`].
    pub fn docs(
        &self,
        dir: Direction,
        repo: &str,
        entity: &str,
    ) -> Result<Vec<(DocId, EdgeKind)>, FormatError> {
        let (Some(seg), Some(kinds)) = (self.segment(), &self.kinds) else {
            return Ok(Vec::new());
        };
        let io = |e| FormatError::io(&self.path, e);
        let inv = seg
            .inverted_index(self.key_field(dir))
            .map_err(|source| FormatError::Tantivy { path: self.path.clone(), source })?;
        let term = Term::from_field_text(self.key_field(dir), &entity_key(repo, entity));
        let Some(info) = inv.get_term_info(&term).map_err(io)? else { return Ok(Vec::new()) };
        let mut postings =
            inv.read_postings_from_terminfo(&info, IndexRecordOption::Basic).map_err(io)?;
        let mut out = Vec::new();
        let mut doc = postings.doc();
        while doc != TERMINATED {
            if seg.alive_bitset().is_none_or(|a| a.is_alive(doc)) {
                let k = kinds.first(doc).unwrap_or(0) as usize;
                out.push((doc, EdgeKind::ALL.get(k).copied().unwrap_or(EdgeKind::Mentions)));
            }
            doc = postings.advance();
        }
        Ok(out)
    }

    /// The stored edge at `doc`.
    pub fn edge(&self, doc: DocId) -> Result<Edge, FormatError> {
        let d: TantivyDocument = self
            .searcher
            .doc(DocAddress::new(0, doc))
            .map_err(|source| FormatError::Tantivy { path: self.path.clone(), source })?;
        let bytes = d.get_first(self.f.edge).and_then(|v| v.as_bytes()).ok_or_else(|| {
            FormatError::Schema {
                what: self.path.display().to_string(),
                detail: format!("edge {doc} has no stored edge"),
            }
        })?;
        serde_json::from_slice(bytes)
            .map_err(|e| FormatError::json(format!("{} edge {doc}", self.path.display()), e))
    }

    /// The entities of `repo` that an edge here starts (`Out`) or ends (`In`) at and whose key
    /// starts with `prefix` (`commit/1a2b` for a short SHA), at most `limit`.
    pub fn entities_with_prefix(
        &self,
        dir: Direction,
        repo: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(Vec::new()) };
        let keys = terms_with_prefix(
            seg,
            self.key_field(dir),
            &entity_key(repo, prefix),
            limit,
            &self.path,
        )?;
        Ok(keys.into_iter().map(|k| k[repo.len() + 1..].to_string()).collect())
    }
}

/// Writes the edge index of the edges.parquet files of `members` (build segment directories;
/// one without edges adds none) into `dir`, when any has edges. Returns the number of edges.
pub(crate) fn merge_edge_indexes(dir: &Path, members: &[PathBuf]) -> Result<u64, FormatError> {
    let mut all = Vec::new();
    for m in members {
        all.extend(read_edges(&m.join(EDGES_PARQUET))?);
    }
    if !all.is_empty() {
        write_edge_index(&dir.join(EDGES_DIR), all.iter())?;
    }
    Ok(all.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(kind: EdgeKind, source: &str, target_repo: &str, target: &str) -> Edge {
        Edge {
            kind,
            source_repo: "o/r".into(),
            source: source.into(),
            target_repo: target_repo.into(),
            target: target.into(),
            target_url: Some(format!("https://github.com/{target_repo}/{target}")),
            evidence_id: Some("cmt_x".into()),
            evidence: format!("{} {target}", kind.as_str()),
        }
    }

    #[test]
    fn edges_round_trip_through_parquet_and_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut edges = vec![
            edge(EdgeKind::Closes, "commit/abc123", "o/r", "issue/7"),
            edge(EdgeKind::Mentions, "issue/9", "o/r", "issue/7"),
            edge(EdgeKind::Mentions, "issue/9", "x/y", "issue/1"),
            edge(EdgeKind::ShippedIn, "commit/abc123", "o/r", "release/v1.0.0"),
        ];
        let path = dir.path().join(EDGES_PARQUET);
        write_edges(&path, &mut edges).unwrap();
        assert_eq!(read_edges(&path).unwrap(), edges);

        write_edge_index(&dir.path().join(EDGES_DIR), edges.iter()).unwrap();
        let idx = EdgeIndex::open(&dir.path().join(EDGES_DIR)).unwrap();
        assert_eq!(idx.len(), 4);
        let into7 = idx.docs(Direction::In, "o/r", "issue/7").unwrap();
        let kinds: BTreeSet<EdgeKind> = into7.iter().map(|(_, k)| *k).collect();
        assert_eq!(kinds, BTreeSet::from([EdgeKind::Closes, EdgeKind::Mentions]));
        let out = idx.docs(Direction::Out, "o/r", "commit/abc123").unwrap();
        let read: Vec<Edge> = out.iter().map(|(d, _)| idx.edge(*d).unwrap()).collect();
        assert!(read.contains(&edges[0]) && read.contains(&edges[3]), "{read:?}");
        assert!(idx.points_into("x/y") && !idx.points_into("z/z"));
        assert_eq!(
            idx.entities_with_prefix(Direction::Out, "o/r", "commit/abc", 5).unwrap(),
            vec!["commit/abc123".to_string()]
        );
        assert!(idx.docs(Direction::Out, "o/r", "issue/404").unwrap().is_empty());
    }

    #[test]
    fn kinds_parse_by_name() {
        for k in EdgeKind::ALL {
            assert_eq!(EdgeKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.as_str()));
        }
        assert_eq!(EdgeKind::parse("fixes"), None);
    }
}
