//! Phase markers as the bounds of what is counted: `warmup.phase` ends the warm-up right after
//! the first marker with its id, `stop.phase` ends the run at the first marker with its id after
//! the warm-up (docs/cli.md, `--warmup-phase` and `--stop-phase`). A program marks its timed
//! region this way with `VMMU_PHASE` (docs/recording.md, "Phase markers").

mod common;

use common::{load, region, run, try_run, u, BASE};
use vmmu_core::config;
use vmmu_core::event::Event;

const PAGE: u64 = 4096;

fn page(i: u64) -> Event {
    load(BASE + i * PAGE)
}

/// Process 1 with a 1 MiB region; 8 loads of pages 0-7 (each a demand fault), marker 1; loads
/// of pages 0-3 (touched before) and 8-10 (three faults), marker 2; ten loads of pages 11-20
/// (ten faults) and marker 2 again.
fn marked() -> Vec<Event> {
    let mut ev = region(1 << 20, false);
    ev.extend((0..8).map(page));
    ev.push(Event::Phase { id: 1 });
    ev.extend((0..4).chain(8..11).map(page));
    ev.push(Event::Phase { id: 2 });
    ev.extend((11..21).map(page));
    ev.push(Event::Phase { id: 2 });
    ev
}

#[test]
fn counting_covers_exactly_the_references_between_the_markers() {
    for (mode, core) in [
        ("native", "additive"),
        ("nested", "additive"),
        ("shadow", "additive"),
        ("nested", "interval"),
    ] {
        let v = run(
            &[
                ("mode", mode),
                ("machine.core.model", core),
                ("warmup.phase", "1"),
                ("stop.phase", "2"),
            ],
            marked(),
        );
        assert_eq!(u(&v, "memory_refs"), 7, "{mode} {core}");
        assert_eq!(u(&v, "instructions"), 7, "{mode}");
        assert_eq!(u(&v, "page_faults"), 3, "{mode}: pages 8-10 only");
        assert_eq!(u(&v, "checked_translations"), 7, "{mode}");
        // Process, mapping, eight loads and the marker are the warm-up.
        assert_eq!(v["warmup"]["events"], 11, "{mode}");
        assert_eq!(v["warmup"]["refs"], 8, "{mode}");
        // Seven loads and the stop marker, its last event.
        assert_eq!(u(&v["sim"], "events"), 11 + 8, "{mode}");
    }
}

#[test]
fn without_a_stop_counting_runs_to_the_end() {
    let v = run(&[("mode", "native"), ("warmup.phase", "1")], marked());
    assert_eq!(u(&v, "memory_refs"), 17);
    assert_eq!(u(&v, "page_faults"), 13);
    let full = run(&[("mode", "native")], marked());
    assert_eq!(u(&full, "memory_refs"), 25);
    assert_eq!(u(&full, "page_faults"), 21);
    assert_eq!(full["warmup"]["events"], 0);
}

#[test]
fn a_stop_marker_during_the_warm_up_is_not_the_stop() {
    let mut ev = region(1 << 20, false);
    ev.push(Event::Phase { id: 2 });
    ev.extend((0..5).map(page));
    ev.push(Event::Phase { id: 1 });
    ev.extend((5..7).map(page));
    ev.push(Event::Phase { id: 2 });
    ev.extend((7..9).map(page));
    let v = run(&[("warmup.phase", "1"), ("stop.phase", "2")], ev);
    assert_eq!(u(&v, "memory_refs"), 2);
    assert_eq!(v["warmup"]["refs"], 5);
}

#[test]
fn a_stop_with_a_counted_warm_up_stops_at_the_first_marker_after_it() {
    let v = run(&[("warmup.refs", "9"), ("stop.phase", "2")], marked());
    // Loads 0-7 and load 0 of the second group warm up; loads 1-3 and 8-10 count.
    assert_eq!(u(&v, "memory_refs"), 6);
    assert_eq!(u(&v, "page_faults"), 3);
}

#[test]
fn a_missing_marker_is_an_error_naming_the_phase() {
    let e = try_run(&[("warmup.phase", "5")], marked())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("warmup.phase") && e.contains("no phase marker 5"),
        "{e}"
    );
    let e = try_run(&[("warmup.phase", "1"), ("stop.phase", "7")], marked())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("stop.phase") && e.contains("without a phase marker 7"),
        "{e}"
    );
    // Marker 1 comes once: after it ended the warm-up, no stop follows.
    let e = try_run(&[("warmup.phase", "2"), ("stop.phase", "1")], marked())
        .unwrap_err()
        .to_string();
    assert!(e.contains("stop.phase"), "{e}");
}

#[test]
fn impossible_phase_settings_are_refused() {
    let build = |ov: &[(&str, &str)]| {
        let ov: Vec<(String, String)> = ov
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        config::build("bhargava08", &ov).map_err(|e| e.to_string())
    };
    let e = build(&[("warmup.phase", "1"), ("warmup.refs", "10")]).unwrap_err();
    assert!(e.contains("warmup.phase") && e.contains("not both"), "{e}");
    let e = build(&[("stop.phase", "2"), ("guest.vcpus", "2")]).unwrap_err();
    assert!(e.contains("stop.phase") && e.contains("one-vCPU"), "{e}");
    let e = build(&[("warmup.phase", "-1")]).unwrap_err();
    assert!(e.contains("warmup.phase"), "{e}");
}

#[test]
fn unset_phases_are_left_out_of_the_written_config() {
    let plain = config::build("bhargava08", &[]).unwrap().to_toml();
    assert!(
        !plain.contains("[stop]") && !plain.contains("phase"),
        "{plain}"
    );
    let ov = [
        ("warmup.phase".to_string(), "1".to_string()),
        ("stop.phase".to_string(), "2".to_string()),
    ];
    let set = config::build("bhargava08", &ov).unwrap();
    assert_eq!(set.warmup.phase, Some(1));
    assert_eq!(set.stop.phase, Some(2));
    let back = config::SimConfig::from_toml_with_overrides(&set.to_toml(), &[]).unwrap();
    assert_eq!(back, set);
}
