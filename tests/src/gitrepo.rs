//! A git repository with a known history, made with the git command line.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Subjects of the generated main-branch commits. Each is about something distinct, so a
/// paraphrase of one should find that one.
const SUBJECTS: &[&str] = &[
    "Add exponential backoff when retrying failed HTTP requests",
    "Parse TOML configuration files at startup",
    "Fix off-by-one error in the pagination cursor",
    "Cache compiled regular expressions between calls",
    "Document the release process for maintainers",
    "Rename the user model to account everywhere",
    "Drop support for Python 3.7",
    "Speed up JSON serialization of large payloads",
    "Validate email addresses before sending invites",
    "Log the request id with every error message",
    "Add a dark mode toggle to the settings page",
    "Stream CSV exports instead of buffering them in memory",
    "Fix race condition when two workers claim the same job",
    "Upgrade the database driver to the latest version",
    "Add unit tests for the date formatting helpers",
    "Compress images before uploading them to the bucket",
    "Limit login attempts to stop password guessing",
    "Translate the onboarding screens into German",
    "Remove the deprecated v1 REST endpoints",
    "Show a progress bar while importing archives",
    "Handle leap years in the billing calendar",
    "Sort search results by relevance by default",
    "Add a health check endpoint for the load balancer",
    "Fix memory leak in the websocket connection pool",
    "Use UTC timestamps in all audit log entries",
    "Allow admins to export the member list",
    "Reduce Docker image size with a multi-stage build",
    "Fix crash when the uploaded file name is empty",
    "Add keyboard shortcuts for the text editor",
    "Make the sidebar collapsible on small screens",
    "Encrypt API tokens at rest",
    "Retry flaky integration tests once in CI",
    "Add a command to rebuild the search index",
    "Fix wrong currency symbol on Swiss invoices",
    "Send a weekly digest email to subscribers",
    "Normalize unicode before comparing usernames",
    "Add pagination to the comments API",
    "Warn when the disk is almost full",
    "Replace the homegrown logger with structured tracing",
    "Fix timezone bug in the meeting scheduler",
    "Add rate limiting to the public API",
    "Store thumbnails next to the original images",
    "Explain the plugin architecture in the design doc",
    "Fix broken links in the contributor guide",
    "Add support for webhooks signed with HMAC",
];

/// (query, subject it paraphrases): a test asserts each subject's commit ranks in the top 3.
pub const PARAPHRASES: &[(&str, &str)] = &[
    (
        "retry network calls with increasing delays",
        "Add exponential backoff when retrying failed HTTP requests",
    ),
    ("prevent brute force attacks on sign in", "Limit login attempts to stop password guessing"),
    (
        "memory not released by socket connections",
        "Fix memory leak in the websocket connection pool",
    ),
];

/// What [`make_repo`] made, for tests to check against.
#[derive(Debug, Clone)]
pub struct GeneratedRepo {
    pub dir: PathBuf,
    /// Every commit reachable from any branch.
    pub commits: usize,
    pub markdown_files: Vec<String>,
    /// Subject of the commit whose message is not UTF-8.
    pub non_utf8_subject_prefix: String,
    /// Subject of the commit whose diff has more than 200 lines.
    pub big_diff_subject: String,
    pub merge_subject: String,
}

