//! Model-name globs: `*` matches any run of characters, `?` exactly one; ASCII
//! case-insensitive (`*a100*` matches `NVIDIA A100-SXM4-80GB`).

/// Whether `name` matches `pattern`. Iterative with one backtrack point: O(|pattern|·|name|)
/// worst case, no allocation.
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi].eq_ignore_ascii_case(&n[ni])) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn star_question_and_case() {
        assert!(matches("*A100*", "NVIDIA A100-SXM4-80GB"));
        assert!(matches("*a100*", "NVIDIA A100-SXM4-80GB"));
        assert!(matches("NVIDIA H100*", "NVIDIA H100 80GB HBM3"));
        assert!(matches("gfx90?", "gfx90a"));
        assert!(matches("*", ""));
        assert!(!matches("*A100*", "NVIDIA H100 80GB HBM3"));
        assert!(!matches("A100", "NVIDIA A100"));
        assert!(!matches("?", ""));
        assert!(matches("*SXM*80*", "NVIDIA A100-SXM4-80GB"));
        assert!(!matches("*SXM*40*", "NVIDIA A100-SXM4-80GB"));
    }
}
