//! `related`: the cross-references of an entity (see `hubdex_formats::Edge`), in and out,
//! grouped by kind, with the other end's title and URL and the phrase that states each; and
//! the edge summary (`first_release`, counts per kind) search and fetch add to their results.
//!
//! Outgoing edges are in the edge index of the segment serving the entity's repository;
//! incoming ones in every segment whose edges point into that repository (a segment knows which
//! repositories its edges point into, so the others are skipped). A file's `changed_in` list
//! comes from the serving index (the commits whose changed files include it), not from edges.

use std::collections::{BTreeMap, HashSet};

use hubdex_formats::{
    Direction, Edge, EdgeKind, Row, RowFilter, RowType, Scope, Segment, entity_type,
    entity_web_path, row_id,
};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::args::{Args, ToolError};
use crate::filter::{format_time, index_error};
use crate::snapshot::OpenSnapshot;

/// Edges per (kind, direction) an answer lists by default, and at most.
pub(crate) const DEFAULT_LIMIT: i64 = 20;
pub(crate) const MAX_LIMIT: i64 = 100;
/// At depth 2, how many ends of each group are expanded, and how many edges each lists.
pub(crate) const DEPTH2_ENDS: usize = 5;
pub(crate) const DEPTH2_EDGES: usize = 5;

/// The kinds `related` can list: the stored edge kinds and `changed_in` (a file's commits).
pub(crate) const KIND_NAMES: [&str; 6] =
    ["closes", "mentions", "reverts", "pull_request_of", "shipped_in", "changed_in"];

/// A checked `related` request.
#[derive(Debug, Clone)]
pub struct RelatedRequest {
    /// The id, entity or URL asked about, trimmed.
    pub id: String,
    /// `owner/name`, needed with an entity id when several repositories are visible.
    pub repo: Option<String>,
    /// Kinds to list (all when empty), by name.
    pub kinds: Vec<String>,
    /// List edges the entity states.
    pub out: bool,
    /// List edges to the entity.
    pub incoming: bool,
    /// 1, or 2 to list a few edges of each listed end.
    pub depth: u8,
    /// Edges listed per kind and direction.
    pub limit: usize,
    /// Answer from this snapshot; default the newest.
    pub snapshot: Option<String>,
}

impl RelatedRequest {
    /// Reads and checks `related`'s arguments.
    pub fn from_args(map: &Map<String, Value>) -> Result<Self, ToolError> {
        let a =
            Args::new(map, &["id", "repo", "kinds", "direction", "depth", "limit", "snapshot"])?;
        let id = a.required_text("id", 2000)?.trim().to_string();
        let repo = a.string("repo")?;
        if let Some(r) = &repo
            && (r.split('/').count() != 2 || r.split('/').any(str::is_empty) || r.contains(' '))
        {
            return Err(ToolError::arg("repo", format!("must be owner/name, got {r:?}")));
        }
        let kinds = a.string_list("kinds")?;
        for k in &kinds {
            if !KIND_NAMES.contains(&k.as_str()) {
                return Err(ToolError::arg(
                    "kinds",
                    format!("must name kinds among {}, got {k:?}", KIND_NAMES.join(", ")),
                ));
            }
        }
        let direction = a.one_of("direction", &["out", "in", "both"], "both")?;
        let depth = a.int_in("depth", 1, 2, 1)? as u8;
        let limit = a.int_in("limit", 1, MAX_LIMIT, DEFAULT_LIMIT)? as usize;
        Ok(RelatedRequest {
            id,
            repo,
            kinds,
            out: direction != "in",
            incoming: direction != "out",
            depth,
            limit,
            snapshot: a.string("snapshot")?,
        })
    }

    fn wants(&self, kind: &str) -> bool {
        self.kinds.is_empty() || self.kinds.iter().any(|k| k == kind)
    }
}

