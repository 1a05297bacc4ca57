//! ChampSim traces are detected by content and readable through `trace::open`, `info` and
//! `convert`, like the other formats.

use vmmu_core::event::{AccessKind, Event};
use vmmu_core::trace::{self, Format};

#[test]
fn champsim_round_trips_through_detection_and_convert() {
    let dir = std::env::temp_dir().join(format!("vmmu-champsim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("in.txt");
    // Two instructions: one with a load, one with a store.
    std::fs::write(
        &text,
        "I  00401000,4\n L 7ff000001000,8\nI  00401004,4\n S 7ff000002000,8\n",
    )
    .unwrap();
    let cs = dir.join("out.champsim.gz");
    let (t, c) = (text.to_str().unwrap(), cs.to_str().unwrap());
    trace::convert(t, c, Format::ChampSim, &mut |_| true).unwrap();
    assert_eq!(trace::detect(c).unwrap(), Format::ChampSim);
    let info = trace::info(c, &mut |_| true).unwrap();
    assert_eq!(info.refs_by_kind.fetch, 2);
    assert_eq!(info.refs_by_kind.load, 1);
    assert_eq!(info.refs_by_kind.store, 1);
    let mut src = trace::open(c).unwrap();
    let mut buf = Vec::new();
    while src.next_batch(&mut buf, 64).unwrap() > 0 {}
    let kinds: Vec<AccessKind> = buf
        .iter()
        .filter_map(|e| match e {
            Event::Ref(r) => Some(r.kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            AccessKind::Fetch,
            AccessKind::Load,
            AccessKind::Fetch,
            AccessKind::Store
        ]
    );
    assert_eq!(
        trace::detect(t).unwrap(),
        Format::Lackey,
        "text is not mistaken for ChampSim"
    );
    std::fs::remove_dir_all(&dir).ok();
}
