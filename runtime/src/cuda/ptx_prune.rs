//! A PTX module pruned to one kernel entry and the functions it reaches ([`prune_to_entry`]), so
//! that the driver's JIT compiles what a run launches and nothing else.
//!
//! The built-in module holds hundreds of entries and, since the bridged entries call their
//! loops out of line, about eighty `.func` definitions, most of them large. The JIT compiles
//! every function of the text it is given, called or not: linked with NVSHMEM's device code
//! (the device-API transport) one entry with all of them took minutes (docs/results.md).
//!
//! The parser reads LLVM's PTX: braces and parentheses are counted outside `//` comments (LLVM
//! writes no `/* */` comments), and a function's header line names it.

use std::collections::{HashMap, HashSet};

/// One top-level part of a module, in the module's order.
enum Part<'a> {
    /// Lines outside every function and entry: the header, globals, comments.
    Lines(&'a str),
    /// A kernel entry (its definition, or a declaration ending in `;`).
    Entry { name: &'a str, text: &'a str },
    /// A `.func` declaration or definition; `name` is `None` where the header line does not
    /// name it plainly.
    Func {
        name: Option<&'a str>,
        text: &'a str,
        kind: FuncKind,
    },
}

/// What a `.func` part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FuncKind {
    /// A header ending in `;`: the function is defined elsewhere in the module, or by the linker.
    Declaration,
    /// A header with a body.
    Definition,
}

/// The part of `ptx` the driver needs to JIT-compile `entry` alone, in the module's order: the
/// lines outside functions and entries (header directives, globals), the entry, and every `.func`
/// the entry reaches, with their declarations. A function is reached if the entry, a global or a
/// reached function names it (a call, or its address taken), and so on. Declarations of
/// functions the module does not define (NVSHMEM's wrappers, resolved by the linker) and
/// functions whose header the parser could not read are kept too. `None` if `ptx` has no
/// `.entry entry`.
pub fn prune_to_entry(ptx: &str, entry: &str) -> Option<String> {
    let parts = parts_of(ptx);
    let is_entry = |p: &Part<'_>| matches!(p, Part::Entry { name, .. } if *name == entry);
    if !parts.iter().any(is_entry) {
        return None;
    }
    let definitions: HashMap<&str, &str> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Func {
                name: Some(name),
                text,
                kind: FuncKind::Definition,
            } => Some((*name, *text)),
            _ => None,
        })
        .collect();
    // Where reaching starts: the entry (its declaration too), the globals (their code, not the
    // comments: LLVM's `// .globl NAME` names every visible function), and the functions kept
    // because their name was not read.
    let starts = parts.iter().filter_map(|p| match p {
        Part::Entry { text, .. } if is_entry(p) => Some(*text),
        Part::Lines(text) => Some(*text),
        Part::Func {
            name: None, text, ..
        } => Some(*text),
        _ => None,
    });
    let reached = reached_from(starts, &definitions);
    let mut out = String::new();
    for p in &parts {
        let keep = match p {
            Part::Lines(_) => true,
            Part::Entry { .. } => is_entry(p),
            Part::Func { name: None, .. } => true,
            Part::Func {
                name: Some(name), ..
            } => reached.contains(name) || !definitions.contains_key(name),
        };
        if keep {
            out.push_str(match p {
                Part::Lines(text) | Part::Entry { text, .. } | Part::Func { text, .. } => text,
            });
        }
    }
    Some(out)
}

/// The names of `definitions` that the code of `texts` mentions (outside `//` comments), and
/// those their definitions mention, and so on.
fn reached_from<'a>(
    texts: impl Iterator<Item = &'a str>,
    definitions: &HashMap<&'a str, &'a str>,
) -> HashSet<&'a str> {
    let mut reached = HashSet::new();
    let mut pending: Vec<&str> = texts.collect();
    while let Some(text) = pending.pop() {
        let code = text.lines().map(|l| l.split("//").next().unwrap_or(""));
        for token in code.flat_map(identifiers) {
            if let Some((&name, &definition)) = definitions.get_key_value(token) {
                if reached.insert(name) {
                    pending.push(definition);
                }
            }
        }
    }
    reached
}

