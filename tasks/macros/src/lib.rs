//! `#[registry]`: turns an enum whose variants name task functor types into a task registry.
//!
//! ```ignore
//! #[mgws_tasks::registry]
//! pub enum Builtin {
//!     Memset(MemsetTask),
//!     Uts(UtsTask),
//! }
//! ```
//! becomes a unit struct `Builtin` with
//! - a tag constant per variant (`Builtin::MEMSET == 1`, `Builtin::UTS == 2`, in order; 0 is never
//!   a valid tag, so a zeroed task struct is rejected);
//! - `impl mgws_tasks::Tagged<F> for Builtin` for each functor type, so `Builtin::task(functor)`
//!   builds a task struct with the right tag;
//! - `impl mgws_core::TaskExecutor<TaskStruct> for Builtin`, dispatching by tag and returning
//!   `TaskError::UnknownTag` for any other tag;
//! - `Builtin::name_of(tag)` and `Builtin::TAGS`;
//! - `impl mgws_tasks::Registry for Builtin`, with the registry's name and fingerprint (a digest of
//!   its name, tags, variant names, functor types and their sizes and alignments), which a kernel built
//!   for the registry carries too;
//! - compile-time assertions that each functor fits the parameter area in size and alignment;
//! - the widths its variants declare, `#[width(N)]` (`TaskExecutor::width`, `NARROW`,
//!   `UNIFORM_WIDTH`; part of the fingerprint): the lanes each task of that functor runs on.
//!
//! # Arguments
//!
//! - `ptx = EXPR`: the registry's own kernel, an expression of type `&'static str` (typically
//!   `include_str!(concat!(env!("OUT_DIR"), "/my_kernel.ptx"))`, written by `mgws-builder` in the
//!   crate's build script). The generated `impl Registry` sets `KERNEL_PTX` to `Some(EXPR)` on
//!   every target but `nvptx64` (a kernel does not carry its own text).
//! - `cubin = EXPR`: the same kernel assembled ahead of time, an expression of type
//!   `&'static [u8]` (`mgws::kernel_cubin!()`: the cubin `mgws-builder` writes beside the PTX
//!   when ptxas is found, empty otherwise). The CUDA backend loads it instead of JIT-compiling
//!   the PTX on a GPU it was built for; `KERNEL_CUBIN` is `Some(EXPR)`.
//! - `kernel = "name"`, `max_registers = N`, `local_capacity = N`, `levels_local_capacity = N`,
//!   `static_local_capacity = N`, `public_capacity = N`, `publish_copy_batch = N` and
//!   `results(name: Type, ...)`: the kernel's name and its tuning, and the result tables
//!   (described with examples in `mgws_tasks::registry`); `publish_copy_batch` becomes
//!   `TaskExecutor::PUBLISH_COPY_BATCH`; `indexed_in_place` becomes
//!   `TaskExecutor::INDEXED_IN_PLACE`; `plain_slots` makes `TaskExecutor::ROTATED_SLOTS` false.
//! - `crate = PATH`: where the task model lives, for the generated paths. By default the macro
//!   reads the calling crate's `Cargo.toml`: `::mgws_tasks` when it depends on `mgws-tasks`,
//!   `::mgws::__tasks` (the `mgws` crate's re-export) when it depends only on `mgws`.
//!
//! ```ignore
//! #[mgws::registry(ptx = include_str!(concat!(env!("OUT_DIR"), "/my_kernel.ptx")))]
//! pub enum MyTasks {
//!     Collatz(CollatzRange),
//! }
//! ```

use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::{parse_macro_input, Expr, Fields, ItemEnum, Path};

