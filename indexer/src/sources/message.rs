//! A commit message as hubdex indexes it: the title and description apart from what every
//! commit says (trailers, `git revert`'s line, a merge's "Merge pull request" subject).

use crate::sources::git::Commit;

/// What a commit message says about the change, apart from what every commit says: the title
/// (a merged pull request's own title rather than "Merge pull request #N from …") and the
/// description without trailers (`Signed-off-by:`, `Co-authored-by:`, `Change-Id:` …) and
/// without `git revert`'s `This reverts commit <sha>.` line. `extra` holds what the title
/// replaced (the merge subject, whose branch name is still worth matching).
#[derive(Debug, PartialEq)]
pub(crate) struct Message {
    pub title: String,
    pub description: String,
    pub extra: Option<String>,
}

impl Message {
    /// The message of `c`, cleaned. Of a message read only in part ([`Commit::message_more`]),
    /// what was held: its last paragraph is not the message's, so it is kept whatever it holds.
    pub(crate) fn of(c: &Commit) -> Message {
        clean_message(&c.message, c.message_more == 0)
    }
}

/// Splits and cleans a commit message (see [`Message`]); `whole` when `message` is all of it:
/// its end is the message's, and its last paragraph may be trailers. Of a message held in part,
/// the end of what was held is kept as it is (the rest follows it).
pub(crate) fn clean_message(message: &str, whole: bool) -> Message {
    let mut lines = message.lines();
    let subject = lines.next().unwrap_or("").trim().to_string();
    let mut body: Vec<&str> = lines.collect();
    // Trailers: the last paragraph when every line of it is one, and sign-offs anywhere.
    if whole {
        while body.last().is_some_and(|l| l.trim().is_empty()) {
            body.pop();
        }
        let last_para = body.iter().rposition(|l| l.trim().is_empty()).map_or(0, |i| i + 1);
        if last_para < body.len() && body[last_para..].iter().all(|l| is_trailer(l)) {
            body.truncate(last_para);
        }
    }
    body.retain(|l| {
        let lower = l.trim_start().to_ascii_lowercase();
        !(lower.starts_with("signed-off-by:")
            || lower.starts_with("co-authored-by:")
            || lower.starts_with("this reverts commit ")
            || lower.starts_with("changes made to "))
    });
    let description = body.join("\n");
    let description = if whole { description.trim() } else { description.trim_start() };
    let description = description.to_string();
    // "Merge pull request #N from owner/branch" says nothing of the change; GitHub puts the
    // pull request's title on the next line.
    if subject.starts_with("Merge pull request #") {
        let (first, rest) = match description.split_once('\n') {
            Some((f, r)) => (f.trim().to_string(), r.trim().to_string()),
            None => (description.clone(), String::new()),
        };
        if !first.is_empty() {
            return Message { title: first, description: rest, extra: Some(subject) };
        }
    }
    Message { title: subject, description, extra: None }
}

/// A `Key: value` trailer line (`Signed-off-by`, `Change-Id`, `Reviewed-on`, `Cc` …): a key of
/// letters, digits and dashes with a dash in it (or `Cc`), then a value.
fn is_trailer(line: &str) -> bool {
    let Some((key, value)) = line.trim().split_once(": ") else { return false };
    !value.trim().is_empty()
        && key.len() <= 40
        && key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && (key.contains('-') || key.eq_ignore_ascii_case("cc"))
}
