//! Builds this crate's own library as the GPU kernel (nvptx64 PTX) into `$OUT_DIR`, where
//! `mgws::kernel_ptx!()` embeds it. Without a nightly toolchain the PTX is a placeholder naming
//! what to install, and the CPU backend still works.
fn main() {
    mgws_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_script();
}
