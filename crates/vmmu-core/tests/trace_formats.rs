//! Which format a trace is read and written in: the first bytes decide when reading (a
//! `.vtrace` or `.champsim` name adds a demand), `--to` or the name decides when writing, and
//! every refusal names the file and what was found.

use vmmu_core::trace::{self, Format};
use vmmu_core::Error;

/// A scratch file in Cargo's temporary directory for integration tests (under `target/`), by a
/// fixed name: each run overwrites the last run's files instead of leaving more in `/tmp`.
fn tmp(name: &str) -> String {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace-formats");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name).to_str().unwrap().to_string()
}

const LACKEY: &str = "I  04020ca1,2\n L 1ffefff8c0,8\n";

fn corrupt(e: Error) -> (String, u64, String) {
    match e {
        Error::TraceCorrupt {
            path,
            offset,
            reason,
        } => (path, offset, reason),
        other => panic!("expected TraceCorrupt, got {other}"),
    }
}

#[test]
fn an_empty_file_is_an_error_naming_it_in_every_entry_point() {
    let p = tmp("empty.txt");
    std::fs::write(&p, b"").unwrap();
    let (path, offset, reason) = corrupt(trace::detect(&p).unwrap_err());
    assert_eq!((path.as_str(), offset), (p.as_str(), 0));
    assert!(reason.contains("empty"), "{reason}");
    for err in [
        trace::open(&p).err().unwrap().to_string(),
        trace::info(&p, &mut |_| true).unwrap_err().to_string(),
        trace::convert(&p, &tmp("x.vtrace"), None, &mut |_| true)
            .unwrap_err()
            .to_string(),
    ] {
        assert!(err.contains(&p) && err.contains("empty"), "{err}");
    }
}

#[test]
fn text_without_a_single_event_is_an_error_not_zero_events() {
    let p = tmp("log.txt");
    std::fs::write(&p, "==1== Lackey, an example Valgrind tool\n==1== \n").unwrap();
    let err = trace::info(&p, &mut |_| true).unwrap_err();
    let Error::TraceLine { path, line, reason } = err else {
        panic!("expected TraceLine, got {err}")
    };
    assert_eq!((path.as_str(), line), (p.as_str(), 2));
    assert!(
        reason.contains("no event") && reason.contains("2 lines"),
        "{reason}"
    );
}

#[test]
fn a_file_named_vtrace_is_read_as_vtrace_or_rejected_never_as_text() {
    let p = tmp("text.vtrace");
    std::fs::write(&p, LACKEY).unwrap();
    let (path, offset, reason) = corrupt(trace::detect(&p).unwrap_err());
    assert_eq!((path.as_str(), offset), (p.as_str(), 0));
    assert!(
        reason.contains("not a vtrace file") && reason.contains("text `I  04020ca1,2`"),
        "{reason}"
    );
    assert!(reason.contains("89 56 54 52 0d 0a 1a 0a"), "{reason}");
    let gz = tmp("gz.vtrace");
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]).unwrap();
    let (_, _, reason) = corrupt(trace::info(&gz, &mut |_| true).unwrap_err());
    assert!(reason.contains("gzip data (1f 8b"), "{reason}");
    let bin = tmp("bin.vtrace");
    std::fs::write(&bin, [0u8, 1, 2, 3, 0xff, 0xfe, 7, 9, 1]).unwrap();
    let (_, _, reason) = corrupt(trace::open(&bin).err().unwrap());
    assert!(reason.contains("bytes 00 01 02 03 ff fe 07 09"), "{reason}");
    // The same text under another name is lackey.
    let txt = tmp("text.txt");
    std::fs::write(&txt, LACKEY).unwrap();
    assert_eq!(trace::detect(&txt).unwrap(), Format::Lackey);
}

#[test]
fn a_file_named_champsim_must_look_like_champsim() {
    let p = tmp("text.champsim");
    std::fs::write(&p, LACKEY).unwrap();
    let (path, _, reason) = corrupt(trace::detect(&p).unwrap_err());
    assert_eq!(path, p);
    assert!(reason.contains("not a ChampSim trace"), "{reason}");
}

#[test]
fn the_output_format_comes_from_to_or_from_the_name() {
    let cases = [
        ("a.vtrace", Format::Vtrace),
        ("a.txt", Format::Lackey),
        ("a.lackey.gz", Format::Lackey),
        ("a.txt.xz", Format::Lackey),
        ("a.txt.zstd", Format::Lackey),
        ("a.champsim", Format::ChampSim),
        ("a.champsimtrace.xz", Format::ChampSim),
        ("a.champsim.gz", Format::ChampSim),
    ];
    for (name, want) in cases {
        assert_eq!(trace::output_format(name, None).unwrap(), want, "{name}");
        assert_eq!(trace::output_format(name, Some(want)).unwrap(), want);
    }
    // A name that says no format is fine with --to, an error without it.
    assert_eq!(
        trace::output_format("out", Some(Format::Lackey)).unwrap(),
        Format::Lackey
    );
    for name in ["out", "a.bin", "a.gz", "a.vtrace.gz"] {
        let err = trace::output_format(name, None).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{name}: cannot tell the output format")),
            "{err}"
        );
        assert!(err.contains("--to vtrace|lackey|champsim"), "{err}");
    }
}

#[test]
fn a_to_that_disagrees_with_the_name_is_an_error_naming_both() {
    let err = trace::output_format("x.vtrace", Some(Format::ChampSim))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "x.vtrace: the output format is `champsim` but the name ends in `.vtrace`, which is \
         vtrace: name it NAME.champsim or NAME.champsimtrace, optionally .xz, .gz or .zst or \
         give --to vtrace"
    );
    let err = trace::output_format("x.txt.gz", Some(Format::Vtrace))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`vtrace`") && err.contains("`.txt.gz`") && err.contains("lackey"),
        "{err}"
    );
    // convert checks before it opens anything: no destination file appears.
    let src = tmp("src.txt");
    std::fs::write(&src, LACKEY).unwrap();
    let dst = tmp("dst.vtrace");
    let _ = std::fs::remove_file(&dst);
    assert!(trace::convert(&src, &dst, Some(Format::Lackey), &mut |_| true).is_err());
    assert!(!std::path::Path::new(&dst).exists());
}