fn git(dir: &Path, args: &[&str], day: u32) {
    let date = format!("2024-01-{:02}T{:02}:00:00Z", 1 + day / 24, day % 24);
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .env("GIT_AUTHOR_NAME", "Ada Lovelace")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Grace Hopper")
        .env("GIT_COMMITTER_EMAIL", "grace@example.com")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("has parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// Makes a repository in `dir`: 45 main-branch commits with distinct subjects, three markdown
/// files, a feature branch of 4 commits merged with a merge commit, a commit whose message is
/// Latin-1 (not UTF-8), and a commit adding a 300-line file.
pub fn make_repo(dir: &Path) -> GeneratedRepo {
    init(dir);
    let mut t = 0;
    let mut tick = || {
        t += 1;
        t
    };
    write(
        dir,
        "README.md",
        "# Widget service\n\nA service that stores widgets.\n\n## Installing\n\nRun `make install` and start the daemon.\n\n## Configuration\n\nSettings live in `widget.toml`; the port defaults to 8080.\n",
    );
    write(
        dir,
        "docs/guide.md",
        "# User guide\n\n## Creating widgets\n\nPOST a JSON body to /widgets.\n\n## Deleting widgets\n\nDeleted widgets stay in the trash for thirty days before they are purged.\n",
    );
    write(
        dir,
        "docs/design.md",
        "# Design\n\n## Storage\n\nWidgets are stored in PostgreSQL, one row per widget, with a JSONB column for attributes.\n\n## Plugins\n\nPlugins register hooks that run before and after each write.\n",
    );
    git(dir, &["add", "."], tick());
    git(dir, &["commit", "-q", "-m", "Initial import of the widget service"], tick());
    for (i, subject) in SUBJECTS.iter().enumerate() {
        write(dir, &format!("src/module{}.txt", i % 7), &format!("change {i}: {subject}\n"));
        git(dir, &["add", "."], tick());
        let body = format!("{subject}\n\nThis change is number {i}. Refs #{}.", i + 1);
        git(dir, &["commit", "-q", "-m", &body], tick());
        if i == 20 {
            git(dir, &["checkout", "-q", "-b", "feature/search"], tick());
            for k in 0..4 {
                write(dir, &format!("search/part{k}.txt"), &format!("search part {k}\n"));
                git(dir, &["add", "."], tick());
                git(
                    dir,
                    &[
                        "commit",
                        "-q",
                        "-m",
                        &format!("Search feature step {k}: build the inverted index part {k}"),
                    ],
                    tick(),
                );
            }
            git(dir, &["checkout", "-q", "main"], tick());
        }
    }
    let merge_subject = "Merge the search feature branch".to_string();
    git(dir, &["merge", "-q", "--no-ff", "feature/search", "-m", &merge_subject], tick());

    // A commit message in Latin-1: "Café: fix encoding of the menu" with é as the byte 0xE9.
    write(dir, "src/menu.txt", "menu\n");
    git(dir, &["add", "."], tick());
    let msg_path = dir.join(".git").join("LATIN1_MSG");
    std::fs::write(
        &msg_path,
        b"Caf\xe9: fix encoding of the menu\n\nThe menu showed caf\xe9 wrongly.\n",
    )
    .expect("write msg");
    git(
        dir,
        &[
            "-c",
            "i18n.commitEncoding=",
            "commit",
            "-q",
            "--cleanup=verbatim",
            "-F",
            msg_path.to_str().expect("utf8 path"),
        ],
        tick(),
    );

    let big: String = (0..300).map(|i| format!("generated line {i}\n")).collect();
    write(dir, "data/big.txt", &big);
    git(dir, &["add", "."], tick());
    let big_diff_subject = "Add the generated lookup table".to_string();
    git(dir, &["commit", "-q", "-m", &big_diff_subject], tick());

    GeneratedRepo {
        dir: dir.to_path_buf(),
        // initial + subjects + 4 feature + merge + latin1 + big
        commits: 1 + SUBJECTS.len() + 4 + 1 + 1 + 1,
        markdown_files: vec!["README.md".into(), "docs/design.md".into(), "docs/guide.md".into()],
        non_utf8_subject_prefix: "Caf".into(),
        big_diff_subject,
        merge_subject,
    }
}

/// Source files in every language the code chunker parses, with the symbols each should give.
pub const CODE_FILES: &[(&str, &str, &[&str])] = &[
    (
        "src/http.rs",
        "//! HTTP helpers.\n\nuse std::io;\n\n/// Parses one request line.\npub fn parseHttpRequest(line: &str) -> io::Result<(String, String)> {\n    let mut parts = line.split(' ');\n    let method = parts.next().unwrap_or_default().to_string();\n    let path = parts.next().unwrap_or_default().to_string();\n    Ok((method, path))\n}\n\npub struct Router {\n    routes: Vec<String>,\n}\n\nimpl Router {\n    pub fn add_route(&mut self, r: &str) {\n        self.routes.push(r.to_string());\n    }\n}\n",
        &["parseHttpRequest", "Router", "Router::add_route"],
    ),
    (
        "tools/report.py",
        "import sys\n\n\nclass Ledger:\n    def balance_of(self, account):\n        return 0\n\n\ndef summarize_ledger(rows):\n    \"\"\"Totals the ledger.\"\"\"\n    return sum(rows)\n",
        &["Ledger.balance_of", "summarize_ledger"],
    ),
    (
        "web/cart.js",
        "export function addToCart(cart, item) {\n  cart.push(item);\n  return cart;\n}\n\nclass Checkout {\n  pay(amount) {\n    return amount > 0;\n  }\n}\n",
        &["addToCart", "Checkout.pay"],
    ),
    (
        "web/types.ts",
        "export interface Invoice {\n  total: number;\n}\n\nexport function computeTax(invoice: Invoice): number {\n  return invoice.total * 0.2;\n}\n",
        &["Invoice", "computeTax"],
    ),
    (
        "cmd/server.go",
        "package main\n\nimport \"net/http\"\n\ntype Server struct {\n\tmux *http.ServeMux\n}\n\nfunc (s *Server) HandleHealth(w http.ResponseWriter) {\n\tw.WriteHeader(200)\n}\n\nfunc main() {}\n",
        &["Server", "Server.HandleHealth", "main"],
    ),
    (
        "java/Inventory.java",
        "package shop;\n\npublic class Inventory {\n    private int count;\n\n    public int restockShelves(int n) {\n        count += n;\n        return count;\n    }\n}\n",
        &["Inventory.restockShelves"],
    ),
    (
        "native/ring.c",
        "#include <stdlib.h>\n\nstruct ring {\n  int *slots;\n};\n\nint ring_push(struct ring *r, int v) {\n  r->slots[0] = v;\n  return 0;\n}\n",
        &["ring", "ring_push"],
    ),
    (
        "native/cache.cpp",
        "#include <map>\n\nnamespace store {\n\nint evict_oldest(std::map<int, int>& m) {\n  m.erase(m.begin());\n  return 0;\n}\n\n}  // namespace store\n",
        &["store::evict_oldest"],
    ),
];

/// A new repository in `dir`, with no commits.
fn init(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir repo");
    git(dir, &["init", "-q", "-b", "main"], 0);
}

/// Writes `files` (path, text) and commits them with `message`, dated `day`.
fn commit(dir: &Path, files: &[(&str, &str)], message: &str, day: u32) {
    for (path, text) in files {
        write(dir, path, text);
    }
    git(dir, &["add", "."], day);
    git(dir, &["commit", "-q", "-m", message], day);
}

/// Makes a repository of one commit holding [`CODE_FILES`].
pub fn make_code_repo(dir: &Path) {
    init(dir);
    let files: Vec<(&str, &str)> = CODE_FILES.iter().map(|(p, t, _)| (*p, *t)).collect();
    commit(dir, &files, "Add the shop services in seven languages", 1);
}

/// The function only the second file of [`make_long_diff_repo`]'s big commit defines.
pub const LATE_FUNCTION: &str = "zephyr_rebalance_shards";

/// Makes a repository whose second commit changes a 300-line file and then, past the 200 diff
/// lines a commit row keeps, a file defining [`LATE_FUNCTION`]: only that commit's diff row
/// has the name.
pub fn make_long_diff_repo(dir: &Path) {
    init(dir);
    commit(
        dir,
        &[("README.md", "# Shards\n\nA tiny shard balancer.\n")],
        "Start the shard balancer",
        1,
    );
    let big: String = (0..300).map(|i| format!("entry {i}\n")).collect();
    let late = format!("pub fn {LATE_FUNCTION}() -> usize {{\n    42\n}}\n");
    commit(
        dir,
        &[("a_table.txt", &big), ("z_balance.rs", &late)],
        "Grow the table\n\nMore entries.",
        2,
    );
}

/// The subject of [`make_near_duplicate_repo`]'s second commit, word for word.
pub const KNOWN_SUBJECT: &str = "A ./path or ../path is never taken for owner/name";

/// Makes a repository whose second commit's subject is [`KNOWN_SUBJECT`] and whose third
/// repeats it with " (applied)", in a description that says it again, changing files named by
/// its words: BM25 prefers the third for the second's subject.
pub fn make_near_duplicate_repo(dir: &Path) {
    init(dir);
    let readme = "# Resolver\n\nTurns what a user typed into a repository.\n";
    commit(dir, &[("README.md", readme)], "Start the resolver", 1);
    let resolve = "pub fn resolve(arg: &str) -> bool {\n    arg.contains('/')\n}\n";
    commit(dir, &[("src/resolve.rs", resolve)], KNOWN_SUBJECT, 2);
    let owner_name = "/// A ./path or ../path is a path, never owner/name.\n\
        pub fn path_or_owner_name(path: &str) -> bool {\n    \
        !path.starts_with(\"./\") && !path.starts_with(\"../\")\n}\n";
    let message = format!(
        "{KNOWN_SUBJECT} (applied)\n\nApplies the rule everywhere: a ./path or ../path is a path, \
         never owner/name, and owner/name is never a path."
    );
    commit(dir, &[("src/path/owner_name.rs", owner_name)], &message, 3);
}
