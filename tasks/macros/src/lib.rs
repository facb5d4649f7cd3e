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
//!   its name, tags, variant names, functor types and their layouts), which a kernel built for the
//!   registry carries too;
//! - compile-time assertions that each functor fits the parameter area in size and alignment.

use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::{parse_macro_input, Fields, ItemEnum};

#[proc_macro_attribute]
pub fn registry(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(
            proc_macro2::Span::call_site(),
            "#[registry] takes no arguments",
        )
        .to_compile_error()
        .into();
    }
    let input = parse_macro_input!(item as ItemEnum);
    match expand(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
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

fn expand(input: ItemEnum) -> syn::Result<proc_macro2::TokenStream> {
    let vis = &input.vis;
    let name = &input.ident;
    let attrs = &input.attrs;
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
        let tag = (i + 1) as u32;
        let cname = format_ident!("{}", screaming_snake(&v.ident.to_string()));
        let vname = v.ident.to_string();
        consts.push(quote! { pub const #cname: u32 = #tag; });
        arms.push(quote! {
            #tag => {
                let functor: #ty = task.params_as::<#ty>();
                <#ty as ::mgws_tasks::TaskFunctor>::run(&functor, task, ctx)
            }
        });
        name_arms.push(quote! { #tag => ::core::option::Option::Some(#vname), });
        tagged.push(quote! {
            impl ::mgws_tasks::Tagged<#ty> for #name { const TAG: u32 = #tag; }
        });
        asserts.push(quote! {
            const _: () = {
                assert!(
                    ::core::mem::size_of::<#ty>() <= ::mgws_tasks::PARAM_BYTES,
                    concat!("task functor ", stringify!(#ty), " does not fit the task parameter area")
                );
                assert!(
                    ::core::mem::align_of::<#ty>() <= ::mgws_tasks::PARAM_ALIGN,
                    concat!("task functor ", stringify!(#ty), " is aligned more strictly than the parameter area")
                );
            };
        });
        tag_list.push(quote! { (#tag, #vname) });
        description.push_str(&format!(";{tag}:{vname}:{}", quote!(#ty)));
        layout_mix.push(quote! {
            let h = ::mgws_tasks::registry::fingerprint_mix(h, ::core::mem::size_of::<#ty>() as u64);
            let h = ::mgws_tasks::registry::fingerprint_mix(h, ::core::mem::align_of::<#ty>() as u64);
        });
    }
    let count = input.variants.len();
    let name_str = name.to_string();
    Ok(quote! {
        #(#attrs)*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #vis struct #name;

        impl #name {
            #(#consts)*
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
            pub fn task<F: ::mgws_tasks::TaskFunctor>(functor: &F) -> ::mgws_tasks::TaskStruct
            where
                Self: ::mgws_tasks::Tagged<F>,
            {
                ::mgws_tasks::TaskStruct::new(<Self as ::mgws_tasks::Tagged<F>>::TAG, functor)
            }
        }

        #(#tagged)*
        #(#asserts)*

        impl ::mgws_tasks::Registry for #name {
            const NAME: &'static str = #name_str;
            const FINGERPRINT: u64 = {
                let h = ::mgws_tasks::registry::fingerprint_bytes(
                    ::mgws_tasks::registry::FINGERPRINT_BASIS,
                    #description.as_bytes(),
                );
                #(#layout_mix)*
                h
            };
            const TAGS: &'static [(u32, &'static str)] = &#name::TAGS;
        }

        impl ::mgws_tasks::__core::TaskExecutor<::mgws_tasks::TaskStruct> for #name {
            #[inline(always)]
            fn execute<P: ::mgws_tasks::__core::Platform>(
                &self,
                task: &::mgws_tasks::TaskStruct,
                ctx: &mut ::mgws_tasks::__core::TaskContext<'_, '_, P, ::mgws_tasks::TaskStruct>,
            ) -> ::core::result::Result<(), ::mgws_tasks::__core::TaskError> {
                match task.tag {
                    #(#arms)*
                    other => ::core::result::Result::Err(::mgws_tasks::__core::TaskError::UnknownTag(other)),
                }
            }
        }
    })
}
