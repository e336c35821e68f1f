//! The commands the README's reference and `docs/` show take the flags they show: every
//! command line of their shell blocks that runs `eddy-bench` or the `eddy` CLI is parsed by
//! that binary (with `--help` after it, so that nothing runs: clap refuses an unknown flag
//! or a bad value before it gets to the help). The tutorial's blocks run for real in the
//! `eddy` crate's tests; the Rust blocks compile as its doctests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `eddy` CLI, built beside `eddy-bench`.
fn eddy_cli() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_eddy-bench")).with_file_name("eddy")
}

/// Every shell block's command lines (continuation lines joined, comments dropped) of the
/// README after its tutorial, and of every file in `docs/`.
fn documented_commands() -> Vec<(String, String)> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs")).unwrap().flatten().map(|e| e.path()).collect();
    docs.sort();
    files.extend(docs.into_iter().filter(|p| p.extension().is_some_and(|e| e == "md")));
    let mut commands = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let text = match text.find("## API overview") {
            Some(reference) if file.ends_with("README.md") => text[reference..].to_string(),
            _ => text,
        };
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let mut rest = text.as_str();
        while let Some(open) = rest.find("```") {
            let (tag, body) = rest[open + 3..].split_once('\n').unwrap();
            let end = body.find("\n```").unwrap();
            if tag == "sh" {
                let joined = body[..end].replace("\\\n", " ");
                for line in joined.lines() {
                    // The command itself: before a comment, a pipe, a redirection or another command.
                    let line = [" #", " | ", " > ", " 2>", " && ", "; "]
                        .iter()
                        .fold(line, |line, cut| line.split(cut).next().unwrap())
                        .trim()
                        .trim_end_matches('&')
                        .trim();
                    if !line.is_empty() && !line.starts_with('#') {
                        commands.push((name.clone(), line.to_string()));
                    }
                }
            }
            rest = &body[end + 4..];
        }
    }
    commands
}

/// A command line's words, as a shell splits them (quotes, no expansions).
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (_, c) => (word, any) = (word + &c.to_string(), true),
        }
    }
    if any {
        words.push(word);
    }
    words
}

#[test]
fn every_eddy_command_of_the_reference_and_the_docs_takes_the_flags_it_shows() {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_eddy-bench"));
    let mut checked = 0;
    for (file, line) in documented_commands() {
        let words = words(&line);
        let (binary, args) = match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["$B", args @ ..] => (bench.clone(), args.to_vec()),
            ["cargo", "run", "--release", "-p", "eddy-bench", "--", args @ ..] => (bench.clone(), args.to_vec()),
            ["cargo", "run", "--release", "-p", "eddy", "--", args @ ..] => (eddy_cli(), args.to_vec()),
            _ => continue,
        };
        if args
            .iter()
            .any(|a| a.contains('$') || a.contains('<') || a.starts_with('[') || a.contains('…') || *a == "...")
        {
            continue; // a shell variable or a placeholder: not for the binary as written
        }
        let out = Command::new(&binary).args(&args).arg("--help").output().unwrap();
        assert!(
            out.status.success(),
            "{file}: `{line}` is refused: {}",
            String::from_utf8_lossy(&out.stderr).lines().take(3).collect::<Vec<_>>().join(" ")
        );
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} commands found: the blocks moved?");
    println!("{checked} documented commands parse");
}

#[test]
fn words_split_as_a_shell_splits_them() {
    assert_eq!(words(r#"a 'b c' "d e" f"#), ["a", "b c", "d e", "f"]);
    assert_eq!(words("--ha etcd://h:1  --x ''"), ["--ha", "etcd://h:1", "--x", ""]);
}
