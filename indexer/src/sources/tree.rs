//! The files a crawl reads at HEAD (docs, wiki pages, code), out of the build's memory until
//! their rows are cut: each file's text and rows go to an unnamed temporary file as
//! the file is read, and come back one path at a time, in the order the cut takes them. What a
//! build holds of the tree at HEAD is then one file and its rows, and each file's place (its
//! path and where its record lies), not every file's text twice (the text and its rows).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use hubdex_formats::{FileText, Row};
use serde::{Deserialize, Serialize};

/// One file's record: its text and its rows, as JSON (the rows' serde form keeps every field
/// but the vectors, which a file's rows do not have yet when crawled).
#[derive(Serialize, Deserialize)]
struct Record {
    file: FileText,
    rows: Vec<Row>,
}

/// Where a file's record lies in the temporary file.
#[derive(Debug)]
struct Place {
    path: String,
    at: u64,
    len: u64,
}

/// The files read at HEAD, spilled as they are read ([`TreeFiles::add`]), then read back in
/// path order ([`TreeFiles::paths`]) or in the order they were read
/// ([`TreeFiles::files`]).
#[derive(Debug, Default)]
pub(crate) struct TreeFiles {
    /// Created with the first file (a repository without files at HEAD has none).
    out: Option<BufWriter<File>>,
    places: Vec<Place>,
    written: u64,
    rows: usize,
}

impl TreeFiles {
    /// Writes `file` and its `rows` out.
    pub(crate) fn add(&mut self, file: FileText, rows: Vec<Row>) -> std::io::Result<()> {
        let out = match &mut self.out {
            Some(out) => out,
            None => self.out.insert(BufWriter::with_capacity(1 << 16, tempfile::tempfile()?)),
        };
        let n = rows.len();
        let record = Record { file, rows };
        let bytes = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        out.write_all(&bytes)?;
        let path = record.file.path;
        self.places.push(Place { path, at: self.written, len: bytes.len() as u64 });
        self.written += bytes.len() as u64;
        self.rows += n;
        Ok(())
    }

    /// Appends `other`'s files (read after this one's: a wiki's pages after the repository's).
    pub(crate) fn append(&mut self, other: TreeFiles) -> std::io::Result<()> {
        for record in other.files()? {
            let (file, rows) = record?;
            self.add(file, rows)?;
        }
        Ok(())
    }

    /// How many rows its files have.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Each file with its rows, in the order they were added, read back as the iterator is
    /// advanced.
    pub(crate) fn files(
        &self,
    ) -> std::io::Result<impl Iterator<Item = std::io::Result<(FileText, Vec<Row>)>> + '_> {
        let mut reader = self.reader()?;
        Ok(self.places.iter().map(move |place| {
            let Record { file, rows } = reader.read(place)?;
            Ok((file, rows))
        }))
    }

    /// The files by path (byte order, as the cut's stream order takes them), read back as the
    /// iterator is advanced: each path's files (two where a wiki page and a repository file
    /// share one) with their rows.
    pub(crate) fn paths(
        &self,
    ) -> std::io::Result<impl Iterator<Item = std::io::Result<(Vec<FileText>, Vec<Row>)>> + '_>
    {
        let mut order: Vec<&Place> = self.places.iter().collect();
        order.sort_by(|a, b| a.path.cmp(&b.path));
        let mut reader = self.reader()?;
        let mut at = 0;
        Ok(std::iter::from_fn(move || {
            let first = order.get(at)?;
            let same = order[at..].iter().take_while(|p| p.path == first.path).count();
            let (mut files, mut rows) = (Vec::new(), Vec::new());
            for place in &order[at..at + same] {
                match reader.read(place) {
                    Ok(record) => {
                        files.push(record.file);
                        rows.extend(record.rows);
                    }
                    Err(e) => {
                        at = order.len(); // nothing after an error
                        return Some(Err(e));
                    }
                }
            }
            at += same;
            Some(Ok((files, rows)))
        }))
    }

    /// A reader of the records: every file added must have been written out
    /// ([`Self::flush`]). Its reads are positioned, so they do not move the writer.
    fn reader(&self) -> std::io::Result<Reader<'_>> {
        if let Some(out) = &self.out
            && !out.buffer().is_empty()
        {
            return Err(std::io::Error::other("the files at HEAD were read before being written"));
        }
        Ok(Reader { file: self.out.as_ref().map(BufWriter::get_ref), buf: Vec::new() })
    }

    /// Writes out what is buffered: called once every file is added.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.out {
            Some(out) => out.flush(),
            None => Ok(()),
        }
    }
}

struct Reader<'a> {
    file: Option<&'a File>,
    buf: Vec<u8>,
}

impl Reader<'_> {
    fn read(&mut self, place: &Place) -> std::io::Result<Record> {
        let file = self.file.ok_or_else(|| std::io::Error::other("no file written"))?;
        self.buf.resize(place.len as usize, 0);
        file.read_exact_at(&mut self.buf, place.at)?;
        serde_json::from_slice(&self.buf).map_err(|e| {
            std::io::Error::other(format!("the record of {} read back: {e}", place.path))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hubdex_formats::RowType;

    fn file(path: &str, text: &str) -> (FileText, Vec<Row>) {
        let mut rows = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let mut row = Row::new(RowType::Code, "o/r", &format!("file/{path}"), i as u32);
            row.title = Some(format!("{path}:{}", i + 1));
            row.path = Some(path.to_string());
            row.line_start = Some(i as i64 + 1);
            row.created_at = chrono::DateTime::from_timestamp(1_700_000_000 + i as i64, 7);
            row.set_body(line);
            rows.push(row);
        }
        let text = FileText::new(path, &"c".repeat(40), Some("rust"), text.to_string());
        (text, rows)
    }

    #[test]
    fn files_come_back_as_they_went_in_by_path_and_in_the_order_added() {
        let mut tree = TreeFiles::default();
        let added = [
            file("src/b.rs", "fn b() {}\n// é ✓\n"),
            file("README.md", ""),
            file("src/a.rs", "fn a() {}\n"),
            file("src/b.rs", "a wiki page that shares the path\n"),
        ];
        for (f, rows) in added.clone() {
            tree.add(f, rows).unwrap();
        }
        tree.flush().unwrap();
        assert_eq!((tree.places.len(), tree.rows()), (4, 4));

        let in_order: Vec<_> = tree.files().unwrap().map(Result::unwrap).collect();
        assert_eq!(in_order, added);

        let by_path: Vec<_> = tree.paths().unwrap().map(Result::unwrap).collect();
        let paths: Vec<Vec<&str>> =
            by_path.iter().map(|(f, _)| f.iter().map(|f| f.path.as_str()).collect()).collect();
        assert_eq!(paths, [vec!["README.md"], vec!["src/a.rs"], vec!["src/b.rs", "src/b.rs"]]);
        let b_rows: Vec<Row> = [added[0].1.clone(), added[3].1.clone()].concat();
        assert_eq!(by_path[2].1, b_rows, "a path's rows, every file's, in the order added");

        // Taken one at a time, it reads no further than asked.
        assert_eq!(tree.paths().unwrap().take(2).count(), 2);
    }

    #[test]
    fn an_empty_tree_writes_no_file() {
        let mut tree = TreeFiles::default();
        tree.flush().unwrap();
        assert!(tree.out.is_none());
        assert_eq!(tree.paths().unwrap().count(), 0);
        assert_eq!(tree.rows(), 0);
    }
}
