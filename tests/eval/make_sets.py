#!/usr/bin/env python3
"""Builds the eval sets under tests/eval/ (run it only to change them; they are committed).

docstring.jsonl: docstring → code, CodeSearchNet's method on real crates from the local cargo
registry. For every `pub fn` with a `///` doc comment, the query is the first sentence of the
comment and the relevant item is the line of the `fn` (a `path:line` span in the crate's
repository, `local/<crate>-<version>`). The indexer strips doc comments from code chunks when
building the eval snapshot (strip_doc_comments = true), so the answer is not a copy of the
question. Queries that occur more than once in a crate are dropped (no single right answer).

commits.jsonl: commit search over this repository's history: the query is a commit's subject,
the relevant item its sha (a known-item search, the commits up to the one checked out).
"""
import glob
import json
import os
import random
import re
import subprocess
import sys

CRATES = ["itertools-0.14.0", "indexmap-2.14.2", "url-2.5.8", "bytes-1.12.2"]
PER_CRATE = 150
HERE = os.path.dirname(os.path.abspath(__file__))

FN = re.compile(r'^\s*pub\s+((const|async|unsafe|extern\s+"C")\s+)*fn\s+(\w+)')


def registry_dir(crate):
    hits = sorted(glob.glob(os.path.expanduser(f"~/.cargo/registry/src/*/{crate}")))
    if not hits:
        sys.exit(f"{crate} is not in ~/.cargo/registry/src: run `cargo fetch --manifest-path {HERE}/crates/Cargo.toml`")
    return hits[0]


def clean(text):
    text = re.sub(r"\[`([^`\]]+)`\](\([^)]*\)|\[[^\]]*\])?", r"\1", text)
    text = re.sub(r"\[([^\]]+)\](\([^)]*\)|\[[^\]]*\])", r"\1", text)
    return text.replace("`", "").strip()


def first_sentence(doc_lines):
    para = []
    for line in doc_lines:
        if not line.strip():
            break
        para.append(line.strip())
    text = clean(" ".join(para))
    m = re.search(r"(.+?[.!?])(\s|$)", text)
    return (m.group(1) if m else text).strip()


def docstring_queries(crate):
    root = registry_dir(crate)
    found = []
    for path in sorted(glob.glob(f"{root}/src/**/*.rs", recursive=True)):
        rel = os.path.relpath(path, root)
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
        i = 0
        while i < len(lines):
            s = lines[i].strip()
            if not s.startswith("///") or s.startswith("////"):
                i += 1
                continue
            doc = []
            while i < len(lines) and lines[i].strip().startswith("///") and not lines[i].strip().startswith("////"):
                doc.append(lines[i].strip()[3:])
                i += 1
            while i < len(lines) and lines[i].strip().startswith("#["):
                i += 1
            if i < len(lines) and FN.match(lines[i]):
                q = first_sentence(doc)
                if len(q.split()) >= 4 and not q.startswith("#"):
                    found.append((q, f"{rel}:{i + 1}"))
    counts = {}
    for q, _ in found:
        counts[q.lower()] = counts.get(q.lower(), 0) + 1
    unique = [(q, span) for q, span in found if counts[q.lower()] == 1]
    random.Random(crate).shuffle(unique)
    return sorted(unique[:PER_CRATE], key=lambda x: x[1])


def main():
    out = []
    for crate in CRATES:
        qs = docstring_queries(crate)
        print(f"{crate}: {len(qs)} queries", file=sys.stderr)
        out += [{"query": q, "relevant": [span], "repo": f"local/{crate}"} for q, span in qs]
    with open(f"{HERE}/docstring.jsonl", "w") as f:
        for o in out:
            f.write(json.dumps(o) + "\n")
    print(f"docstring.jsonl: {len(out)} queries", file=sys.stderr)

    log = subprocess.run(["git", "-C", HERE, "log", "--no-merges", "--format=%H%x1f%s"],
                         check=True, capture_output=True, text=True).stdout
    commits = []
    for line in log.splitlines():
        sha, subject = line.split("\x1f", 1)
        if len(subject.split()) >= 4:
            commits.append({"query": subject, "relevant": [sha]})
    with open(f"{HERE}/commits.jsonl", "w") as f:
        for o in commits:
            f.write(json.dumps(o) + "\n")
    print(f"commits.jsonl: {len(commits)} queries", file=sys.stderr)


if __name__ == "__main__":
    main()
