//! Progress of long work: indicatif bars and spinners on a terminal; without one (CI, a log
//! file), plain lines on stderr instead — the first about a second into each stage, then one
//! at most every [`line_every`] (done/total, rate, ETA) — so a long build is never silent.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// How often a stage prints a line without a terminal: `HUBDEX_PROGRESS_SECS` (default 10).
pub(crate) fn line_every() -> Duration {
    let secs = std::env::var("HUBDEX_PROGRESS_SECS").ok().and_then(|s| s.parse::<f64>().ok());
    Duration::from_secs_f64(secs.filter(|s| s.is_finite() && *s >= 0.0).unwrap_or(10.0))
}

/// A bar of `len` steps named `prefix` (`embed`, `upload`) in `mp`.
pub(crate) fn bar(mp: &MultiProgress, len: u64, prefix: &str) -> ProgressBar {
    let pb = mp.add(ProgressBar::new(len));
    pb.set_style(
        ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} {per_sec} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_prefix(prefix.to_string());
    print_lines_unless_terminal(&pb);
    pb
}

/// A spinner whose message says what is being done (`crawling owner/name: 400 commits`), in
/// `mp` when there is one.
pub(crate) fn spinner(mp: Option<&MultiProgress>) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    let pb = match mp {
        Some(mp) => mp.add(pb),
        None => pb,
    };
    print_lines_unless_terminal(&pb);
    pb
}

/// Has the spinner `pb` count: `pos` of `len`, until [`stop_counting`]. On a terminal it shows
/// `message: pos/len (ETA)`, as [`line()`] does without one (with the rate).
pub(crate) fn count(pb: &ProgressBar, pos: u64, len: u64) {
    if pb.length().is_none() {
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg}: {human_pos}/{human_len} (ETA {eta})")
                .expect("valid template"),
        );
    }
    pb.set_length(len);
    pb.set_position(pos);
}

/// A spinner that counted ([`count`]) goes back to its message alone.
pub(crate) fn stop_counting(pb: &ProgressBar) {
    pb.unset_length();
    pb.set_style(ProgressStyle::default_spinner());
}

/// The plain line for the state of `pb`.
pub(crate) fn line(pb: &ProgressBar) -> String {
    let head = [pb.prefix(), pb.message()].join(" ").trim().to_string();
    match pb.length() {
        Some(len) if len > 0 => {
            // The rate since the stage began: indicatif's own (a recent average) falls to 0 while
            // a long step (a large serving unit) runs, and its ETA to centuries.
            let (pos, secs) = (pb.position(), pb.elapsed().as_secs_f64());
            let rate = if secs > 0.0 { pos as f64 / secs } else { 0.0 };
            let eta = if rate > 0.0 && pos < len {
                let left = Duration::from_secs_f64((len - pos) as f64 / rate);
                format!(", ETA {}", indicatif::HumanDuration(left))
            } else {
                String::new()
            };
            format!("{head}: {pos}/{len} ({rate:.0}/s{eta})")
        }
        _ => head,
    }
}

/// Without a terminal, prints [`line()`] for `pb` to stderr (see [`print_lines`]).
fn print_lines_unless_terminal(pb: &ProgressBar) {
    if !std::io::stderr().is_terminal() {
        print_lines(pb, line_every(), std::io::stderr());
    }
}

/// Writes [`line()`] for `pb` to `out` about a second after it starts (sooner when `every` is
/// shorter) and then at most every `every`, until it is finished or dropped (the thread holds
/// no strong handle).
fn print_lines(pb: &ProgressBar, every: Duration, mut out: impl std::io::Write + Send + 'static) {
    let weak = pb.downgrade();
    let tick = every.clamp(Duration::from_millis(100), Duration::from_secs(1));
    std::thread::spawn(move || {
        let mut last: Option<Instant> = None;
        loop {
            std::thread::sleep(tick);
            let Some(pb) = weak.upgrade() else { break };
            if pb.is_finished() {
                break;
            }
            if last.is_none_or(|t| t.elapsed() >= every) {
                let text = line(&pb);
                if !text.is_empty() && writeln!(out, "{text}").is_err() {
                    break;
                }
                last = Some(Instant::now());
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_what_how_far_and_how_fast() {
        let pb = ProgressBar::hidden();
        pb.set_length(200);
        pb.set_prefix("embed");
        pb.set_message("owner/name");
        pb.inc(50);
        let l = line(&pb);
        assert!(l.starts_with("embed owner/name: 50/200 ("), "{l}");
        assert!(l.contains("/s"), "{l}");
        let s = ProgressBar::hidden();
        s.set_message("crawling owner/name: 400 commits");
        assert_eq!(line(&s), "crawling owner/name: 400 commits");
    }

    /// The rate is the stage's since it began, so a long step leaves it (and the ETA) where
    /// the stage's pace puts them, not at 0/s and centuries.
    #[test]
    fn a_line_s_rate_and_eta_are_the_stage_s_average() {
        let pb = ProgressBar::hidden();
        pb.set_length(100);
        std::thread::sleep(Duration::from_millis(200));
        pb.inc(50);
        let l = line(&pb);
        let rate: f64 =
            l.split('(').nth(1).and_then(|r| r.split("/s").next()).unwrap().parse().unwrap();
        assert!((1.0..=250.0).contains(&rate), "50 in at least 0.2 s: {l}");
        assert!(l.contains(", ETA ") && !l.contains("year"), "{l}");
    }

    #[test]
    fn a_counting_spinner_s_line_counts_toward_its_length() {
        let pb = spinner(None);
        pb.set_message("serving units: 1/2 done, rows");
        count(&pb, 10_000, 40_000);
        let l = line(&pb);
        assert!(l.starts_with("serving units: 1/2 done, rows: 10000/40000 ("), "{l}");
        pb.finish_and_clear();
        // A spinner counts for a while, then says its message alone again.
        let s = spinner(None);
        s.set_message("reading owner/name, commits");
        count(&s, 30, 120);
        assert!(line(&s).starts_with("reading owner/name, commits: 30/120 ("), "{}", line(&s));
        stop_counting(&s);
        s.set_message("crawling owner/name");
        assert_eq!(line(&s), "crawling owner/name");
        s.finish_and_clear();
    }

    /// A `Write` the test can read back.
    #[derive(Clone, Default)]
    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stage_prints_lines_while_it_runs_and_stops_when_finished() {
        let pb = ProgressBar::hidden();
        pb.set_length(10);
        pb.set_prefix("embed");
        let sink = Sink::default();
        print_lines(&pb, Duration::ZERO, sink.clone());
        for _ in 0..5 {
            pb.inc(1);
            std::thread::sleep(Duration::from_millis(120));
        }
        pb.finish();
        std::thread::sleep(Duration::from_millis(250));
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() >= 2, "{text}");
        assert!(lines.iter().all(|l| l.starts_with("embed: ") && l.contains("/10 (")), "{text}");
        // Nothing after the stage finished.
        let n = lines.len();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(String::from_utf8(sink.0.lock().unwrap().clone()).unwrap().lines().count(), n);
    }
}
