//! Whole-file compression of text and ChampSim traces (a `.vtrace` compresses its own chunks):
//! below both readers, [`crate::trace`]'s lackey text and [`crate::import`]'s ChampSim records,
//! which the format dispatch of [`crate::trace`] stands above.
//!
//! Reading, the compression is recognised by the file's first bytes, whatever its name: gzip
//! (`1f 8b`, concatenated members read as one stream), zstd (`28 b5 2f fd`), xz
//! (`fd 37 7a 58 5a 00`), anything else plain. Writing, it is chosen by the name's last
//! extension: `.gz`, `.zst` / `.zstd`, `.xz`, anything else plain.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];

/// Bytes buffered between the file and a decoder or encoder.
const IO_BUF: usize = 1 << 20;

/// How a trace file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
    /// xz (LZMA2).
    Xz,
}

impl Compression {
    /// `none`, `gzip`, `zstd` or `xz`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
        }
    }

    /// The compression of a file starting with `head`.
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(GZIP_MAGIC) {
            Compression::Gzip
        } else if head.starts_with(ZSTD_MAGIC) {
            Compression::Zstd
        } else if head.starts_with(XZ_MAGIC) {
            Compression::Xz
        } else {
            Compression::None
        }
    }

    /// The compression a file name asks for, and the name without that extension:
    /// `a.txt.gz` → (`a.txt`, gzip), `a.txt` → (`a.txt`, none).
    pub fn split_path(path: &str) -> (&str, Compression) {
        for (ext, c) in [
            (".gz", Compression::Gzip),
            (".zst", Compression::Zstd),
            (".zstd", Compression::Zstd),
            (".xz", Compression::Xz),
        ] {
            if let Some(stem) = path.strip_suffix(ext) {
                return (stem, c);
            }
        }
        (path, Compression::None)
    }

    /// The compression a file name asks for (its last extension).
    pub fn for_path(path: &str) -> Compression {
        Compression::split_path(path).1
    }
}

/// Opens `path` for reading, decompressed as its first bytes say.
pub(crate) fn open_read(path: &str) -> Result<(Box<dyn BufRead + Send>, Compression)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut file = BufReader::with_capacity(IO_BUF, file);
    let head = file.fill_buf().map_err(|e| Error::io(path, e))?;
    let compression = Compression::detect(head);
    let buffered = |r: Box<dyn Read + Send>| -> Box<dyn BufRead + Send> {
        Box::new(BufReader::with_capacity(IO_BUF, r))
    };
    let input: Box<dyn BufRead + Send> = match compression {
        Compression::None => Box::new(file),
        Compression::Gzip => buffered(Box::new(flate2::bufread::MultiGzDecoder::new(file))),
        Compression::Zstd => buffered(Box::new(
            zstd::stream::read::Decoder::with_buffer(file).map_err(|e| Error::io(path, e))?,
        )),
        Compression::Xz => buffered(Box::new(xz2::bufread::XzDecoder::new_multi_decoder(file))),
    };
    Ok((input, compression))
}

/// Levels: fast ones, because a converted trace is written once per conversion and a slow
/// encoder dominates it (docs/traces.md gives the measurements). xz uses every core.
const GZIP_LEVEL: u32 = 1;
const ZSTD_LEVEL: i32 = 1;
const XZ_PRESET: u32 = 1;

/// A file being written through an encoder.
pub(crate) enum CompressedWriter {
    /// Plain.
    Plain(BufWriter<File>),
    /// gzip.
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
    /// zstd.
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
    /// xz.
    Xz(xz2::write::XzEncoder<BufWriter<File>>),
}

impl CompressedWriter {
    /// Creates (or truncates) `path`, compressed as `compression`.
    pub fn create(path: &str, compression: Compression) -> Result<CompressedWriter> {
        let io = |e| Error::io(path, e);
        let file = BufWriter::with_capacity(IO_BUF, File::create(path).map_err(io)?);
        Ok(match compression {
            Compression::None => CompressedWriter::Plain(file),
            Compression::Gzip => CompressedWriter::Gzip(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::new(GZIP_LEVEL),
            )),
            Compression::Zstd => CompressedWriter::Zstd(
                zstd::stream::write::Encoder::new(file, ZSTD_LEVEL).map_err(io)?,
            ),
            Compression::Xz => {
                let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
                let stream = xz2::stream::MtStreamBuilder::new()
                    .preset(XZ_PRESET)
                    .threads(threads)
                    .check(xz2::stream::Check::Crc64)
                    .encoder()
                    .map_err(|e| io(e.into()))?;
                CompressedWriter::Xz(xz2::write::XzEncoder::new_stream(file, stream))
            }
        })
    }

    /// Ends the compressed stream and flushes the file.
    pub fn finish(self) -> io::Result<()> {
        match self {
            CompressedWriter::Plain(mut w) => w.flush(),
            CompressedWriter::Gzip(w) => w.finish().and_then(|mut f| f.flush()),
            CompressedWriter::Zstd(w) => w.finish().and_then(|mut f| f.flush()),
            CompressedWriter::Xz(w) => w.finish().and_then(|mut f| f.flush()),
        }
    }
}

