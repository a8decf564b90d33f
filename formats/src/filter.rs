//! What a filtering request asks of rows, as plain data. The serving index compiles it into
//! index queries ([`crate::ServingIndex::compile`]); [`RowFilter::matches`] is the same test on
//! one decoded row, the reference the index is tested against.

use chrono::{DateTime, Utc};
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::row::{Row, RowType, sha256_hex};

/// Who may read what: the repositories (globs over `owner/name`, ignoring ASCII case only:
/// GitHub names are ASCII, and Unicode case folding would let `ſ` or the Kelvin sign stand for
/// `s` or `k`) and,
/// optionally, the row types a caller's token or claims allow. For that caller, rows outside
/// the scope do not exist: the index filters them out before any cap, and no answer counts,
/// lists or names them.
#[derive(Debug, Clone)]
pub struct Scope {
    patterns: Vec<String>,
    repos: GlobSet,
    types: Vec<RowType>,
}

/// A scope pattern that is not a usable glob.
#[derive(Debug, thiserror::Error)]
#[error("repository pattern {pattern:?} is not a valid glob: {reason}")]
pub struct ScopeError {
    /// The pattern as given.
    pub pattern: String,
    /// What the glob parser said.
    pub reason: String,
}

impl Scope {
    /// The scope of these repository globs (`acme/*`, `acme/widgets`, `*`) and row types
    /// (empty: every type). No pattern: no repository.
    pub fn new(patterns: &[String], types: &[RowType]) -> Result<Scope, ScopeError> {
        let mut set = GlobSetBuilder::new();
        for p in patterns {
            // Both sides are lowered ASCII-only, and the glob itself matches case-sensitively.
            let glob = GlobBuilder::new(&p.to_ascii_lowercase())
                .backslash_escape(true)
                .build()
                .map_err(|e| ScopeError { pattern: p.clone(), reason: e.kind().to_string() })?;
            set.add(glob);
        }
        let repos = set
            .build()
            .map_err(|e| ScopeError { pattern: patterns.join(" "), reason: e.to_string() })?;
        let mut types = types.to_vec();
        types.sort_by_key(|t| t.as_str());
        types.dedup();
        Ok(Scope { patterns: patterns.to_vec(), repos, types })
    }

    /// The repository globs, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// The row types allowed; empty means every type.
    pub fn types(&self) -> &[RowType] {
        &self.types
    }

    /// Whether rows of `repo` may be read.
    pub fn allows_repo(&self, repo: &str) -> bool {
        self.repos.is_match(repo.to_ascii_lowercase())
    }

    /// Whether rows of type `t` may be read.
    pub fn allows_type(&self, t: RowType) -> bool {
        self.types.is_empty() || self.types.contains(&t)
    }

    /// Whether `row` may be read.
    pub fn allows(&self, row: &Row) -> bool {
        self.allows_repo(&row.repo) && self.allows_type(row.kind())
    }

    /// Whether an entity (`issue/12`, `commit/<sha>`, `release/<tag>`, `file/<path>`) of `repo`
    /// may be shown, e.g. as the other end of a cross-reference: its repository is allowed and,
    /// with a types scope, one of the row types that stand for such an entity is.
    pub fn allows_entity(&self, repo: &str, entity: &str) -> bool {
        if !self.allows_repo(repo) {
            return false;
        }
        if self.types.is_empty() {
            return true;
        }
        let family: &[RowType] = match entity.split_once('/').map_or("", |(t, _)| t) {
            "issue" => &[RowType::Issue, RowType::PullRequest],
            "commit" => &[RowType::Commit, RowType::Diff],
            "release" => &[RowType::Release],
            "file" => &[RowType::Code, RowType::Doc, RowType::WikiDoc],
            _ => &[],
        };
        family.iter().any(|t| self.types.contains(t))
    }

    /// A short stable name of what this scope allows: cursors carry it, so a cursor made under
    /// one scope is refused under another.
    pub fn fingerprint(&self) -> String {
        let mut patterns = self.patterns.clone();
        patterns.sort();
        let types: Vec<&str> = self.types.iter().map(|t| t.as_str()).collect();
        sha256_hex(format!("{}\n{}", patterns.join("\n"), types.join(",")).as_bytes())[..16]
            .to_string()
    }
}

/// The longest glob a caller may give (`files_glob`): a longer one is refused before anything
/// is compiled (a glob of 300,000 `*` compiles to a regex past globset's size limit).
pub const MAX_GLOB_CHARS: usize = 1000;

/// One glob compiled to a matcher, or why it cannot be: globset's own matcher for a single glob
/// (`Glob::compile_matcher`) panics when the compiled regex is past its size limit, while a
/// set of one reports it as an error.
pub fn glob_matcher(glob: Glob) -> Result<GlobSet, String> {
    GlobSetBuilder::new().add(glob).build().map_err(|e| {
        let shown: String = e.to_string().chars().take(200).collect();
        format!("cannot be compiled: {shown}")
    })
}

