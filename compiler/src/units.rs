//! Figures as the CLI prints them: bytes and FLOPs in the unit that keeps three significant
//! digits readable (`64.0 MiB`, not `0.06 GiB`), percentages that do not round a non-zero
//! share to `0.00%`.

/// Bytes in binary units: `512 B`, `12.0 KiB`, `64.0 MiB`, `1.50 GiB`, `2.00 TiB`.
pub fn bytes(b: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    match u {
        0 => format!("{b} B"),
        _ if v.abs() < 10.0 => format!("{v:.2} {}", UNITS[u]),
        _ => format!("{v:.1} {}", UNITS[u]),
    }
}

/// FLOPs in decimal units: `950 FLOP`, `3.20 MFLOP`, `81.0 GFLOP`, `1.20 TFLOP`.
pub fn flops(f: i64) -> String {
    const UNITS: [&str; 6] = ["FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"];
    let mut v = f as f64;
    let mut u = 0;
    while v.abs() >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    match u {
        0 => format!("{f} FLOP"),
        _ if v.abs() < 10.0 => format!("{v:.2} {}", UNITS[u]),
        _ => format!("{v:.1} {}", UNITS[u]),
    }
}

/// `part` as a percentage of `whole` with two significant digits where it is below 1%
/// (`0.0041%`), `0%` only for nothing, `-` for a zero whole.
pub fn percent(part: f64, whole: f64) -> String {
    if whole == 0.0 {
        return "-".into();
    }
    let p = 100.0 * part / whole;
    if p == 0.0 {
        "0%".into()
    } else if p.abs() >= 1.0 {
        format!("{p:.1}%")
    } else {
        let digits = (1 - p.abs().log10().floor() as i32).max(0) as usize;
        format!("{p:.digits$}%")
    }
}