/// The arguments of `#[registry(...)]`.
#[derive(Default)]
struct Args {
    ptx: Option<Expr>,
    cubin: Option<Expr>,
    krate: Option<Path>,
    kernel: Option<syn::LitStr>,
    max_registers: Option<syn::LitInt>,
    publish_copy_batch: Option<syn::LitInt>,
    /// `indexed_in_place`: narrow workers run claims of indexed initial tasks from the template.
    indexed_in_place: bool,
    /// `plain_slots`: narrow tasks read and write their local-queue slots in plain order.
    plain_slots: bool,
    local_capacity: Option<syn::LitInt>,
    levels_local_capacity: Option<syn::LitInt>,
    static_local_capacity: Option<syn::LitInt>,
    public_capacity: Option<syn::LitInt>,
    /// `results(name: Type, ...)`: the registry's result tables.
    results: Vec<(syn::Ident, syn::Type)>,
}

/// The most result tables a registry may declare: they take data areas from the top, and the
/// job's own data keeps at least area 0.
const MAX_RESULTS: usize = 4;

impl Args {
    fn parse(attr: TokenStream) -> syn::Result<Args> {
        let mut args = Args::default();
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("ptx") {
                if args.ptx.is_some() {
                    return Err(meta.error("`ptx` is given twice"));
                }
                args.ptx = Some(meta.value()?.parse()?);
                Ok(())
            } else if meta.path.is_ident("cubin") {
                if args.cubin.is_some() {
                    return Err(meta.error("`cubin` is given twice"));
                }
                args.cubin = Some(meta.value()?.parse()?);
                Ok(())
            } else if meta.path.is_ident("kernel") {
                if args.kernel.is_some() {
                    return Err(meta.error("`kernel` is given twice"));
                }
                let name: syn::LitStr = meta.value()?.parse()?;
                let v = name.value();
                let ok = v.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && v.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                if !ok {
                    return Err(syn::Error::new_spanned(
                        &name,
                        "a kernel name is a lowercase identifier (a-z, 0-9, _), like \"memset\"",
                    ));
                }
                args.kernel = Some(name);
                Ok(())
            } else if meta.path.is_ident("max_registers") {
                args.max_registers = Some(count_arg(
                    &meta,
                    args.max_registers.is_some(),
                    |v| (16..=255).contains(&v),
                    "`max_registers` is a register count per thread from 16 to 255, like 64",
                )?);
                Ok(())
            } else if meta.path.is_ident("publish_copy_batch") {
                args.publish_copy_batch = Some(count_arg(
                    &meta,
                    args.publish_copy_batch.is_some(),
                    |v| matches!(v, 1 | 2 | 4 | 8),
                    "`publish_copy_batch` is the words each lane copies at once on the publishing \
                     paths: 1, 2, 4 or 8, like 4",
                )?);
                Ok(())
            } else if meta.path.is_ident("indexed_in_place") {
                if args.indexed_in_place {
                    return Err(meta.error("`indexed_in_place` is given twice"));
                }
                args.indexed_in_place = true;
                Ok(())
            } else if meta.path.is_ident("plain_slots") {
                if args.plain_slots {
                    return Err(meta.error("`plain_slots` is given twice"));
                }
                args.plain_slots = true;
                Ok(())
            } else if meta.path.is_ident("local_capacity") {
                capacity_arg(&meta, &mut args.local_capacity, "local", 65536, 128)
            } else if meta.path.is_ident("levels_local_capacity") {
                capacity_arg(&meta, &mut args.levels_local_capacity, "local", 65536, 128)
            } else if meta.path.is_ident("static_local_capacity") {
                capacity_arg(&meta, &mut args.static_local_capacity, "local", 65536, 64)
            } else if meta.path.is_ident("public_capacity") {
                capacity_arg(&meta, &mut args.public_capacity, "public", 262144, 512)
            } else if meta.path.is_ident("results") {
                if !args.results.is_empty() {
                    return Err(meta.error("`results` is given twice"));
                }
                let content;
                syn::parenthesized!(content in meta.input);
                let decls =
                    syn::punctuated::Punctuated::<ResultDecl, syn::Token![,]>::parse_terminated(
                        &content,
                    )?;
                if decls.is_empty() || decls.len() > MAX_RESULTS {
                    return Err(meta.error(format!(
                        "`results(...)` declares 1 to {MAX_RESULTS} result tables, like \
                         `results(solutions: u64)`"
                    )));
                }
                for d in decls {
                    if args.results.iter().any(|(n, _)| *n == d.name) {
                        return Err(syn::Error::new_spanned(
                            &d.name,
                            "a result table is declared twice",
                        ));
                    }
                    args.results.push((d.name, d.ty));
                }
                Ok(())
            } else if meta.path.is_ident("crate") {
                if args.krate.is_some() {
                    return Err(meta.error("`crate` is given twice"));
                }
                args.krate = Some(meta.value()?.call(Path::parse_mod_style)?);
                Ok(())
            } else {
                let path = &meta.path;
                let name = quote!(#path).to_string().replace(' ', "");
                Err(meta.error(format!(
                    "unknown #[registry] argument `{name}`; expected `ptx = EXPR` (the kernel's \
                     PTX text, e.g. `include_str!(concat!(env!(\"OUT_DIR\"), \"/kernel.ptx\"))`), \
                     `cubin = EXPR` (the same kernel assembled, e.g. `mgws::kernel_cubin!()`), \
                     `kernel = \"name\"` (the name its kernel entries carry), `max_registers = N` \
                     (the CUDA backend's default register cap for its kernels), \
                     `publish_copy_batch = N` (words each lane copies at once when it publishes), \
                     `indexed_in_place` (narrow workers run indexed initial tasks from their \
                     template), `plain_slots` (narrow tasks' slots in plain order), \
                     `local_capacity = N` (the CUDA backend's default local queue), \
                     `levels_local_capacity = N` (the same for the kernel per level), \
                     `static_local_capacity = N` (the same for static assignment), \
                     `public_capacity = N` (the CUDA backend's default public queue), \
                     `results(name: Type, ...)` (its result tables) or `crate = PATH`"
                )))
            }
        });
        syn::parse::Parser::parse(parser, attr)?;
        Ok(args)
    }
}

