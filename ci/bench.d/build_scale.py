#!/usr/bin/env python3
"""The build at scale (issue 30): peak memory and speed of a build as the history grows.

  build_scale.py HUBDEX_BENCH WORK SIZES [--fd-bundle PATH --model DIR] [--json]

For each size (commits, e.g. 10000,40000) a synthetic history is written once
(`hubdex-bench history`: git fast-import, commits with multi-file diffs, code at HEAD) and
cached under WORK. Each build runs in a process of its own (`hubdex-bench build`), so the peak
RSS it reports (VmHWM) is that build's, and also its peak before the serving merge and publish (what
the budget governs). These builds embed with a cheap deterministic hash
embedder, labelled so: the model would take hours at these sizes, and what is measured is
everything but embedding. `hubdex-bench build` runs with the malloc settings `hubdex-index`
runs with (it restarts itself with glibc's trim threshold fixed, as hubdex-index does); to
measure an older hubdex-bench alike, run this with MALLOC_TRIM_THRESHOLD_=131072. Per size:

  - one segment: the build with a budget so large the repository stays one build segment
    (what every build was before the memory budget);
  - budget: the same history under the default budget (3 GiB) and under 256 MiB;
  - rebuild: the 256 MiB store built again with nothing changed;
  - delta: one commit more, then built again (what it embeds, writes, and its time);
  - staged delta: one commit more through the stages a workflow runs (`--stage crawl`, then
    `embed`, then `publish`, each a process of its own): their seconds added up, the largest
    of their peaks;
  the rebuild and the deltas say how many commits' diffs they did not read (build segments
  of history rows found again by their spans);
  - with references: a history of the same size whose every commit names its pull request and
    closes an issue (`hubdex-bench history --references`: two edges a commit, as a GitHub
    project's history has; the others state none), under 256 MiB.

Then the smallest size under 256 MiB again, cloned under five other names: the cut falls
elsewhere each time, and each larger size's peak is printed against the worst of them.

With --fd-bundle and --model, the real model's peak on a real repository: sharkdp/fd (from
the bundle in ../shared/eval), built with the model and the default budget.

Prints a table with ratios (peak against the smallest size, budget against one segment), or
one JSON object with --json. Reports, never asserts. Under a small budget the smallest size's
peak is that of its largest build segment, and where the content-defined cut falls depends on
the rows' ids, the repository's name among them: the same 10k history measured 76-105 MiB
under 256 MiB as its clone's directory name changed (docs/performance.md), so read that
ratio against a worst-case small build.
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path


def run_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def history(bench: str, work: Path, commits: int, references: bool = False) -> Path:
    """The cached synthetic history of `commits` commits (whose messages name pull requests
    and close issues, with `references`)."""
    name = f"history-{commits}" + ("-references" if references else "")
    done = work / f"{name}.done"
    repo = work / name
    if not done.exists():
        shutil.rmtree(repo, ignore_errors=True)
        print(f"build-scale: writing {name}", file=sys.stderr)
        extra = ["--references"] if references else []
        run_json([bench, "history", "--out", str(repo), "--commits", str(commits)] + extra)
        done.write_text("ok\n")
    return repo


def build(bench: str, source: Path, store: Path, budget: str, extra: list[str] = ()) -> dict:
    cmd = [bench, "build", "--source", str(source), "--store", str(store), "--budget", budget]
    return run_json(cmd + list(extra))


def staged(bench: str, source: Path, store: Path, budget: str) -> dict:
    """A one-commit delta through the three stages, as one result row."""
    crawl = build(bench, source, store, budget, ["--stage", "crawl", "--add-commit", "Staged"])
    embed = build(bench, source, store, budget, ["--stage", "embed"])
    publish = build(bench, source, store, budget, ["--stage", "publish"])
    seconds = crawl["seconds"] + embed["seconds"] + publish["seconds"]
    other = max(seconds - embed["embed_seconds"], 1e-9)
    return {
        "rows": embed["rows"], "embedded": embed["embedded"],
        "segments_written": embed["segments_written"],
        "segments_unchanged": embed["segments_unchanged"],
        "commits_skipped": crawl["commits_skipped"], "seconds": seconds,
        "non_embedding_rows_per_s": embed["rows"] / other,
        "peak_rss_kib": max(crawl["peak_rss_kib"], embed["peak_rss_kib"], publish["peak_rss_kib"]),
        "peak_rss_before_publish_kib": max(crawl["peak_rss_kib"], embed["peak_rss_kib"]),
        "stages": {"crawl": crawl, "embed": embed, "publish": publish},
    }


# The names the smallest history is cloned under to measure how much its cut decides.
CUT_NAMES = ["alpha", "beta", "gamma", "delta", "epsilon"]

# The small budget every size is cut under, and the step that builds under it (what the cuts
# of the smallest size are compared with).
SMALL_BUDGET = "256MiB"
CUT_STEP = "budget 256 MiB"
REFERENCES_STEP = "with references (two edges a commit), budget 256 MiB"


def smallest_cuts(bench: str, work: Path, commits: int) -> dict:
    """The smallest history built under 256 MiB from clones of other names. A row's id holds
    its repository's name, so each name's content-defined cut falls elsewhere; a small history
    is a few build segments, and its peak is its largest one's. The ratio of a larger history's
    peak to the worst of these is the growth; to one lucky cut it is not."""
    pristine = history(bench, work, commits)
    run = work / f"cuts-{commits}"
    builds = []
    for name in CUT_NAMES:
        shutil.rmtree(run, ignore_errors=True)
        src = run / "src" / name
        subprocess.run(["git", "clone", "-q", str(pristine), str(src)], check=True)
        print(f"build-scale: {commits} commits under 256 MiB, cloned as {name}", file=sys.stderr)
        r = build(bench, src, run / "cut", SMALL_BUDGET)
        builds.append({"name": name, **r})
        done({"commits": commits, "step": f"{CUT_STEP}, cloned as {name}", **r})
        shutil.rmtree(run, ignore_errors=True)
    return {"commits": commits, "builds": builds}


def done(r: dict) -> None:
    """One finished build's figures as a line on stderr: a long run shows what it has measured
    so far, and a run cut short leaves them behind."""
    print(f"build-scale: {r['commits']:,} commits, {r['step']}: {r['rows']:,} rows, "
          f"{r['seconds']:.1f} s, peak {r['peak_rss_kib'] / 1024:,.1f} MiB "
          f"({(r.get('peak_rss_before_publish_kib') or 0) / 1024:,.1f} before publish), "
          f"{r['segments_written']} / {r['segments_unchanged']} segments written / unchanged",
          file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("work", type=Path)
    ap.add_argument("sizes")
    ap.add_argument("--fd-bundle", type=Path)
    ap.add_argument("--model")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    results = []
    sizes = [int(s) for s in a.sizes.split(",") if s]
    for commits in sizes:
        pristine = history(a.bench, a.work, commits)
        run = a.work / f"scale-{commits}"
        shutil.rmtree(run, ignore_errors=True)
        # A clone per run: the delta commits into it, the cached history stays as written.
        src = run / "src" / "history"
        subprocess.run(["git", "clone", "-q", str(pristine), str(src)], check=True)
        steps = [
            ("one segment", "whole", "1024GiB", []),
            ("default budget (3 GiB)", "default", "3GiB", []),
            (CUT_STEP, "cut", SMALL_BUDGET, []),
            ("rebuild, nothing changed", "cut", SMALL_BUDGET, []),
            ("delta: one commit", "cut", SMALL_BUDGET, ["--add-commit", "One commit more"]),
        ]
        for label, store, budget, extra in steps:
            print(f"build-scale: {commits} commits, {label}", file=sys.stderr)
            r = build(a.bench, src, run / store, budget, extra)
            results.append({"commits": commits, "step": label, **r})
            done(results[-1])
        print(f"build-scale: {commits} commits, staged delta", file=sys.stderr)
        r = staged(a.bench, src, run / "cut", SMALL_BUDGET)
        results.append({"commits": commits, "step": "staged delta: one commit", **r})
        done(results[-1])
        # The same name ("history"), so the cut differs only by what the messages add.
        src = run / "src-references" / "history"
        refs = history(a.bench, a.work, commits, references=True)
        subprocess.run(["git", "clone", "-q", str(refs), str(src)], check=True)
        print(f"build-scale: {commits} commits with references", file=sys.stderr)
        r = build(a.bench, src, run / "references", SMALL_BUDGET)
        results.append({"commits": commits, "step": REFERENCES_STEP, **r})
        done(results[-1])
        shutil.rmtree(run, ignore_errors=True)
    cuts = smallest_cuts(a.bench, a.work, min(sizes)) if sizes else None
    if cuts:
        # The main run's own clone ("history") is one more cut of the same rows.
        cuts["builds"] += [{"name": "history", **r} for r in results
                           if r["commits"] == cuts["commits"] and r["step"] == CUT_STEP]
    fd = None
    if a.fd_bundle and a.model and a.fd_bundle.exists():
        run = a.work / "scale-fd"
        shutil.rmtree(run, ignore_errors=True)
        src = run / "src" / "fd"
        subprocess.run(["git", "clone", "-q", str(a.fd_bundle), str(src)], check=True)
        print("build-scale: sharkdp/fd with the model", file=sys.stderr)
        fd = run_json([a.bench, "build", "--source", str(src), "--store", str(run / "store"),
                       "--embedder", a.model])
        shutil.rmtree(run, ignore_errors=True)
    if a.json:
        print(json.dumps({"build_scale": results, "smallest_cuts": cuts, "fd_with_model": fd}))
        return
    print("\n## The build at scale (synthetic histories, hash embedder: not a model)\n")
    print("(git's: the git processes the build runs, sampled beside it: anonymous memory, and "
          "the largest resident set one reached, mapped pack files included)\n")
    print("| commits | rows | build | segments written / unchanged | commits' diffs not read | "
          "seconds | "
          "non-embedding rows/s | peak RSS MiB | peak before publish MiB | peak vs one segment | "
          "peak vs smallest size | git's peak anon / RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    first = {}
    whole = {}
    for r in results:
        peak = r["peak_rss_kib"] / 1024
        first.setdefault(r["step"], peak)
        if r["step"] == "one segment":
            whole[r["commits"]] = peak
        vs_whole = peak / whole[r["commits"]] if r["commits"] in whole else float("nan")
        print(f"| {r['commits']:,} | {r['rows']:,} | {r['step']} | {r['segments_written']} / "
              f"{r['segments_unchanged']} | {r.get('commits_skipped', 0):,} | {r['seconds']:.1f} | "
              f"{r['non_embedding_rows_per_s']:,.0f} | {peak:,.0f} | "
              f"{(r.get('peak_rss_before_publish_kib') or 0) / 1024:,.0f} | {vs_whole:.2f} | "
              f"{peak / first[r['step']]:.2f} | {r.get('git_peak_anon_kib', 0) / 1024:,.0f} / "
              f"{r.get('git_peak_rss_kib', 0) / 1024:,.0f} |")
    if cuts:
        peaks = sorted(c["peak_rss_kib"] / 1024 for c in cuts["builds"])
        worst = peaks[-1]
        print(f"\nThe smallest size ({cuts['commits']:,} commits) under 256 MiB, cloned under "
              f"{len(peaks)} names (the cut, and so its largest build segment, differs): peak "
              f"{peaks[0]:,.1f} / {peaks[len(peaks) // 2]:,.1f} / {worst:,.1f} MiB (least / median / "
              f"most), build segments {', '.join(str(c['segments_written']) for c in cuts['builds'])}")
        for r in results:
            if r["step"] == CUT_STEP:
                print(f"  {r['commits']:,} commits under 256 MiB: {r['peak_rss_kib'] / 1024:,.1f} MiB, "
                      f"{r['peak_rss_kib'] / 1024 / worst:.2f}x the smallest size's worst cut")
    if fd:
        print(f"\nsharkdp/fd with the model ({fd['rows']:,} rows, {fd['embedded']:,} embedded, "
              f"budget {fd['budget']}): peak RSS {fd['peak_rss_kib'] / 1024:,.0f} MiB "
              f"({(fd.get('peak_rss_before_publish_kib') or 0) / 1024:,.0f} before publish), "
              f"{fd['seconds']:.0f} s, embedding {fd['embedded'] / max(fd['embed_seconds'], 1e-9):.1f} rows/s")
    elif a.fd_bundle:
        print(f"\nsharkdp/fd with the model: skipped ({a.fd_bundle} or the model is missing)")


if __name__ == "__main__":
    main()
