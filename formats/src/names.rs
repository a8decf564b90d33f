//! The one grammar for names read from a store (snapshot, segment, staged run and delivery
//! ids) and the one way a path is built from store data: a store is outside input (a shared
//! bucket, a pulled snapshot, a mirror), and a name like `../../x` must never become a path
//! outside the directory it is joined to.

use std::path::{Path, PathBuf};

use crate::error::FormatError;

/// The longest name [`check_name`] accepts.
pub const MAX_NAME_CHARS: usize = 200;

/// Checks a name read from a store: 1 to [`MAX_NAME_CHARS`] ASCII letters, digits, `.`, `_`
/// and `-`, starting with a letter or digit (so never `.`, `..`, a hidden file, a separator or
/// a drive). `what` names where it was read in the error.
pub fn check_name(what: &str, name: &str) -> Result<(), FormatError> {
    let ok = name.len() <= MAX_NAME_CHARS
        && name.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        let shown: String = name.chars().take(80).collect();
        Err(FormatError::Schema {
            what: what.to_string(),
            detail: format!(
                "{shown:?} is not a valid name: 1 to {MAX_NAME_CHARS} ASCII letters, digits, '.', \
                 '_' or '-', starting with a letter or digit"
            ),
        })
    }
}

/// `dir/<rel>` for a relative path read from a store (a segment's file list): refused unless
/// every `/`-separated part is a plain name, so the result never leaves `dir`.
pub fn safe_join(dir: &Path, rel: &str) -> Result<PathBuf, FormatError> {
    let ok = !rel.is_empty()
        && !rel.starts_with('/')
        && !rel.contains('\\')
        && !rel.contains('\0')
        && rel.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
    if !ok {
        return Err(FormatError::Schema {
            what: "segment file list".into(),
            detail: format!("{rel:?} is not a plain relative path"),
        });
    }
    Ok(dir.join(rel))
}

/// `dir/<name>` for one name read from a store (a segment or snapshot id), checked by
/// [`check_name`].
pub fn name_join(dir: &Path, what: &str, name: &str) -> Result<PathBuf, FormatError> {
    check_name(what, name)?;
    safe_join(dir, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, ok: bool) {
        assert_eq!(check_name("test", name).is_ok(), ok, "{name:?}");
    }

    #[test]
    fn names_are_plain_and_bounded() {
        for good in [
            "20261129T180000Z-abcdef12",
            "acme-widgets-0123456789abcdef",
            "merged-0123456789abcdef-0123456789abcdef",
            "local__alpha",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            "a",
        ] {
            check(good, true);
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "../../../tmp/x/pwned",
            "a/b",
            "a\\b",
            "/abs",
            "C:",
            "a\0b",
            "a b",
            "café",
            "-leading-dash",
            &"a".repeat(MAX_NAME_CHARS + 1),
        ] {
            check(bad, false);
        }
        check(&"a".repeat(MAX_NAME_CHARS), true);
    }
}
