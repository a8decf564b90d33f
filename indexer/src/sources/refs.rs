//! What a text mentions: `#N`, `owner/repo#N`, commit SHAs and GitHub URLs.

use std::collections::BTreeSet;

/// The references a text makes, deduplicated and sorted.
pub fn find_refs(text: &str) -> Vec<String> {
    let mut out = BTreeSet::new();
    for word in text.split(|c: char| c.is_whitespace() || "()[]<>,;\"'`".contains(c)) {
        let word = word.trim_end_matches(['.', ':', '!', '?']);
        if word.starts_with("https://github.com/") || word.starts_with("http://github.com/") {
            out.insert(word.to_string());
        } else if let Some((repo, num)) = word.split_once('#') {
            let repo_ok = repo.is_empty()
                || (repo.split('/').count() == 2
                    && repo.split('/').all(|p| {
                        !p.is_empty()
                            && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                    }));
            if repo_ok
                && !num.is_empty()
                && num.len() <= 9
                && num.chars().all(|c| c.is_ascii_digit())
            {
                out.insert(word.to_string());
            }
        } else if (7..=40).contains(&word.len())
            && word.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_alphabetic())
        {
            out.insert(word.to_string());
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expect: &[&str]) {
        assert_eq!(
            find_refs(text),
            expect.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "{text}"
        );
    }

    #[test]
    fn issue_numbers_shas_and_urls() {
        check("fixes #12 and rust-lang/rust#99.", &["#12", "rust-lang/rust#99"]);
        check(
            "reverts 1a2b3c4d5e (see https://github.com/o/r/pull/3)",
            &["1a2b3c4d5e", "https://github.com/o/r/pull/3"],
        );
        check("no refs here: a#b, #, deadbeef-ish words, 12345678", &[]);
        check("C# and F#", &[]);
    }
}