/// One end of an edge, as an answer shows it.
#[derive(Debug, Clone, Serialize)]
pub struct EntityInfo {
    /// `owner/name`.
    pub repo: String,
    /// The entity key (`issue/12`, `commit/<sha>`, `release/<tag>`, `file/<path>`).
    pub entity: String,
    /// The row that stands for the entity (its thread, commit or release row), when the
    /// snapshot holds one.
    pub id: Option<String>,
    #[serde(rename = "type")]
    /// issue, pull_request, commit, release or file.
    pub entity_type: String,
    /// Its title, when the snapshot holds its row.
    pub title: Option<String>,
    /// Its web address.
    pub url: Option<String>,
    /// open, closed or merged, for issues and pull requests.
    pub state: Option<String>,
    /// When its row was last updated.
    pub updated_at: Option<String>,
    /// Whether the snapshot holds rows of it (an issue of a repository indexed from git alone
    /// is only referenced).
    pub indexed: bool,
}

/// A release, as `first_release` names it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReleaseRef {
    /// The release's tag.
    pub tag: String,
    /// The release entity (`release/<tag>`).
    pub entity: String,
    /// The release's web address.
    pub url: Option<String>,
    /// How the entity reached it ("tag v1.2.0 (2024-05-01) contains 1a2b3c4", "v1.2.0 via
    /// commit 1a2b3c4").
    pub evidence: String,
}

/// One listed edge: the other end and the evidence.
#[derive(Debug, Clone, Serialize)]
pub struct RelatedEdge {
    #[serde(flatten)]
    /// The other end.
    pub other: EntityInfo,
    /// The row that states the edge, and the phrase.
    pub evidence_id: Option<String>,
    /// The phrase that states the edge.
    pub evidence: String,
    /// At depth 2: the other end's own edges (a few per kind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<Vec<EdgeGroup>>,
}

/// The edges of one kind in one direction.
#[derive(Debug, Clone, Serialize)]
pub struct EdgeGroup {
    /// The edge kind (closes, mentions, …, changed_in).
    pub kind: String,
    /// `out`: the entity states it (commit closes issue); `in`: another entity does.
    pub direction: &'static str,
    /// How many such edges exist; `edges` lists at most `limit`.
    pub count: usize,
    /// Whether more edges exist than are listed.
    pub truncated: bool,
    /// The listed edges, newest other end first.
    pub edges: Vec<RelatedEdge>,
}

/// The answer of `related`.
#[derive(Debug, Clone, Serialize)]
pub struct RelatedAnswer {
    /// The snapshot answered from.
    pub snapshot: String,
    /// The entity asked about.
    pub entity: EntityInfo,
    /// The first release that shipped it, when known.
    pub first_release: Option<ReleaseRef>,
    /// Edges listed in all groups.
    pub count: usize,
    /// The edges, grouped by kind and direction.
    pub groups: Vec<EdgeGroup>,
}

/// What search and fetch add to a commit, pull request or issue result.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct EdgeSummary {
    /// The first release that shipped it, when known.
    pub first_release: Option<ReleaseRef>,
    /// Edges per kind, in and out together (`related` lists them).
    pub edges: BTreeMap<String, usize>,
}

/// The ids of the rows that can stand for an entity, best first.
fn head_ids(repo: &str, entity: &str) -> Vec<String> {
    let kinds: &[RowType] = match entity_type(entity) {
        "issue" => &[RowType::Issue, RowType::PullRequest],
        "commit" => &[RowType::Commit],
        "release" => &[RowType::Release],
        "file" => &[RowType::Doc, RowType::Code, RowType::WikiDoc],
        _ => &[],
    };
    kinds.iter().map(|k| row_id(*k, repo, entity, 0)).collect()
}

/// The row that stands for `entity` of `repo`, when the snapshot holds one `scope` may read: a
/// file's code row is not shown to a caller whose types allow only docs.
fn head_row(
    snap: &OpenSnapshot,
    repo: &str,
    entity: &str,
    scope: Option<&Scope>,
) -> Result<Option<Row>, ToolError> {
    // A row of a type the scope hides is not looked up, let alone decoded.
    let ids: Vec<String> = head_ids(repo, entity)
        .into_iter()
        .filter(|id| {
            let kind = RowType::of_id(id);
            scope.is_none_or(|s| kind.is_some_and(|k| s.allows_type(k)))
        })
        .collect();
    for seg in snap.segments_of_repo(repo) {
        for id in &ids {
            if let Some(doc) = seg.text.doc_of_id(id).map_err(index_error)? {
                let row = seg.text.row(doc).map_err(index_error)?;
                if scope.is_none_or(|s| s.allows(&row)) {
                    return Ok(Some(row));
                }
            }
        }
    }
    Ok(None)
}

