//! `hubdex.toml`: what to index and where, for scheduled builds.
//!
//! ```toml
//! store = "s3://my-bucket/hubdex"
//! model = "/opt/models/all-MiniLM-L6-v2-int8"
//! github_api = "https://api.github.com"      # GitHub Enterprise: https://HOST/api/v3
//!
//! [[repos]]
//! name = "acme/widgets"                      # owner/name, or a local path
//! exclude_types = ["pr_review"]              # or: types = ["issue", "commit", "doc"]
//! exclude_paths = ["vendor/**", "docs/generated/**"]
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};
use hubdex_formats::{Row, RowType};
use serde::Deserialize;

use crate::github::CrawlScope;

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub store: Option<String>,
    pub model: Option<String>,
    pub github_api: Option<String>,
    #[serde(default)]
    pub repos: Vec<RepoConfig>,
}

/// One repository's entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoConfig {
    pub name: String,
    /// Only these row types (all when absent).
    pub types: Option<Vec<String>>,
    #[serde(default)]
    pub exclude_types: Vec<String>,
    /// Globs of paths whose doc, wiki, code and file rows are not indexed.
    #[serde(default)]
    pub exclude_paths: Vec<String>,
}

/// A repository's entry, checked: which types and paths are kept.
#[derive(Debug, Clone)]
pub struct RepoRules {
    types: Vec<RowType>,
    exclude_paths: GlobSet,
}

impl Default for RepoRules {
    fn default() -> Self {
        RepoRules { types: RowType::ALL.to_vec(), exclude_paths: GlobSet::empty() }
    }
}

fn parse_types(field: &str, repo: &str, names: &[String]) -> anyhow::Result<Vec<RowType>> {
    names
        .iter()
        .map(|n| n.parse::<RowType>().map_err(|e| anyhow::anyhow!("repos[{repo}].{field}: {e}")))
        .collect()
}

impl RepoRules {
    /// Checks one entry.
    pub fn new(c: &RepoConfig) -> anyhow::Result<Self> {
        let mut types = match &c.types {
            Some(t) => parse_types("types", &c.name, t)?,
            None => RowType::ALL.to_vec(),
        };
        let excluded = parse_types("exclude_types", &c.name, &c.exclude_types)?;
        types.retain(|t| !excluded.contains(t));
        let mut b = GlobSetBuilder::new();
        for g in &c.exclude_paths {
            b.add(Glob::new(g).map_err(|e| {
                anyhow::anyhow!("repos[{}].exclude_paths: {g:?} is not a valid glob: {e}", c.name)
            })?);
        }
        Ok(RepoRules { types, exclude_paths: b.build()? })
    }

    /// Whether a row is kept.
    pub fn keeps(&self, row: &Row) -> bool {
        self.types.contains(&row.kind())
            && !row.path.as_deref().is_some_and(|p| self.exclude_paths.is_match(p))
    }

    /// Whether a file's text is kept.
    pub fn keeps_path(&self, path: &str) -> bool {
        !self.exclude_paths.is_match(path)
    }

    /// What the API crawl needs to fetch for these types.
    pub fn scope(&self) -> CrawlScope {
        let any = |ts: &[RowType]| ts.iter().any(|t| self.types.contains(t));
        CrawlScope {
            issues: any(&[RowType::Issue, RowType::IssueComment]),
            pulls: any(&[
                RowType::PullRequest,
                RowType::PrReview,
                RowType::PrReviewComment,
                RowType::IssueComment,
            ]),
            releases: any(&[RowType::Release]),
        }
    }
}

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let c: Config =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        c.rules()?;
        Ok(c)
    }

    /// The rules of every repository entry, by name.
    pub fn rules(&self) -> anyhow::Result<BTreeMap<String, RepoRules>> {
        self.repos.iter().map(|r| Ok((r.name.clone(), RepoRules::new(r)?))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_names_repos_and_their_rules() {
        let c: Config = toml::from_str(
            r#"
            store = "s3://b/h"
            [[repos]]
            name = "acme/widgets"
            exclude_types = ["pr_review", "release"]
            exclude_paths = ["vendor/**"]
            "#,
        )
        .unwrap();
        let rules = c.rules().unwrap();
        let r = &rules["acme/widgets"];
        assert!(!r.scope().releases);
        assert!(r.scope().pulls);
        let mut row = Row::new(RowType::Doc, "acme/widgets", "file/vendor/x.md", 0);
        row.path = Some("vendor/x.md".into());
        assert!(!r.keeps(&row));
        row.path = Some("docs/x.md".into());
        assert!(r.keeps(&row));
    }

    #[test]
    fn mistakes_are_named() {
        let err = toml::from_str::<Config>("[[repos]]\nname = \"a/b\"\ncolour = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("colour"), "{err}");
        let c: Config =
            toml::from_str("[[repos]]\nname = \"a/b\"\ntypes = [\"issues\"]\n").unwrap();
        let err = c.rules().unwrap_err().to_string();
        assert!(err.contains("repos[a/b].types") && err.contains("pull_request"), "{err}");
    }
}