/// The module's top-level parts. A function or entry runs from its header line to the line
/// that closes its body, or, for a declaration, to the `;` after its parameter list.
fn parts_of(ptx: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    // Byte offsets: where the current run of outside lines began, where the open part began.
    let mut lines_from = 0;
    let mut open: Option<(usize, Header<'_>)> = None;
    let (mut parens, mut braces, mut opened) = (0i32, 0i32, false);
    let mut at = 0;
    for line in ptx.split_inclusive('\n') {
        let start = at;
        at += line.len();
        if open.is_none() {
            let Some(header) = header_of(line) else {
                continue;
            };
            if lines_from < start {
                parts.push(Part::Lines(&ptx[lines_from..start]));
            }
            open = Some((start, header));
            (parens, braces, opened) = (0, 0, false);
        }
        let code = line.split("//").next().unwrap_or("");
        for c in code.bytes() {
            match c {
                b'(' => parens += 1,
                b')' => parens -= 1,
                b'{' => {
                    braces += 1;
                    opened = true;
                }
                b'}' => braces -= 1,
                _ => {}
            }
        }
        let closed = if opened {
            braces == 0
        } else {
            parens == 0 && code.trim_end().ends_with(';')
        };
        if closed {
            let (from, header) = open.take().expect("a part is open");
            let text = &ptx[from..at];
            parts.push(match header {
                Header::Entry(name) => Part::Entry { name, text },
                Header::Func(name) => Part::Func {
                    name,
                    text,
                    kind: if opened {
                        FuncKind::Definition
                    } else {
                        FuncKind::Declaration
                    },
                },
            });
            lines_from = at;
        }
    }
    // An unclosed part (a truncated module) and trailing lines stay as they are.
    let rest = open.map_or(lines_from, |(from, _)| from);
    if rest < ptx.len() {
        parts.push(Part::Lines(&ptx[rest..]));
    }
    parts
}

/// What a header line opens: an entry, or a function with its name if the line gives it.
enum Header<'a> {
    Entry(&'a str),
    Func(Option<&'a str>),
}

/// The part `line` opens, if it is the header line of an entry or a function.
fn header_of(line: &str) -> Option<Header<'_>> {
    if let Some(name) = entry_name(line) {
        return Some(Header::Entry(name));
    }
    let mut code = line.trim_start();
    while let Some(rest) = [".visible", ".weak", ".extern"]
        .iter()
        .find_map(|d| directive(code, d))
    {
        code = rest;
    }
    let mut rest = directive(code, ".func")?;
    // The return parameter, `(.param .b32 func_retval0)`, comes before the name.
    if rest.starts_with('(') {
        rest = rest.split_once(')').map_or("", |(_, r)| r).trim_start();
    }
    let name = first_word(rest).filter(|n| identifiers(n).eq([*n]));
    Some(Header::Func(name))
}

/// `code` after the directive `d` and the blanks after it, if `code` starts with `d` as a word.
fn directive<'a>(code: &'a str, d: &str) -> Option<&'a str> {
    let rest = code.strip_prefix(d)?;
    (rest.is_empty() || rest.starts_with(|c: char| c.is_whitespace() || c == '('))
        .then(|| rest.trim_start())
}

/// The name a `.entry NAME(` declaration line declares.
fn entry_name(line: &str) -> Option<&str> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return None;
    }
    first_word(code.split_once(".entry ")?.1.trim_start())
}

/// The name a declaration's `rest` starts with: its text up to `(` or a blank, if any.
fn first_word(rest: &str) -> Option<&str> {
    rest.split(|c: char| c == '(' || c.is_whitespace())
        .next()
        .filter(|n| !n.is_empty())
}

/// The identifier-like tokens of `text`, in order: runs of letters, digits, `_` and `$`.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two entries, each calling a function of its own: `a` calls `f`, which calls `g`; `b`
    /// calls `h` and takes the address of `k`; `unused` is declared and defined and called by
    /// none; a global points at `pointed`; NVSHMEM's wrapper is an `.extern` declaration, `w` a
    /// weak one without a definition; `a` is declared before it is defined, as LLVM does for an
    /// entry that something names.
    const PTX: &str = "\
.version 8.7
.target sm_90
.address_size 64

