//! Arena buffers (`ebb_runtime::buffer`): claims never overlap, release on drop, clone to the heap.

use ebb_runtime::buffer::*;

#[test]
fn claims_never_overlap_and_are_released_on_drop() {
    let mem = ArenaMemory::new(1024).expect("arena");
    let mut a = mem.slice::<f32>(0, 64).expect("[0,256)");
    a.fill(1.5);
    assert!(mem.slice::<f32>(128, 8).is_none(), "overlaps a");
    assert!(mem.slice::<f32>(1000, 8).is_none(), "beyond the end");
    assert!(mem.slice::<f64>(260, 1).is_none(), "misaligned for f64");
    let b = mem.slice::<u8>(256, 768).expect("[256,1024)");
    assert_eq!(mem.usage().live_bytes, 1024);
    drop(a);
    let c = mem.slice::<bool>(0, 256).expect("reused after release");
    assert!(c.iter().all(|&x| !x), "i1 ranges start zeroed");
    drop((b, c));
    let u = mem.usage();
    assert_eq!(
        (u.live_bytes, u.peak_live_bytes, u.high_water_bytes),
        (0, 1024, 1024)
    );
    assert_eq!((u.claims, u.refused), (3, 1));
}

#[test]
fn buffers_deref_alike_and_clone_to_the_heap() {
    let mem = ArenaMemory::new(256).expect("arena");
    let mut s = mem.slice::<i32>(64, 4).expect("slice");
    s.copy_from_slice(&[1, 2, 3, 4]);
    let a = Buf::Arena(s);
    let h: Buf<i32> = vec![1, 2, 3, 4].into();
    assert_eq!(a, h);
    assert!(a.clone().is_heap());
    assert_eq!(a.arena_offset().map(|(_, o)| o), Some(64));
    assert_eq!(a.into_vec(), vec![1, 2, 3, 4]);
    assert_eq!(mem.usage().live_bytes, 0);
}
