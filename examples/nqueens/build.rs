//! Builds this crate's library as the GPU kernel (nvptx64 PTX) into `$OUT_DIR`, where
//! `mgws::kernel_ptx!()` embeds it (`MGWS_SKIP_KERNEL=1` leaves it out; docs/kernels.md).
fn main() {
    mgws_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_script();
}