.extern .func mgws_nvshmem_add
(
\t.param .b64 mgws_nvshmem_add_param_0
)
;
.weak .func w()
;
.func  (.param .b32 func_retval0) f
(
\t.param .b64 f_param_0
)
;
.func g(
\t.param .b64 g_param_0
)
.noreturn;
.func h
(
\t.param .b64 h_param_0
)
;
.func unused
(
\t.param .b64 unused_param_0
)
;
.func pointed()
;
.visible .entry mgws_a(
\t.param .u64 a
)
;
.global .align 8 .u64 mgws_fib_fingerprint = 1;
.global .align 8 .u64 table[1] = {pointed};
\t// .globl\tmgws_a
.visible .entry mgws_a(
\t.param .u64 a
)
.maxntid 32
{
\t{ // inner scope
\tcall.uni (retval0), f, (param0);
\tcall.uni w, ();
\t}
}
\t// .globl\tmgws_b
.visible .entry mgws_b(
\t.param .u64 b
)
{
\tmov.u64 %rd1, k;
\tcall.uni h, (param0);
\tret;
}
.func  (.param .b32 func_retval0) f(
\t.param .b64 f_param_0
)
{
\tcall.uni g, (param0);
\tret;
}
.func g(
\t.param .b64 g_param_0
)
.noreturn
{
\ttrap;
}
.func h(
\t.param .b64 h_param_0
)
{
\tcall.uni mgws_nvshmem_add, (param0);
\tret;
}
\t// .globl\tunused
.visible .func unused(
\t.param .b64 unused_param_0
)
{ // never called
\tret;
}
.func k()
{
\tret;
}
.func pointed()
{
\tret;
}
";

    /// How many times `text` declares or defines the function `name` (read with `header_of`,
    /// whose own test checks the names it reads).
    fn funcs_named(text: &str, name: &str) -> usize {
        text.lines()
            .filter(|l| matches!(header_of(l), Some(Header::Func(Some(n))) if n == name))
            .count()
    }

    #[test]
    fn pruning_keeps_one_entry_and_the_functions_it_reaches() {
        let a = prune_to_entry(PTX, "mgws_a").unwrap();
        assert!(a.starts_with(".version 8.7\n.target sm_90\n"), "{a}");
        assert!(a.contains("// inner scope"), "{a}");
        // The entry's declaration and definition, no other entry.
        assert_eq!(a.matches(".entry mgws_a(").count(), 2, "{a}");
        assert!(
            !a.contains(".entry mgws_b") && !a.contains(".param .u64 b"),
            "{a}"
        );
        // f and g (through f, `.noreturn` both), each declared and defined; not h, k, unused.
        for (name, count) in [("f", 2), ("g", 2), ("h", 0), ("k", 0), ("unused", 0)] {
            assert_eq!(funcs_named(&a, name), count, "{name}:\n{a}");
        }
        // What the globals name, the globals, and the declarations of functions not defined.
        assert_eq!(funcs_named(&a, "pointed"), 2, "{a}");
        assert!(a.contains("table[1] = {pointed};") && a.contains("mgws_fib_fingerprint"));
        assert_eq!(funcs_named(&a, "mgws_nvshmem_add"), 1, "{a}");
        assert_eq!(funcs_named(&a, "w"), 1, "{a}");
        assert!(!a.contains("never called"), "{a}");

        let b = prune_to_entry(PTX, "mgws_b").unwrap();
        assert!(
            b.contains(".entry mgws_b(") && !b.contains(".entry mgws_a"),
            "{b}"
        );
        let expected = [
            ("f", 0),
            ("g", 0),
            ("h", 2),
            ("k", 1),
            ("unused", 0),
            ("pointed", 2),
        ];
        for (name, count) in expected {
            assert_eq!(funcs_named(&b, name), count, "{name}:\n{b}");
        }
        assert!(b.ends_with(".func pointed()\n{\n\tret;\n}\n"), "{b}");
        assert_eq!(prune_to_entry(PTX, "mgws_c"), None);
    }

    #[test]
    fn a_function_whose_name_is_not_read_is_kept_with_what_it_calls() {
        let ptx = "\
.func .attribute(.unified) odd(
\t.param .b64 p
)
{
\tcall.uni g, (p);
\tret;
}
.func g()
{
\tret;
}
.func unused()
{
\tret;
}
.visible .entry mgws_a()
{
\tret;
}
";
        let a = prune_to_entry(ptx, "mgws_a").unwrap();
        assert!(
            a.contains("unified) odd(") && a.contains(".func g()"),
            "{a}"
        );
        assert!(!a.contains("unused"), "{a}");
    }

    /// The parts' texts one after the other.
    fn joined(parts: &[Part<'_>]) -> String {
        parts
            .iter()
            .map(|p| match p {
                Part::Lines(text) | Part::Entry { text, .. } | Part::Func { text, .. } => *text,
            })
            .collect()
    }

    #[test]
    fn every_line_of_the_module_is_in_one_part_in_order() {
        let parts = parts_of(PTX);
        assert_eq!(joined(&parts), PTX);
        let kinds: Vec<(&str, FuncKind)> = parts
            .iter()
            .filter_map(|p| match p {
                Part::Func {
                    name: Some(n),
                    kind,
                    ..
                } => Some((*n, *kind)),
                _ => None,
            })
            .collect();
        assert_eq!(kinds.len(), 13, "{kinds:?}");
        assert!(kinds.contains(&("g", FuncKind::Declaration)), "{kinds:?}");
        assert!(kinds.contains(&("g", FuncKind::Definition)), "{kinds:?}");
        // A module cut inside a function keeps the cut part as plain lines.
        let cut = &PTX[..PTX.find("\tcall.uni g").unwrap()];
        let parts = parts_of(cut);
        assert_eq!(joined(&parts), cut);
        assert!(matches!(parts.last(), Some(Part::Lines(t)) if t.starts_with(".func")));
    }

    #[test]
    fn function_headers_name_their_function_after_the_return_parameter() {
        for (line, name) in [
            (".func  (.param .b32 func_retval0) f(\n", Some("f")),
            (".func g\n", Some("g")),
            (".visible .func h(", Some("h")),
            (".weak .func $w(", Some("$w")),
            (
                ".extern .func  (.param .b64 func_retval0) mgws_get\n",
                Some("mgws_get"),
            ),
            (".func .attribute(.unified) f(", None),
        ] {
            match header_of(line) {
                Some(Header::Func(n)) => assert_eq!(n, name, "{line}"),
                _ => panic!("{line:?} is not read as a function header"),
            }
        }
        for line in [
            "\t// .func f(",
            ".funcs",
            ".weakly .func f(",
            "\tcall.uni f, (p);",
        ] {
            assert!(header_of(line).is_none(), "{line:?}");
        }
    }
}