/// Whether `scope` may read file `path` of `repo`: with a types scope, the snapshot must hold a
/// row of that file of an allowed type (a code file is hidden from a docs-only caller, though
/// [`Scope::allows_entity`] lets every `file/` entity through for any file type).
pub(crate) fn file_allowed(
    snap: &OpenSnapshot,
    repo: &str,
    path: &str,
    scope: Option<&Scope>,
) -> Result<bool, ToolError> {
    match scope {
        None => Ok(true),
        Some(s) if !s.allows_repo(repo) => Ok(false),
        Some(s) if s.types().is_empty() => Ok(true),
        Some(s) => Ok(head_row(snap, repo, &format!("file/{path}"), Some(s))?.is_some()),
    }
}

/// Where an entity is on the web when no row says: GitHub's address for its repository.
fn fallback_url(repo: &str, entity: &str) -> Option<String> {
    if repo.starts_with("local/") {
        return None;
    }
    Some(format!("https://github.com/{repo}/{}", entity_web_path(entity)?))
}

fn entity_info(
    snap: &OpenSnapshot,
    repo: &str,
    entity: &str,
    url: Option<&str>,
    scope: Option<&Scope>,
) -> Result<EntityInfo, ToolError> {
    entity_info_with(snap, repo, entity, url, None, scope)
}

/// [`entity_info`], with a row of the entity already in hand (the row an id named) standing
/// for it when no thread, commit or release row does.
fn entity_info_with(
    snap: &OpenSnapshot,
    repo: &str,
    entity: &str,
    url: Option<&str>,
    known: Option<Row>,
    scope: Option<&Scope>,
) -> Result<EntityInfo, ToolError> {
    let row = head_row(snap, repo, entity, scope)?.or(known);
    let entity_type = match &row {
        Some(r)
            if matches!(
                r.kind(),
                RowType::Issue | RowType::PullRequest | RowType::Commit | RowType::Release
            ) =>
        {
            r.kind().to_string()
        }
        _ => entity_type(entity).to_string(),
    };
    Ok(EntityInfo {
        repo: repo.to_string(),
        entity: entity.to_string(),
        id: row.as_ref().map(|r| r.id.clone()),
        entity_type,
        title: row
            .as_ref()
            .and_then(|r| r.title.clone())
            .or_else(|| entity.strip_prefix("release/").map(str::to_string)),
        url: row
            .as_ref()
            .and_then(|r| r.url.clone())
            .or_else(|| url.map(str::to_string))
            .or_else(|| fallback_url(repo, entity)),
        state: row.as_ref().and_then(|r| r.state.clone()),
        updated_at: row.as_ref().and_then(|r| format_time(r.updated_at)),
        indexed: row.is_some(),
    })
}

/// The segments whose edges can start (`Out`) or end (`In`) at an entity of `repo`.
fn edge_segments<'a>(snap: &'a OpenSnapshot, repo: &str, dir: Direction) -> Vec<&'a Segment> {
    match dir {
        Direction::Out => snap.segments_of_repo(repo).into_iter().map(|s| &**s).collect(),
        Direction::In => snap
            .segments
            .iter()
            .filter(|s| s.edges.as_ref().is_some_and(|e| e.points_into(repo)))
            .map(|s| &**s)
            .collect(),
    }
}

/// The edges of an entity in one direction: (kind, segment, doc), in index order. With a
/// scope, only edges whose other end the scope shows: an edge to or from a hidden repository is
/// neither listed nor counted.
fn edge_docs<'a>(
    snap: &'a OpenSnapshot,
    repo: &str,
    entity: &str,
    dir: Direction,
    scope: Option<&Scope>,
) -> Result<Vec<(EdgeKind, &'a Segment, u32)>, ToolError> {
    let mut out = Vec::new();
    for seg in edge_segments(snap, repo, dir) {
        let Some(edges) = &seg.edges else { continue };
        for (doc, kind) in edges.docs(dir, repo, entity).map_err(index_error)? {
            if let Some(s) = scope {
                let e = read_edge(seg, doc)?;
                let (other_repo, other) = match dir {
                    Direction::Out => (&e.target_repo, &e.target),
                    Direction::In => (&e.source_repo, &e.source),
                };
                if !s.allows_entity(other_repo, other) {
                    continue;
                }
            }
            out.push((kind, seg, doc));
        }
    }
    Ok(out)
}

