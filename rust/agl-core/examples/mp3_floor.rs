//! The MP3 decoder alone: the floor of curation's decode step.
//!
//! Reads the MP3 files named on the command line into memory, then decodes
//! them with `nanomp3::Reader` (float output, every frame, nothing else
//! done with the samples) and prints x real time per core: the best of
//! five rounds in process CPU seconds, one thread.
//!
//! ```text
//! cargo run -p agl-core --profile dev-release --example mp3_floor -- a.mp3 b.mp3
//! ```

use std::io::Cursor;

fn cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: mp3_floor FILE.mp3 ...");
        std::process::exit(2);
    }
    let data: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}")))
        .collect();
    let mut best = f64::INFINITY;
    let mut seconds = 0.0;
    let mut check = 0f32;
    for _ in 0..5 {
        let t0 = cpu_seconds();
        seconds = 0.0;
        for d in &data {
            let mut r = nanomp3::Reader::<_, f32>::new(Cursor::new(d.as_slice()))
                .unwrap_or_else(|e| panic!("not an MP3: {e:?}"));
            let (ch, sr) = (
                r.channels().map_or(1, |c| c.num() as usize),
                r.sample_rate(),
            );
            let mut frames = 0usize;
            while let Ok(Some(f)) = r.read_frame() {
                frames += f.len() / ch;
                check += f.first().copied().unwrap_or(0.0);
            }
            seconds += frames as f64 / sr.max(1) as f64;
        }
        best = best.min(cpu_seconds() - t0);
    }
    println!(
        "{seconds:.1} s of audio, best {best:.3} CPU s: {:.0}x real time per core (check {check})",
        seconds / best
    );
}