impl Write for CompressedWriter {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            CompressedWriter::Plain(w) => w.write(buf),
            CompressedWriter::Gzip(w) => w.write(buf),
            CompressedWriter::Zstd(w) => w.write(buf),
            CompressedWriter::Xz(w) => w.write(buf),
        }
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            CompressedWriter::Plain(w) => w.write_all(buf),
            CompressedWriter::Gzip(w) => w.write_all(buf),
            CompressedWriter::Zstd(w) => w.write_all(buf),
            CompressedWriter::Xz(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            CompressedWriter::Plain(w) => w.flush(),
            CompressedWriter::Gzip(w) => w.flush(),
            CompressedWriter::Zstd(w) => w.flush(),
            CompressedWriter::Xz(w) => w.flush(),
        }
    }
}

/// A [`CompressedWriter`] on its own thread: the caller hands over full buffers and goes on
/// producing while they are compressed and written, so producing and compressing overlap.
/// Each buffer is first shown to `inspect` with the state `S`, on the same thread (to count
/// what is written without slowing the producer); [`finish`](BackgroundWriter::finish) gives
/// the state back.
pub(crate) struct BackgroundWriter<S: Send + 'static> {
    jobs: Option<mpsc::SyncSender<Vec<u8>>>,
    spares: mpsc::Receiver<Vec<u8>>,
    thread: Option<JoinHandle<io::Result<S>>>,
}

impl<S: Send + 'static> BackgroundWriter<S> {
    /// Starts writing into `out`.
    pub fn start(
        out: CompressedWriter,
        state: S,
        inspect: fn(&mut S, &[u8]),
    ) -> io::Result<BackgroundWriter<S>> {
        let (jobs, job_rx) = mpsc::sync_channel::<Vec<u8>>(2);
        let (spare_tx, spares) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("vmmu-trace-write".into())
            .spawn(move || {
                let (mut out, mut state) = (out, state);
                for mut buf in job_rx {
                    inspect(&mut state, &buf);
                    out.write_all(&buf)?;
                    buf.clear();
                    let _ = spare_tx.send(buf);
                }
                out.finish()?;
                Ok(state)
            })?;
        Ok(BackgroundWriter {
            jobs: Some(jobs),
            spares,
            thread: Some(thread),
        })
    }

    /// An emptied buffer handed back by the thread, if one is ready.
    pub fn spare(&self) -> Option<Vec<u8>> {
        self.spares.try_recv().ok()
    }

    /// Queues `buf` to be written (waits while two buffers are already queued). An error of
    /// the writing thread is returned here or by [`finish`](BackgroundWriter::finish).
    pub fn submit(&mut self, buf: Vec<u8>) -> io::Result<()> {
        if let Some(jobs) = &self.jobs {
            if jobs.send(buf).is_ok() {
                return Ok(());
            }
        }
        self.join()?;
        Err(io::Error::other("the trace writing thread stopped"))
    }

    /// Writes what is queued, ends the compressed stream, flushes the file and gives back the
    /// state.
    pub fn finish(mut self) -> io::Result<S> {
        self.join()?
            .ok_or_else(|| io::Error::other("the trace writing thread already ended"))
    }

    fn join(&mut self) -> io::Result<Option<S>> {
        self.jobs = None;
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("the trace writing thread panicked"))?
                .map(Some),
            None => Ok(None),
        }
    }
}

impl<S: Send + 'static> Drop for BackgroundWriter<S> {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_compression_round_trips_and_is_recognised_by_its_bytes() {
        let dir = std::env::temp_dir().join(format!("vmmu-compress-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = b"I  04020ca1,2\n L 1ffefff8c0,8\n".repeat(1000);
        for (name, want) in [
            ("t.txt", Compression::None),
            ("t.txt.gz", Compression::Gzip),
            ("t.txt.zst", Compression::Zstd),
            ("t.txt.xz", Compression::Xz),
        ] {
            let p = dir.join(name).display().to_string();
            assert_eq!(Compression::for_path(&p), want, "{name}");
            let mut w = CompressedWriter::create(&p, want).unwrap();
            w.write_all(&text).unwrap();
            w.finish().unwrap();
            let (mut r, got) = open_read(&p).unwrap();
            assert_eq!(got, want, "{name}");
            let mut back = Vec::new();
            r.read_to_end(&mut back).unwrap();
            assert_eq!(back, text, "{name}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn split_path_removes_only_the_compression_extension() {
        assert_eq!(
            Compression::split_path("a.champsim.xz"),
            ("a.champsim", Compression::Xz)
        );
        assert_eq!(
            Compression::split_path("a.vtrace"),
            ("a.vtrace", Compression::None)
        );
        assert_eq!(
            Compression::split_path("a.txt.zstd"),
            ("a.txt", Compression::Zstd)
        );
    }
}