/// `text` as a glob that matches exactly `text` and nothing else: every character that is not
/// an ASCII letter or digit is escaped with a backslash (globs here are built with backslash
/// escapes on, on every platform). `globset::escape` leaves a backslash alone, so a value
/// holding one could still act as a pattern.
pub fn glob_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if !c.is_ascii_alphanumeric() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A set of row filters; an absent filter matches everything.
#[derive(Debug, Clone, Default)]
pub struct RowFilter {
    /// `owner/name`, exactly.
    pub repo: Option<String>,
    /// Any of these types.
    pub types: Vec<RowType>,
    /// `open`, `closed` or `merged`, exactly.
    pub state: Option<String>,
    /// Every one of these labels, ignoring ASCII case.
    pub labels: Vec<String>,
    /// The milestone, ignoring ASCII case.
    pub milestone: Option<String>,
    /// One of the assignees, ignoring ASCII case.
    pub assignee: Option<String>,
    /// A login, or a commit author's whole `Name <email>`, name or email, ignoring ASCII case.
    pub author: Option<String>,
    /// The row's path or one of the files it changed starts with this.
    pub path_prefix: Option<String>,
    /// The row's path or one of the files it changed matches this glob.
    pub files_glob: Option<GlobSet>,
    /// `updated_at` at or after this.
    pub since: Option<DateTime<Utc>>,
    /// `updated_at` before this.
    pub until: Option<DateTime<Utc>>,
    /// The caller's scope: not a filter the caller set (never named by [`Self::set_names`],
    /// kept by [`Self::only`]), but applied with the others.
    pub scope: Option<Scope>,
    /// Score BM25 with the whole index's statistics even under a scope that hides rows, as an
    /// unscoped caller is scored: what scoped statistics are measured against (`hubdex-bench`);
    /// never set from a tool's arguments.
    pub whole_index_statistics: bool,
}

/// The filter names, in the order answers list them.
pub const FILTER_NAMES: [&str; 11] = [
    "repo",
    "type",
    "state",
    "labels",
    "milestone",
    "assignee",
    "author",
    "path_prefix",
    "files_glob",
    "since",
    "until",
];

impl RowFilter {
    /// The names of the filters that are set, in [`FILTER_NAMES`] order.
    pub fn set_names(&self) -> Vec<&'static str> {
        let set = [
            self.repo.is_some(),
            !self.types.is_empty(),
            self.state.is_some(),
            !self.labels.is_empty(),
            self.milestone.is_some(),
            self.assignee.is_some(),
            self.author.is_some(),
            self.path_prefix.is_some(),
            self.files_glob.is_some(),
            self.since.is_some(),
            self.until.is_some(),
        ];
        FILTER_NAMES.iter().zip(set).filter(|(_, s)| *s).map(|(n, _)| *n).collect()
    }

    /// Whether no filter is set (a scope is not a filter: see [`Self::scope`]).
    pub fn is_empty(&self) -> bool {
        self.set_names().is_empty()
    }

    /// The filter `name` alone (the others unset), within the same scope.
    pub fn only(&self, name: &str) -> RowFilter {
        let mut f = RowFilter { scope: self.scope.clone(), ..RowFilter::default() };
        match name {
            "repo" => f.repo = self.repo.clone(),
            "type" => f.types = self.types.clone(),
            "state" => f.state = self.state.clone(),
            "labels" => f.labels = self.labels.clone(),
            "milestone" => f.milestone = self.milestone.clone(),
            "assignee" => f.assignee = self.assignee.clone(),
            "author" => f.author = self.author.clone(),
            "path_prefix" => f.path_prefix = self.path_prefix.clone(),
            "files_glob" => f.files_glob = self.files_glob.clone(),
            "since" => f.since = self.since,
            "until" => f.until = self.until,
            _ => {}
        }
        f
    }

    /// Whether `row` passes every filter: the reference semantics of the compiled index
    /// filter.
    pub fn matches(&self, row: &Row) -> bool {
        let ci = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        let paths = || row.path.iter().chain(&row.files_changed);
        self.repo.as_ref().is_none_or(|r| &row.repo == r)
            && (self.types.is_empty() || self.types.contains(&row.kind()))
            && self.state.as_ref().is_none_or(|s| row.state.as_deref() == Some(s.as_str()))
            && self.labels.iter().all(|l| row.labels.iter().any(|x| ci(x, l)))
            && self
                .milestone
                .as_ref()
                .is_none_or(|m| row.milestone.as_deref().is_some_and(|x| ci(x, m)))
            && self.assignee.as_ref().is_none_or(|a| row.assignees.iter().any(|x| ci(x, a)))
            && self.author.as_ref().is_none_or(|a| {
                row.author.as_deref().is_some_and(|x| author_keys(x).iter().any(|k| ci(k, a)))
            })
            && self.path_prefix.as_ref().is_none_or(|p| paths().any(|x| x.starts_with(p.as_str())))
            && self.files_glob.as_ref().is_none_or(|g| paths().any(|x| g.is_match(x)))
            && self.since.is_none_or(|s| row.updated_at.is_some_and(|t| t >= s))
            && self.until.is_none_or(|u| row.updated_at.is_some_and(|t| t < u))
            && self.scope.as_ref().is_none_or(|s| s.allows(row))
    }
}

