#!/usr/bin/env python3
"""A fake GitHub for `ci/image --check`: the REST API hubdex-index crawls (one repository with
an issue, its comment, a merged pull request and a release, in the shape GitHub answers: nested
users and labels, nulls, the `pull_request` key on issue items, rate-limit headers, ETags) and
git's dumb HTTP protocol over a bare repository, both over HTTPS with a certificate from a CA
of the caller's. The image then clones and crawls it as it would github.com.

    fake_github.py --port P --cert server.pem --key server.key --git-root DIR --repo acme/shop

Prints `ready` once it listens. The bare repository is DIR/acme/shop.git (after
`git update-server-info`, so static files serve a clone).
"""

import argparse
import hashlib
import http.server
import json
import pathlib
import ssl


def user(login, uid):
    return {
        "login": login, "id": uid, "node_id": f"U_{uid}", "type": "User", "site_admin": False,
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "html_url": f"https://github.com/{login}",
    }


def payload(repo, base):
    web = f"https://github.com/{repo}"
    owner, name = repo.split("/")
    at = "2024-03-0{}T10:00:00Z".format
    issue = {
        "url": f"{base}/repos/{repo}/issues/1", "html_url": f"{web}/issues/1", "id": 1001,
        "node_id": "I_1", "number": 1, "title": "Card payments fail without retry on gateway timeouts",
        "user": user("grace", 8), "labels": [{"id": 5, "name": "bug", "color": "d73a4a", "default": True}],
        "state": "closed", "state_reason": "completed", "locked": False, "assignees": [user("ada", 7)],
        "milestone": None, "comments": 1, "created_at": at(1), "updated_at": at(3), "closed_at": at(3),
        "author_association": "CONTRIBUTOR",
        "body": "A gateway timeout drops the payment: the checkout should retry with backoff.",
    }
    pull_item = {
        "url": f"{base}/repos/{repo}/issues/2", "html_url": f"{web}/pull/2", "id": 1002, "node_id": "PR_2",
        "number": 2, "title": "Retry card payments with exponential backoff", "user": user("ada", 7),
        "labels": [], "state": "closed", "state_reason": None, "locked": False, "assignees": [],
        "milestone": None, "comments": 0, "created_at": at(2), "updated_at": at(3), "closed_at": at(3),
        "author_association": "OWNER", "body": "Fixes #1: three tries, doubling the wait.",
        "pull_request": {"url": f"{base}/repos/{repo}/pulls/2", "html_url": f"{web}/pull/2",
                         "merged_at": at(3)},
    }
    pull = {
        "url": f"{base}/repos/{repo}/pulls/2", "html_url": f"{web}/pull/2", "number": 2, "state": "closed",
        "title": pull_item["title"], "user": user("ada", 7), "body": pull_item["body"], "draft": False,
        "merged_at": at(3), "merge_commit_sha": None, "created_at": at(2), "updated_at": at(3),
        "base": {"label": f"{owner}:main", "ref": "main", "sha": "0" * 40},
        "head": {"label": f"{owner}:retry", "ref": "retry", "sha": "1" * 40},
    }
    comment = {
        "url": f"{base}/repos/{repo}/issues/comments/501", "html_url": f"{web}/issues/1#issuecomment-501",
        "id": 501, "node_id": "IC_501", "user": user("ada", 7), "created_at": at(2), "updated_at": at(2),
        "author_association": "OWNER", "body": "Reproduced: the gateway answers 504 after 30 s.",
    }
    release = {
        "url": f"{base}/repos/{repo}/releases/9", "html_url": f"{web}/releases/tag/v1.0.0", "id": 9,
        "node_id": "RE_9", "tag_name": "v1.0.0", "target_commitish": "main", "name": "1.0.0",
        "draft": False, "prerelease": False, "created_at": at(4), "published_at": at(4),
        "author": user("ada", 7), "assets": [], "body": "Card payments retry on gateway timeouts.",
    }
    meta = {
        "id": 42, "node_id": "R_42", "name": name, "full_name": repo, "private": False,
        "owner": user(owner, 1), "html_url": web, "description": "A fake repository", "fork": False,
        "url": f"{base}/repos/{repo}", "clone_url": f"{base}/git/{repo}.git",
        "default_branch": "main", "has_issues": True, "has_wiki": False, "archived": False,
        "visibility": "public", "pushed_at": at(4), "created_at": at(1), "updated_at": at(4),
    }
    r = f"/repos/{repo}"
    return {
        r: meta,
        f"{r}/issues": [pull_item, issue],
        f"{r}/issues/1": issue,
        f"{r}/issues/2": pull_item,
        f"{r}/issues/1/comments": [comment],
        f"{r}/issues/2/comments": [],
        f"{r}/pulls/2": pull,
        f"{r}/pulls/2/reviews": [],
        f"{r}/pulls/2/comments": [],
        f"{r}/releases": [release],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--git-root", required=True)
    ap.add_argument("--repo", required=True)
    args = ap.parse_args()
    base = f"https://127.0.0.1:{args.port}"
    answers = payload(args.repo, base)
    git_root = pathlib.Path(args.git_root).resolve()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def send(self, status, body, ctype, extra=()):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path.startswith("/git/"):
                # Dumb HTTP: the bare repository's files as they are (info/refs, objects/...).
                f = (git_root / path[len("/git/"):]).resolve()
                if git_root in f.parents and f.is_file():
                    return self.send(200, f.read_bytes(), "application/octet-stream")
                return self.send(404, b"not found\n", "text/plain")
            answer = answers.get(path)
            if answer is None:
                body = json.dumps({"message": "Not Found",
                                   "documentation_url": "https://docs.github.com/rest"}).encode()
                return self.send(404, body, "application/json; charset=utf-8")
            body = json.dumps(answer).encode()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            if self.headers.get("If-None-Match") == etag:
                return self.send(304, b"", "application/json; charset=utf-8", [("ETag", etag)])
            self.send(200, body, "application/json; charset=utf-8", [
                ("ETag", etag), ("X-RateLimit-Limit", "60"), ("X-RateLimit-Remaining", "59"),
                ("X-RateLimit-Reset", "4102444800"), ("X-RateLimit-Resource", "core"),
                ("X-GitHub-Api-Version-Selected", "2022-11-28")])

        def log_message(self, fmt, *a):
            print(f"fake-github: {self.command} {self.path} {a[1] if len(a) > 1 else ''}", flush=True)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(args.cert, args.key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
