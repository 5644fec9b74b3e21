//! Criterion micro-benchmarks of the FFT alone: the frame-batched lane
//! transform against RustFFT (through `realfft`) and the project's
//! half-length real FFT, on blocks of 16 frames of the same sizes.
//!
//! Throughput is in frames; GFLOP/s follow as
//! `frames/s * 2.5 n log2(n) / 1e9` (the usual count for a real FFT).
mod common;
use agl_core::spectral::lanes::{LaneFft, LANES};
use agl_core::spectral::rfft::RealFft;
use common::noise;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use num_complex::Complex32;
use realfft::RealFftPlanner;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("rfft_16_frames");
    for n in [256usize, 512, 1024, 2048, 4096] {
        let data: Vec<Vec<f32>> = (0..LANES).map(|l| noise(n, l as u64)).collect();
        g.throughput(Throughput::Elements(LANES as u64));

        let lane = LaneFft::new(n).expect("power of two");
        let frames: Vec<&[f32]> = data.iter().map(|v| v.as_slice()).collect();
        let (mut re, mut im) = lane.make_buffers();
        g.bench_with_input(BenchmarkId::new("agl_lane", n), &n, |b, _| {
            b.iter(|| lane.forward(&frames, &mut re, &mut im))
        });

        let rf = RealFftPlanner::<f32>::new().plan_fft_forward(n);
        let mut inp = rf.make_input_vec();
        let mut out = rf.make_output_vec();
        let mut scr = rf.make_scratch_vec();
        g.bench_with_input(BenchmarkId::new("realfft", n), &n, |b, _| {
            b.iter(|| {
                for f in &data {
                    inp.copy_from_slice(f);
                    rf.process_with_scratch(&mut inp, &mut out, &mut scr)
                        .expect("sizes match");
                }
            })
        });

        let half = RealFft::new(n, agl_core::spectral::plans::cfft_plan);
        let mut inp = half.make_input_vec();
        let mut out: Vec<Complex32> = half.make_output_vec();
        let mut scr = half.make_scratch_vec();
        g.bench_with_input(BenchmarkId::new("agl_half_length", n), &n, |b, _| {
            b.iter(|| {
                for f in &data {
                    inp.copy_from_slice(f);
                    half.process_with_scratch(&mut inp, &mut out, &mut scr)
                        .expect("sizes match");
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