/// What an author filter can name: a login or `Name <email>` whole, and for the latter the name
/// and the email alone.
pub(crate) fn author_keys(author: &str) -> Vec<&str> {
    let mut keys = vec![author];
    if let Some((name, email)) = author.rsplit_once(" <") {
        keys.push(name);
        keys.push(email.trim_end_matches('>'));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authors_match_by_login_name_or_email() {
        let mut row = Row::new(RowType::Commit, "o/r", "commit/a", 0);
        let f = |a: &str| RowFilter { author: Some(a.into()), ..Default::default() };
        row.author = Some("octocat".into());
        assert!(f("OctoCat").matches(&row));
        row.author = Some("Ada Lovelace <ada@example.com>".into());
        assert!(f("ada@example.com").matches(&row));
        assert!(f("ada lovelace").matches(&row));
        assert!(!f("ada").matches(&row));
    }

    #[test]
    fn scopes_match_repositories_by_glob_ignoring_case() {
        let s = Scope::new(&["acme/*".into(), "Other/Exact".into()], &[]).unwrap();
        assert!(s.allows_repo("acme/widgets"));
        assert!(s.allows_repo("ACME/gadgets"));
        assert!(s.allows_repo("other/exact"));
        assert!(!s.allows_repo("acmecorp/widgets"));
        assert!(!s.allows_repo("other/exact2"));
        let none = Scope::new(&[], &[]).unwrap();
        assert!(!none.allows_repo("acme/widgets"));
        let err = Scope::new(&["acme/[".into()], &[]).unwrap_err().to_string();
        assert!(err.starts_with("repository pattern \"acme/[\" is not a valid glob"), "{err}");
    }

    #[test]
    fn scopes_fold_ascii_case_only() {
        let s = Scope::new(&["stripe/*".into(), "kube/x".into()], &[]).unwrap();
        assert!(s.allows_repo("Stripe/api") && s.allows_repo("KUBE/X"));
        // U+017F LATIN SMALL LETTER LONG S folds to `s`, U+212A KELVIN SIGN to `k`.
        assert!(!s.allows_repo("\u{17f}tripe/api"));
        assert!(!s.allows_repo("\u{212a}ube/x"));
        let s = Scope::new(&["\u{17f}tripe/*".into()], &[]).unwrap();
        assert!(!s.allows_repo("stripe/api") && s.allows_repo("\u{17f}tripe/api"));
    }

    #[test]
    fn a_literal_glob_matches_its_text_alone() {
        let others = ["acme", "acme/x", "a", "x", "\\", "ACME", "", "ab", "a\\b", "a*", "aXb"];
        for text in [
            "acme\\", "a\\b", "\\a\\c", "*", "a*", "?", "a?b", "[a]", "[!x]", "{a,b}", "a,b", "-",
            "é", "\u{17f}",
        ] {
            let s = Scope::new(&[glob_literal(text)], &[]).unwrap();
            assert!(s.allows_repo(text), "{text:?} must match itself");
            for o in others.iter().filter(|o| !o.eq_ignore_ascii_case(text)) {
                assert!(!s.allows_repo(o), "{text:?} as a literal glob matched {o:?}");
            }
        }
    }

    #[test]
    fn a_types_scope_hides_other_rows_and_entities() {
        let s = Scope::new(&["*".into()], &[RowType::Issue]).unwrap();
        let row = Row::new(RowType::Commit, "o/r", "commit/a", 0);
        assert!(!s.allows(&row));
        assert!(s.allows_entity("o/r", "issue/3"));
        assert!(!s.allows_entity("o/r", "commit/abc"));
        let f = RowFilter { scope: Some(s.clone()), ..Default::default() };
        assert!(f.is_empty(), "a scope is not a filter the caller set");
        assert!(!f.matches(&row));
        assert_eq!(f.only("labels").scope.map(|s| s.fingerprint()), Some(s.fingerprint()));
        let other = Scope::new(&["*".into()], &[]).unwrap();
        assert_ne!(s.fingerprint(), other.fingerprint());
    }

    #[test]
    fn set_names_follow_the_answer_order() {
        let f = RowFilter {
            until: Some(Utc::now()),
            repo: Some("o/r".into()),
            labels: vec!["bug".into()],
            ..Default::default()
        };
        assert_eq!(f.set_names(), ["repo", "labels", "until"]);
        assert_eq!(f.only("labels").set_names(), ["labels"]);
    }
}