/// A `name = N` argument: an integer literal that `ok` accepts (`what` says which), given once.
fn count_arg(
    meta: &syn::meta::ParseNestedMeta<'_>,
    given: bool,
    ok: impl Fn(u32) -> bool,
    what: &str,
) -> syn::Result<syn::LitInt> {
    if given {
        let path = &meta.path;
        let name = quote!(#path).to_string();
        return Err(meta.error(format!("`{name}` is given twice")));
    }
    let n: syn::LitInt = meta.value()?.parse()?;
    if !n.base10_parse::<u32>().is_ok_and(ok) {
        return Err(syn::Error::new_spanned(&n, what));
    }
    Ok(n)
}

/// Parses a queue capacity argument (`local_capacity = N` and the like) into `slot`: a power
/// of two from 2 to `max` tasks, given once.
fn capacity_arg(
    meta: &syn::meta::ParseNestedMeta<'_>,
    slot: &mut Option<syn::LitInt>,
    queue: &str,
    max: u32,
    example: u32,
) -> syn::Result<()> {
    let path = &meta.path;
    let name = quote!(#path).to_string();
    *slot = Some(count_arg(
        meta,
        slot.is_some(),
        |v| v.is_power_of_two() && (2..=max).contains(&v),
        &format!(
            "`{name}` is a {queue} queue's tasks, a power of two from 2 to {max}, like {example}"
        ),
    )?);
    Ok(())
}

#[proc_macro_attribute]
pub fn registry(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = match Args::parse(attr) {
        Ok(a) => a,
        Err(e) => return e.to_compile_error().into(),
    };
    let input = parse_macro_input!(item as ItemEnum);
    let krate = match &args.krate {
        Some(p) => quote!(#p),
        None => default_crate_path(),
    };
    match expand(input, &args, krate) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// One `name: Type` of `results(...)`.
struct ResultDecl {
    name: syn::Ident,
    ty: syn::Type,
}

impl syn::parse::Parse for ResultDecl {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let name = input.parse()?;
        input.parse::<syn::Token![:]>()?;
        Ok(ResultDecl {
            name,
            ty: input.parse()?,
        })
    }
}

/// `#[task]`: makes a struct a task type. It adds `#[derive(Clone, Copy, Pod, Zeroable)]` (with
/// the crate path that `bytemuck`'s derives need), `#[repr(C)]`, and a compile-time check that
/// the struct fits the 24-byte parameter area, whose error states its size and the limit. Other
/// derives (`Debug`, `PartialEq`, ...) stay the user's; `Clone`, `Copy`, `Pod`, `Zeroable` and
/// `#[repr(C)]` written by hand are taken as given. `crate = PATH` as for `#[registry]`.
///
/// ```ignore
/// #[mgws::task]
/// pub struct CollatzRange {
///     pub start: u64,
///     pub len: u64,
/// }
/// ```
#[proc_macro_attribute]
pub fn task(attr: TokenStream, item: TokenStream) -> TokenStream {
    let krate = match parse_crate_only(attr) {
        Ok(Some(p)) => quote!(#p),
        Ok(None) => default_crate_path(),
        Err(e) => return e.to_compile_error().into(),
    };
    let input = parse_macro_input!(item as syn::ItemStruct);
    match expand_task(input, krate) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The only argument `#[task]` takes: `crate = PATH`.
fn parse_crate_only(attr: TokenStream) -> syn::Result<Option<Path>> {
    let mut krate = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            if krate.is_some() {
                return Err(meta.error("`crate` is given twice"));
            }
            krate = Some(meta.value()?.call(Path::parse_mod_style)?);
            Ok(())
        } else {
            Err(meta.error(
                "unknown #[task] argument; the only one is `crate = PATH` (where the task model \
                 lives, e.g. `crate = ::mgws::__tasks`)",
            ))
        }
    });
    syn::parse::Parser::parse(parser, attr)?;
    Ok(krate)
}

/// The derives `#[task]` supplies itself.
const SUPPLIED_DERIVES: [&str; 4] = ["Clone", "Copy", "Pod", "Zeroable"];

fn expand_task(
    mut input: syn::ItemStruct,
    krate: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "a task type cannot be generic: its bytes are read back by tag, which names one \
             concrete type (write one struct per type)",
        ));
    }
    let mut attrs = Vec::new();
    for attr in input.attrs.drain(..) {
        if attr.path().is_ident("derive") {
            // Keep the user's own derives; drop the ones supplied below.
            let list = attr.parse_args_with(
                syn::punctuated::Punctuated::<Path, syn::Token![,]>::parse_terminated,
            )?;
            let kept: Vec<&Path> = list
                .iter()
                .filter(|p| {
                    let last = p.segments.last().map(|s| s.ident.to_string());
                    !last.is_some_and(|l| SUPPLIED_DERIVES.contains(&l.as_str()))
                })
                .collect();
            if !kept.is_empty() {
                attrs.push(syn::parse_quote!(#[derive(#(#kept),*)]));
            }
        } else if attr.path().is_ident("repr") {
            let repr: proc_macro2::TokenStream = attr.parse_args()?;
            if repr.to_string() != "C" {
                return Err(syn::Error::new_spanned(
                    &attr,
                    "#[task] lays the struct out as #[repr(C)] (its bytes must mean the same on \
                     every device): remove this #[repr(...)]",
                ));
            }
        } else if attr.path().is_ident("bytemuck") {
            // Supplied below with the right crate path.
        } else {
            attrs.push(attr);
        }
    }
    input.attrs = attrs;
    let ty = &input.ident;
    let bytemuck = format!("{}::bytemuck", krate.to_string().replace(' ', ""));
    let check = fits_params(&krate, &quote!(#ty));
    Ok(quote! {
        #[derive(::core::clone::Clone, ::core::marker::Copy, #krate::Pod, #krate::Zeroable)]
        #[bytemuck(crate = #bytemuck)]
        #[repr(C)]
        #input
        #check
    })
}

/// The compile-time check that functor type `ty` fits the parameter area (`FitsParams`, whose
/// failure names the type's size and alignment).
fn fits_params(
    krate: &proc_macro2::TokenStream,
    ty: &proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    quote! {
        const _: () = #krate::FitsParams::<
            { ::core::mem::size_of::<#ty>() },
            { ::core::mem::align_of::<#ty>() },
        >::OK;
    }
}

/// The path of the task model as the calling crate sees it: `::mgws_tasks` inside `mgws-tasks`
/// and in crates that depend on it, else `::mgws::__tasks` in crates that depend on `mgws`
/// (possibly renamed) but not on `mgws-tasks`.
fn default_crate_path() -> proc_macro2::TokenStream {
    let tasks = quote!(::mgws_tasks);
    if std::env::var("CARGO_PKG_NAME").as_deref() == Ok("mgws-tasks") {
        return tasks;
    }
    let Some(manifest) = std::env::var_os("CARGO_MANIFEST_DIR")
        .and_then(|d| std::fs::read_to_string(std::path::Path::new(&d).join("Cargo.toml")).ok())
    else {
        return tasks;
    };
    match dependency_names(&manifest) {
        (true, _) => tasks,
        (false, Some(mgws)) => {
            let mgws = format_ident!("{}", mgws);
            quote!(::#mgws::__tasks)
        }
        (false, None) => tasks,
    }
}

/// Scans a `Cargo.toml` for its dependencies: whether it names `mgws-tasks`, and the name (as a
/// Rust identifier) under which it depends on `mgws`, if it does. Line-based: a dependency is a
/// line `name = ...` or `name.workspace = true`, or a table `[...dependencies.name]`, and a
/// `package = "..."` key renames it.
fn dependency_names(manifest: &str) -> (bool, Option<String>) {
    let mut tasks = false;
    let mut mgws = None;
    let mut in_deps = false;
    let mut table_dep: Option<String> = None;
    for line in manifest.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            // Only the dependencies the library itself is compiled with count: `[dependencies]`
            // and `[target.'...'.dependencies]`, not dev-, build- or workspace dependencies.
            let normal = |h: &str| {
                h == "dependencies" || (h.starts_with("target.") && h.ends_with(".dependencies"))
            };
            table_dep = header
                .rsplit_once(".")
                .filter(|(table, _)| normal(table))
                .map(|(_, name)| name.trim().to_string());
            in_deps = normal(header);
            if let Some(name) = &table_dep {
                tasks |= name == "mgws-tasks";
                if name == "mgws" {
                    mgws = Some("mgws".to_string());
                }
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().trim_matches('"');
        let package = value
            .split_once("package")
            .and_then(|(_, rest)| rest.split('"').nth(1))
            .map(str::to_string);
        if let Some(dep) = &table_dep {
            if key == "package" {
                match package_value(value).as_deref() {
                    Some("mgws-tasks") => tasks = true,
                    Some("mgws") => mgws = Some(dep.replace('-', "_")),
                    _ => {}
                }
            }
            continue;
        }
        if !in_deps {
            continue;
        }
        let name = key.split('.').next().unwrap_or(key).trim();
        match package.as_deref().unwrap_or(name) {
            "mgws-tasks" => tasks = true,
            "mgws" => mgws = Some(name.replace('-', "_")),
            _ => {}
        }
    }
    (tasks, mgws)
}

/// The string of `= "value"`.
fn package_value(value: &str) -> Option<String> {
    value.split('"').nth(1).map(str::to_string)
}

fn screaming_snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn expand(
    input: ItemEnum,
    args: &Args,
    krate: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let (ptx, cubin, kernel) = (args.ptx.as_ref(), args.cubin.as_ref(), args.kernel.as_ref());
    let (max_registers, local_capacity, public_capacity) = (
        args.max_registers.as_ref(),
        args.local_capacity.as_ref(),
        args.public_capacity.as_ref(),
    );
    let publish_copy_batch = args.publish_copy_batch.as_ref().map(|n| {
        quote! {
            const PUBLISH_COPY_BATCH: u32 = #n;
        }
    });
    let indexed_in_place = args.indexed_in_place.then(|| {
        quote! {
            const INDEXED_IN_PLACE: bool = true;
        }
    });
    let plain_slots = args.plain_slots.then(|| {
        quote! {
            const ROTATED_SLOTS: bool = false;
        }
    });
    let (levels_local_capacity, static_local_capacity) = (
        args.levels_local_capacity.as_ref(),
        args.static_local_capacity.as_ref(),
    );
    let results = &args.results;
    let vis = &input.vis;
    let name = &input.ident;
    let kernel_name = kernel
        .map(syn::LitStr::value)
        .unwrap_or_else(|| screaming_snake(&name.to_string()).to_ascii_lowercase());
    // Doc comments, `cfg`s and lint levels carry over to the generated struct; `derive` and
    // `repr` describe the enum, and the struct derives what it needs itself (a copied
    // `#[derive(Debug)]` would implement Debug twice).
    let attrs: Vec<_> = input
        .attrs
        .iter()
        .filter(|a| !a.path().is_ident("derive") && !a.path().is_ident("repr"))
        .collect();
    if input.variants.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "a registry needs at least one task functor",
        ));
    }
    let mut consts = Vec::new();
    let mut arms = Vec::new();
    let mut name_arms = Vec::new();
    let mut tagged = Vec::new();
    let mut asserts = Vec::new();
    let mut tag_list = Vec::new();
    let mut layout_mix = Vec::new();
    let mut description = name.to_string();
    let mut seen = std::collections::HashSet::new();
    let mut widths = Vec::new();
    let mut width_arms = Vec::new();
    for (i, v) in input.variants.iter().enumerate() {
        let ty = match &v.fields {
            Fields::Unnamed(f) if f.unnamed.len() == 1 => &f.unnamed[0].ty,
            _ => {
                return Err(syn::Error::new_spanned(
                    v,
                    "each variant names one task functor type, like `Memset(MemsetTask)`",
                ))
            }
        };
        if !seen.insert(quote!(#ty).to_string()) {
            return Err(syn::Error::new_spanned(
                ty,
                "this functor type is registered twice",
            ));
        }
        let width = variant_width(v)?;
        widths.push(width);
        let tag = (i + 1) as u32;
        let cname = format_ident!("{}", screaming_snake(&v.ident.to_string()));
        width_arms.push(quote! { #tag => #width, });
        let vname = v.ident.to_string();
        consts.push(quote! { pub const #cname: u32 = #tag; });
        arms.push(quote! {
            #tag => {
                let functor: #ty = task.params_as::<#ty>();
                <#ty as #krate::TaskFunctor>::run(&functor, task, ctx)
            }
        });
        name_arms.push(quote! { #tag => ::core::option::Option::Some(#vname), });
        tagged.push(quote! {
            impl #krate::Tagged<#ty> for #name { const TAG: u32 = #tag; }
        });
        asserts.push(fits_params(&krate, &quote!(#ty)));
        tag_list.push(quote! { (#tag, #vname) });
        description.push_str(&format!(";{tag}:{vname}:{}", quote!(#ty)));
        if width != 0 {
            description.push_str(&format!(":width{width}"));
        }
        layout_mix.push(quote! {
            let h = #krate::registry::fingerprint_mix(h, ::core::mem::size_of::<#ty>() as u64);
            let h = #krate::registry::fingerprint_mix(h, ::core::mem::align_of::<#ty>() as u64);
        });
    }
    // Result tables take data areas from the top: the first declared gets the last area.
    let mut result_consts = Vec::new();
    for (i, (rname, rty)) in results.iter().enumerate() {
        let cname = format_ident!("{}", screaming_snake(&rname.to_string()));
        let doc = format!(
            "Result table `{rname}`: one `{}` per worker (`ctx.accumulate(Self::{cname}, ..)` \
             in tasks, `mgws::PerWorker::of(Self::{cname}, &sched)` on the host).",
            quote!(#rty).to_string().replace(' ', "")
        );
        result_consts.push(quote! {
            #[doc = #doc]
            pub const #cname: #krate::ResultTable<#rty> =
                #krate::ResultTable::in_area((#krate::__core::DATA_AREAS - 1 - #i) as u8);
        });
        description.push_str(&format!(";results:{rname}:{}", quote!(#rty)));
        layout_mix.push(quote! {
            let h = #krate::registry::fingerprint_mix(h, ::core::mem::size_of::<#rty>() as u64);
        });
    }
    let count = input.variants.len();
    let narrow = widths.iter().any(|&w| w != 0);
    let uniform_width = if widths.iter().all(|&w| w == widths[0]) {
        let w = widths[0];
        quote!(::core::option::Option::Some(#w))
    } else {
        quote!(::core::option::Option::None)
    };
    let width_fn = narrow.then(|| {
        quote! {
            #[inline(always)]
            fn width(&self, task: &#krate::TaskStruct) -> u32 {
                match task.tag {
                    #(#width_arms)*
                    _ => 0,
                }
            }
        }
    });
    let kernel_ptx = ptx.map(|ptx| {
        quote! {
            #[cfg(not(target_arch = "nvptx64"))]
            const KERNEL_PTX: ::core::option::Option<&'static str> =
                ::core::option::Option::Some(#ptx);
        }
    });
    let kernel_cubin = cubin.map(|cubin| {
        quote! {
            #[cfg(not(target_arch = "nvptx64"))]
            const KERNEL_CUBIN: ::core::option::Option<&'static [u8]> =
                ::core::option::Option::Some(#cubin);
        }
    });
    let local_capacity = local_capacity.map(|n| {
        quote! {
            const LOCAL_CAPACITY: ::core::option::Option<u32> = ::core::option::Option::Some(#n);
        }
    });
    let public_capacity = public_capacity.map(|n| {
        quote! {
            const PUBLIC_CAPACITY: ::core::option::Option<u32> = ::core::option::Option::Some(#n);
        }
    });
    let levels_local_capacity = levels_local_capacity.map(|n| {
        quote! {
            const LEVELS_LOCAL_CAPACITY: ::core::option::Option<u32> =
                ::core::option::Option::Some(#n);
        }
    });
    let static_local_capacity = static_local_capacity.map(|n| {
        quote! {
            const STATIC_LOCAL_CAPACITY: ::core::option::Option<u32> =
                ::core::option::Option::Some(#n);
        }
    });
    let max_registers = max_registers.map(|n| {
        quote! {
            const MAX_REGISTERS: ::core::option::Option<u32> = ::core::option::Option::Some(#n);
        }
    });
    let name_str = name.to_string();
    Ok(quote! {
        #(#attrs)*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #vis struct #name;

        impl #name {
            #(#consts)*
            #(#result_consts)*
            /// Every tag of this registry with its variant name.
            pub const TAGS: [(u32, &'static str); #count] = [#(#tag_list),*];

            /// The variant name of `tag`, if this registry knows it.
            pub fn name_of(tag: u32) -> ::core::option::Option<&'static str> {
                match tag {
                    #(#name_arms)*
                    _ => ::core::option::Option::None,
                }
            }

            /// A task struct running `functor`, with no data descriptors.
            pub fn task<F: #krate::TaskFunctor>(functor: &F) -> #krate::TaskStruct
            where
                Self: #krate::Tagged<F>,
            {
                #krate::TaskStruct::new(<Self as #krate::Tagged<F>>::TAG, functor)
            }
        }

        #(#tagged)*
        #(#asserts)*

        impl #krate::Registry for #name {
            const NAME: &'static str = #name_str;
            const KERNEL: &'static str = #kernel_name;
            const FINGERPRINT: u64 = {
                let h = #krate::registry::fingerprint_bytes(
                    #krate::registry::FINGERPRINT_BASIS,
                    #description.as_bytes(),
                );
                #(#layout_mix)*
                h
            };
            const TAGS: &'static [(u32, &'static str)] = &#name::TAGS;
            #kernel_ptx
            #kernel_cubin
            #max_registers
            #local_capacity
            #levels_local_capacity
            #static_local_capacity
            #public_capacity
        }

        impl #krate::__core::TaskExecutor<#krate::TaskStruct> for #name {
            const NARROW: bool = #narrow;
            const UNIFORM_WIDTH: ::core::option::Option<u32> = #uniform_width;
            #publish_copy_batch
            #indexed_in_place
            #plain_slots
            #width_fn
            #[inline(always)]
            fn execute<C: #krate::__core::Context<Task = #krate::TaskStruct>>(
                &self,
                task: &#krate::TaskStruct,
                ctx: &mut C,
            ) -> ::core::result::Result<(), #krate::__core::TaskError> {
                match task.tag {
                    #(#arms)*
                    other => ::core::result::Result::Err(#krate::__core::TaskError::UnknownTag(other)),
                }
            }
        }
    })
}

/// A variant's `#[width(N)]`: the lanes each of its tasks runs on, a power of two from 1 to 32;
/// 0 (the whole worker) without the attribute. Other attributes are left alone.
fn variant_width(v: &syn::Variant) -> syn::Result<u32> {
    let mut width = 0;
    for attr in v.attrs.iter().filter(|a| a.path().is_ident("width")) {
        if width != 0 {
            return Err(syn::Error::new_spanned(attr, "`width` is given twice"));
        }
        let lit: syn::LitInt = attr.parse_args().map_err(|_| {
            syn::Error::new_spanned(
                attr,
                "`width` takes the lanes of one task, a power of two from 1 to 32:                  `#[width(1)]`",
            )
        })?;
        let n: u32 = lit.base10_parse()?;
        if !n.is_power_of_two() || n > 32 {
            return Err(syn::Error::new_spanned(
                lit,
                format!(
                    "a task's width is a power of two from 1 to 32 lanes, not {n}; without                      `#[width]` a task has the whole worker"
                ),
            ));
        }
        width = n;
    }
    Ok(width)
}

#[cfg(test)]
mod tests {
    use super::dependency_names;

    #[test]
    fn dependencies_are_found_in_every_spelling() {
        let user = "[package]\nname = \"x\"\n[dependencies]\nmgws = { path = \"../../runtime\" }\n";
        assert_eq!(dependency_names(user), (false, Some("mgws".into())));
        let ws = "[dependencies]\nmgws-core.workspace = true\nmgws-tasks.workspace = true\n";
        assert_eq!(dependency_names(ws), (true, None));
        let renamed = "[dependencies]\nrt = { package = \"mgws\", path = \"r\" }\n";
        assert_eq!(dependency_names(renamed), (false, Some("rt".into())));
        let table = "[target.'cfg(unix)'.dependencies.my-mgws]\npackage = \"mgws\"\npath = \"r\"\n";
        assert_eq!(dependency_names(table), (false, Some("my_mgws".into())));
        let other = "[package]\nname = \"mgws\"\n[dependencies]\nserde = \"1\"\n";
        assert_eq!(dependency_names(other), (false, None));
        // Dev-, build- and workspace dependencies are not what the library is compiled with.
        let dev =
            "[dependencies]\nmgws = { path = \"r\" }\n[dev-dependencies]\nmgws-tasks = \"1\"\n\
                   [build-dependencies.mgws-tasks]\npath = \"t\"\n[workspace.dependencies]\n\
                   mgws-tasks = { path = \"t\" }\n";
        assert_eq!(dependency_names(dev), (false, Some("mgws".into())));
    }
}
