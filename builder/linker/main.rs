//! `mgws-ptx-link`: the "linker" `mgws-builder` gives rustc for `nvptx64-nvidia-cuda`.
//!
//! rustc's own linker for that target is `llvm-bitcode-linker`, a rustup component that is not
//! always installable. The builder compiles the kernel crate with `--emit=asm,link`, fat LTO and
//! one codegen unit, so rustc has already written the PTX of the whole module to `<out>.s` when it
//! calls the linker with `-o <out>.ptx`: linking is copying that file. The builder compiles this
//! file with the nightly rustc into its target directory and passes it as
//! `CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let Some(out) = args
        .iter()
        .position(|a| a == "-o")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
    else {
        eprintln!("mgws-ptx-link: no `-o <output>` among the arguments");
        return ExitCode::FAILURE;
    };
    let asm = out.with_extension("s");
    if let Err(e) = std::fs::copy(&asm, &out) {
        eprintln!(
            "mgws-ptx-link: cannot copy {} to {}: {e} (the kernel crate must be compiled with \
             `--emit=asm,link`, as mgws-builder does)",
            asm.display(),
            out.display()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