fn read_edge(seg: &Segment, doc: u32) -> Result<Edge, ToolError> {
    seg.edges.as_ref().expect("a doc came from this index").edge(doc).map_err(index_error)
}

/// The release an entity first shipped in, from its outgoing `shipped_in` edge.
fn first_release(docs: &[(EdgeKind, &Segment, u32)]) -> Result<Option<ReleaseRef>, ToolError> {
    let Some((_, seg, doc)) = docs.iter().find(|(k, _, _)| *k == EdgeKind::ShippedIn) else {
        return Ok(None);
    };
    let e = read_edge(seg, *doc)?;
    Ok(Some(ReleaseRef {
        tag: e.target.trim_start_matches("release/").to_string(),
        url: e.target_url.clone(),
        entity: e.target,
        evidence: e.evidence,
    }))
}

/// What history grep tells of a commit: its row (author, web address, id), the pull request it
/// came in through and the first release that shipped it.
#[derive(Debug, Default)]
pub(crate) struct CommitLinks {
    pub(crate) row: Option<Row>,
    pub(crate) pull_request: Option<EntityInfo>,
    pub(crate) first_release: Option<ReleaseRef>,
}

/// [`CommitLinks`] of commit `sha` of `repo`, as far as `scope` sees.
pub(crate) fn commit_links(
    snap: &OpenSnapshot,
    repo: &str,
    sha: &str,
    scope: Option<&Scope>,
) -> Result<CommitLinks, ToolError> {
    let entity = format!("commit/{sha}");
    let row = head_row(snap, repo, &entity, scope)?;
    let out = edge_docs(snap, repo, &entity, Direction::Out, scope)?;
    let pull = match out.iter().find(|(k, _, _)| *k == EdgeKind::PullRequestOf) {
        Some((_, seg, doc)) => {
            let e = read_edge(seg, *doc)?;
            Some(entity_info(snap, &e.target_repo, &e.target, e.target_url.as_deref(), scope)?)
        }
        None => None,
    };
    Ok(CommitLinks { row, pull_request: pull, first_release: first_release(&out)? })
}

/// `first_release` and edge counts of an entity, for search and fetch results, as far as
/// `scope` sees.
pub fn summary(
    snap: &OpenSnapshot,
    repo: &str,
    entity: &str,
    scope: Option<&Scope>,
) -> Result<EdgeSummary, ToolError> {
    let out = edge_docs(snap, repo, entity, Direction::Out, scope)?;
    let incoming = edge_docs(snap, repo, entity, Direction::In, scope)?;
    let mut edges = BTreeMap::new();
    for (k, _, _) in out.iter().chain(&incoming) {
        *edges.entry(k.as_str().to_string()).or_default() += 1;
    }
    Ok(EdgeSummary { first_release: first_release(&out)?, edges })
}

/// The edge summary of a search or fetch result of type `kind`: commits, pull requests and
/// issues get one, other rows `None`.
pub(crate) fn summary_of(
    snap: &OpenSnapshot,
    kind: RowType,
    repo: &str,
    entity: &str,
    scope: Option<&Scope>,
) -> Result<Option<EdgeSummary>, ToolError> {
    if !matches!(kind, RowType::Commit | RowType::PullRequest | RowType::Issue) {
        return Ok(None);
    }
    summary(snap, repo, entity, scope).map(Some)
}

/// The error for an entity the snapshot does not hold, or holds outside the caller's scope: the
/// same words either way.
fn unknown_entity(snap: &OpenSnapshot, repo: &str, entity: &str) -> ToolError {
    ToolError::arg(
        "id",
        format!("snapshot {} holds no row of {repo} {entity} and no edge to or from it", snap.id()),
    )
}

