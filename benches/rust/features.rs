//! Criterion benchmarks of the core feature kernels (Rust side).
mod common;
use agl_core::features::{bat_batch, efficientat_batch, BatConfig, EfficientAtConfig};
use agl_core::parallel::never;
use common::noise;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    let sr = 32000usize;
    let secs = 10usize;
    let l = noise(sr * secs, 1);
    let r = noise(sr * secs, 2);
    let mut g = c.benchmark_group("features_10s_clip_1thread");
    g.throughput(Throughput::Elements((sr * secs) as u64));
    let bat = BatConfig::default();
    g.bench_function("bat_stereo", |b| {
        b.iter(|| bat_batch(&[(&l, &r)], &bat, None, Some(1), never()).unwrap())
    });
    let eat = EfficientAtConfig::default();
    g.bench_function("efficientat_mono", |b| {
        b.iter(|| efficientat_batch(&[&l], &eat, None, Some(1), never()).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
