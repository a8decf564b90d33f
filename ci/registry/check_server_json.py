#!/usr/bin/env python3
"""Check server.json, hubdex's entry for the official MCP registry.

  check_server_json.py SERVER_JSON --schema FILE_OR_URL [--repo ROOT] [--self-test]

--schema: a JSON Schema file or an https:// URL (release.yml passes the published
2025-12-11 schema; ./ci/test passes ci/registry/server-json-2025-12-11.schema.json, our
transcription of its rules, since this machine cannot fetch it).
--repo: also check that server.json agrees with the repository it describes: the version in
Cargo.toml, the image name and its io.modelcontextprotocol.server.name label, the repository
URL, and that every environment variable it names is documented in docs/deploy.md.
--self-test: first show that the validator refuses broken copies of SERVER_JSON, so a pass
means something.
Exit status 0 when every check passes; each failure is printed with the path it concerns.
"""

import argparse
import copy
import json
import re
import sys
import urllib.request
from pathlib import Path

from jsonschema import Draft7Validator, FormatChecker


def load_schema(where: str) -> dict:
    if where.startswith("https://"):
        with urllib.request.urlopen(where, timeout=30) as response:
            return json.load(response)
    return json.loads(Path(where).read_text(encoding="utf-8"))


def schema_errors(validator: Draft7Validator, doc: dict) -> list[str]:
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
        for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    ]


def broken_copies(doc: dict):
    """(what was broken, a copy of doc with it broken): each must fail the schema."""

    def broken(what, change):
        d = copy.deepcopy(doc)
        change(d)
        return what, d

    yield broken("description over 100 characters", lambda d: d.update(description="x" * 101))
    yield broken("name without a namespace", lambda d: d.update(name="hubdex"))
    yield broken("version 'latest'", lambda d: d.update(version="latest"))
    yield broken("version range", lambda d: d.update(version="^0.1.0"))
    yield broken("no packages[0].transport", lambda d: d["packages"][0].pop("transport"))
    yield broken("unknown package field", lambda d: d["packages"][0].update(registry_type="oci"))
    yield broken("registryType cargo", lambda d: d["packages"][0].update(registryType="cargo"))
    yield broken("transport type websocket", lambda d: d["packages"][0].update(transport={"type": "websocket"}))
    yield broken("named argument without a name", lambda d: d["packages"][0]["runtimeArguments"][0].pop("name"))
    yield broken("environment variable without a name", lambda d: d["packages"][0]["environmentVariables"][0].pop("name"))


def repo_errors(doc: dict, root: Path) -> list[str]:
    errors = []
    cargo = (root / "Cargo.toml").read_text(encoding="utf-8")
    version = re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)
    repository = re.search(r'^repository = "([^"]+)"', cargo, re.M).group(1)
    containerfile = (root / "ci/image.d/Containerfile").read_text(encoding="utf-8")
    label = re.search(r'io\.modelcontextprotocol\.server\.name="([^"]+)"', containerfile)
    deploy = (root / "docs/deploy.md").read_text(encoding="utf-8")
    image = repository.replace("https://github.com/", "ghcr.io/").lower()

    if doc["version"] != version:
        errors.append(f"version: {doc['version']!r}, Cargo.toml has {version!r}")
    if doc.get("repository", {}).get("url") != repository:
        errors.append(f"repository/url: not Cargo.toml's {repository!r}")
    if not label or label.group(1) != doc["name"]:
        errors.append(f"name: {doc['name']!r}, the image's io.modelcontextprotocol.server.name label says {label and label.group(1)!r}")
    transports = set()
    for i, package in enumerate(doc.get("packages", [])):
        transports.add(package["transport"]["type"])
        if package["registryType"] == "oci" and package["identifier"] != f"{image}:{version}":
            errors.append(f"packages/{i}/identifier: {package['identifier']!r}, the release pushes {image}:{version}")
        for var in package.get("environmentVariables", []):
            if not re.search(rf"\b{re.escape(var['name'])}\b", deploy):
                errors.append(f"packages/{i}/environmentVariables: {var['name']} is not in docs/deploy.md")
    for wanted in ("stdio", "streamable-http"):
        if wanted not in transports:
            errors.append(f"packages: no package with the {wanted} transport")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("server_json")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--repo")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()

    doc = json.loads(Path(args.server_json).read_text(encoding="utf-8"))
    schema = load_schema(args.schema)
    Draft7Validator.check_schema(schema)
    validator = Draft7Validator(schema, format_checker=FormatChecker())
    failed = False

    if args.self_test:
        for what, bad in broken_copies(doc):
            if not schema_errors(validator, bad):
                print(f"self-test: a copy with {what} passed the schema", file=sys.stderr)
                failed = True
        if not failed:
            print("self-test: every broken copy was refused", flush=True)

    errors = schema_errors(validator, doc)
    if args.repo:
        errors += repo_errors(doc, Path(args.repo))
    for e in errors:
        print(f"{args.server_json}: {e}", file=sys.stderr)
    if errors or failed:
        return 1
    print(f"{args.server_json}: valid against {args.schema}" + (" and agrees with the repository" if args.repo else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