/// The (repo, entity) `id` names: a GitHub URL, an entity key (`issue/12`, `pull/12`, `#12`,
/// `owner/name#12`, `commit/<sha>`, `release/<tag>`, `file/<path>`) or a row id. An entity
/// outside `scope` is answered as one the snapshot does not hold, before anything of its
/// repository is read.
fn resolve_id(
    snap: &OpenSnapshot,
    req: &RelatedRequest,
    scope: Option<&Scope>,
) -> Result<(String, String, Option<Row>), ToolError> {
    let (repo, entity, row) = resolve_unscoped(snap, req, scope)?;
    let hidden_file = match entity.strip_prefix("file/") {
        Some(path) => !file_allowed(snap, &repo, path, scope)?,
        None => false,
    };
    if hidden_file || scope.is_some_and(|s| !s.allows_entity(&repo, &entity)) {
        return Err(unknown_entity(snap, &repo, &entity));
    }
    let sha_prefix = entity.strip_prefix("commit/").is_some_and(|s| s.len() < 40);
    if row.is_none() && sha_prefix {
        let (repo, entity) = expand_sha(snap, repo, entity)?;
        return Ok((repo, entity, None));
    }
    Ok((repo, entity, row))
}

/// [`resolve_id`] before the scope check and the short-SHA expansion.
fn resolve_unscoped(
    snap: &OpenSnapshot,
    req: &RelatedRequest,
    scope: Option<&Scope>,
) -> Result<(String, String, Option<Row>), ToolError> {
    let id = req.id.as_str();
    let bad = |m: String| ToolError::arg("id", m);
    if let Some(rest) = id.strip_prefix("https://").or_else(|| id.strip_prefix("http://")) {
        let path = rest.split(['#', '?']).next().unwrap_or("");
        let parts: Vec<&str> = path.split('/').collect();
        if parts.len() < 5 {
            return Err(bad(format!(
                "{id:?} is not an issue, pull request, commit, release or file URL"
            )));
        }
        let repo = format!("{}/{}", parts[1], parts[2]);
        let entity = match (parts[3], parts[4]) {
            ("issues" | "pull", n) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
                format!("issue/{n}")
            }
            ("commit" | "commits", sha) => format!("commit/{}", sha.to_ascii_lowercase()),
            ("releases", "tag") if parts.len() > 5 => format!("release/{}", parts[5..].join("/")),
            ("blob" | "tree", _) if parts.len() > 5 => format!("file/{}", parts[5..].join("/")),
            _ => {
                return Err(bad(format!(
                    "{id:?} is not an issue, pull request, commit, release or file URL"
                )));
            }
        };
        return Ok((repo, entity, None));
    }
    if let Some((owner_repo, n)) = id.split_once('#')
        && owner_repo.contains('/')
        && !n.is_empty()
        && n.chars().all(|c| c.is_ascii_digit())
    {
        return Ok((owner_repo.to_string(), format!("issue/{n}"), None));
    }
    let entity = if let Some(n) = id.strip_prefix('#').or_else(|| id.strip_prefix("pull/")) {
        Some(format!("issue/{n}"))
    } else if ["issue/", "commit/", "release/", "file/"].iter().any(|p| id.starts_with(p)) {
        Some(id.to_string())
    } else {
        None
    };
    let Some(entity) = entity else {
        // A row id.
        let row = snap.row_in_scope(id, scope).map_err(index_error)?;
        let row = row.ok_or_else(|| {
            bad(format!(
                "no row has id {id:?}; id takes a row id, an entity (issue/123, commit/<sha>, \
                 release/<tag>, file/<path>) or a GitHub URL"
            ))
        })?;
        return Ok((row.repo.clone(), row.entity.clone(), Some(row)));
    };
    if entity.starts_with("issue/") && !entity[6..].chars().all(|c| c.is_ascii_digit())
        || entity.ends_with('/')
    {
        return Err(bad(format!("{id:?} names no issue number, SHA, tag or path")));
    }
    let repo = match &req.repo {
        Some(r) => r.clone(),
        None => {
            // The repositories the caller sees: a hidden one is not counted.
            let repos: Vec<String> = snap
                .manifest
                .segments
                .iter()
                .map(|s| s.repo.clone())
                .filter(|r| scope.is_none_or(|s| s.allows_repo(r)))
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            if repos.len() != 1 {
                return Err(ToolError::arg(
                    "repo",
                    format!(
                        "is required with an entity id when the snapshot holds {} repositories",
                        repos.len()
                    ),
                ));
            }
            repos[0].clone()
        }
    };
    Ok((repo, entity, None))
}

/// A commit named by a short SHA, expanded to the one commit of the repository it starts.
fn expand_sha(
    snap: &OpenSnapshot,
    repo: String,
    entity: String,
) -> Result<(String, String), ToolError> {
    let Some(sha) = entity.strip_prefix("commit/") else { return Ok((repo, entity)) };
    if sha.len() >= 40 || sha.len() < 4 {
        return Ok((repo, entity));
    }
    if !sha.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(ToolError::arg("id", format!("{sha:?} is not a commit SHA")));
    }
    let mut found: Vec<String> = Vec::new();
    for seg in edge_segments(snap, &repo, Direction::Out).into_iter().chain(edge_segments(
        snap,
        &repo,
        Direction::In,
    )) {
        if let Some(e) = &seg.edges {
            for dir in [Direction::Out, Direction::In] {
                found.extend(e.entities_with_prefix(dir, &repo, &entity, 3).map_err(index_error)?);
            }
        }
    }
    for seg in snap.segments_of_repo(&repo) {
        for e in seg.text.entities_with_prefix(&entity, 3).map_err(index_error)? {
            if head_row(snap, &repo, &e, None)?.is_some() {
                found.push(e);
            }
        }
    }
    found.sort();
    found.dedup();
    match found.len() {
        0 => Ok((repo, entity)),
        1 => Ok((repo, found.remove(0))),
        _ => Err(ToolError::arg(
            "id",
            format!("{sha:?} is the start of several commits of {repo}: give more of the SHA"),
        )),
    }
}

/// The groups of edges of one entity.
fn groups(
    snap: &OpenSnapshot,
    repo: &str,
    entity: &str,
    req: &RelatedRequest,
    scope: Option<&Scope>,
    limit: usize,
    expand: bool,
) -> Result<(Vec<EdgeGroup>, Option<ReleaseRef>), ToolError> {
    let out = edge_docs(snap, repo, entity, Direction::Out, scope)?;
    let release = first_release(&out)?;
    let mut directions = Vec::new();
    if req.out {
        directions.push((Direction::Out, out, "out"));
    }
    if req.incoming {
        directions.push((
            Direction::In,
            edge_docs(snap, repo, entity, Direction::In, scope)?,
            "in",
        ));
    }
    let mut result = Vec::new();
    for (dir, docs, name) in directions {
        for kind in EdgeKind::ALL.into_iter().filter(|k| req.wants(k.as_str())) {
            let of_kind: Vec<&(EdgeKind, &Segment, u32)> =
                docs.iter().filter(|(k, _, _)| *k == kind).collect();
            if of_kind.is_empty() {
                continue;
            }
            // Every edge of the kind is read and sorted before the cut, so the `limit` shown
            // are the newest of all, not the newest of the first `limit` in index order.
            let mut edges = Vec::with_capacity(of_kind.len());
            for (_, seg, doc) in &of_kind {
                let e = read_edge(seg, *doc)?;
                let (other_repo, other, url) = match dir {
                    Direction::Out => (e.target_repo, e.target, e.target_url),
                    Direction::In => (e.source_repo, e.source, None),
                };
                let other = entity_info(snap, &other_repo, &other, url.as_deref(), scope)?;
                edges.push((
                    other_repo,
                    RelatedEdge {
                        other,
                        evidence_id: e.evidence_id,
                        evidence: e.evidence,
                        related: None,
                    },
                ));
            }
            // Newest other end first: what happened last is read first; ties by entity.
            edges.sort_by(|(_, a), (_, b)| {
                b.other
                    .updated_at
                    .cmp(&a.other.updated_at)
                    .then_with(|| a.other.entity.cmp(&b.other.entity))
            });
            edges.truncate(limit);
            if expand {
                for (other_repo, edge) in edges.iter_mut().take(DEPTH2_ENDS) {
                    let (g, _) = groups(
                        snap,
                        other_repo,
                        &edge.other.entity,
                        req,
                        scope,
                        DEPTH2_EDGES,
                        false,
                    )?;
                    edge.related = Some(g);
                }
            }
            let edges: Vec<RelatedEdge> = edges.into_iter().map(|(_, e)| e).collect();
            result.push(EdgeGroup {
                kind: kind.as_str().to_string(),
                direction: name,
                count: of_kind.len(),
                truncated: of_kind.len() > edges.len(),
                edges,
            });
        }
    }
    if entity_type(entity) == "file" && req.incoming && req.wants("changed_in") {
        result.extend(changed_in(snap, repo, entity, scope, limit)?);
    }
    Ok((result, release))
}

/// The commits that changed a file, newest first.
fn changed_in(
    snap: &OpenSnapshot,
    repo: &str,
    entity: &str,
    scope: Option<&Scope>,
    limit: usize,
) -> Result<Option<EdgeGroup>, ToolError> {
    let path = entity.trim_start_matches("file/");
    // The path itself, not the paths it starts: a glob of the escaped path matches it alone.
    let unusable = |e: String| ToolError::arg("id", format!("is not a usable path: {e}"));
    let exact = globset::GlobBuilder::new(&hubdex_formats::glob_literal(path))
        .backslash_escape(true)
        .build()
        .map_err(|e| unusable(e.kind().to_string()))
        .and_then(|g| hubdex_formats::glob_matcher(g).map_err(unusable))?;
    let filter = RowFilter {
        repo: Some(repo.to_string()),
        types: vec![RowType::Commit],
        path_prefix: Some(path.to_string()),
        files_glob: Some(exact),
        scope: scope.cloned(),
        ..RowFilter::default()
    };
    // 1900 to a century from now: every date a commit carries (the index's dates are
    // nanoseconds in an i64 and end in 2262).
    let since = chrono::DateTime::from_timestamp(-2_208_988_800, 0).expect("a valid date");
    let until = chrono::Utc::now() + chrono::Duration::days(365 * 100);
    // Newest first across the units holding the repository's commits.
    let mut count = 0;
    let mut hits = Vec::new();
    for seg in snap.segments_of_repo(repo) {
        let Some(compiled) = seg.text.compile(&filter).map_err(index_error)? else { continue };
        count += seg.text.filter_bits(&compiled).map_err(index_error)?.count() as usize;
        let found = seg
            .text
            .scan(Some(&compiled), false, since, until, None, limit)
            .map_err(index_error)?;
        hits.extend(found.into_iter().map(|(at, id, doc)| (at, id, doc, seg)));
    }
    if count == 0 {
        return Ok(None);
    }
    hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    hits.truncate(limit);
    let mut edges = Vec::new();
    for (_, _, doc, seg) in hits {
        let row = seg.text.row(doc).map_err(index_error)?;
        edges.push(RelatedEdge {
            other: entity_info(snap, repo, &row.entity, None, scope)?,
            evidence_id: Some(row.id.clone()),
            evidence: format!("changed {path}"),
            related: None,
        });
    }
    Ok(Some(EdgeGroup {
        kind: "changed_in".into(),
        direction: "in",
        truncated: count > edges.len(),
        count,
        edges,
    }))
}

/// Answers `related` as far as `scope` sees: an entity outside it is unknown, and edges to or
/// from hidden repositories are neither listed nor counted.
pub fn related(
    snap: &OpenSnapshot,
    req: &RelatedRequest,
    scope: Option<&Scope>,
) -> Result<RelatedAnswer, ToolError> {
    let (repo, entity, row) = resolve_id(snap, req, scope)?;
    let info = entity_info_with(snap, &repo, &entity, None, row, scope)?;
    let (groups, first_release) =
        groups(snap, &repo, &entity, req, scope, req.limit, req.depth == 2)?;
    let known = info.indexed
        || !groups.is_empty()
        || !edge_docs(snap, &repo, &entity, Direction::Out, scope)?.is_empty()
        || !edge_docs(snap, &repo, &entity, Direction::In, scope)?.is_empty();
    if !known {
        return Err(unknown_entity(snap, &repo, &entity));
    }
    Ok(RelatedAnswer {
        snapshot: snap.id().to_string(),
        count: groups.iter().map(|g| g.edges.len()).sum(),
        entity: info,
        first_release,
        groups,
    })
}
