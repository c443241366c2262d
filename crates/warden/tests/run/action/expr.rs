//! The few GitHub Actions expressions the action uses, evaluated as the
//! runner evaluates them; anything else is an error (see `runner.rs`).

use std::collections::BTreeMap;

/// What expressions can see.
#[derive(Debug, Clone)]
pub struct Context {
    pub inputs: BTreeMap<String, String>,
    pub steps: BTreeMap<String, BTreeMap<String, String>>,
    pub action_path: String,
    pub runner_temp: String,
    /// The `github` context, by path (`actor`,
    /// `event.pull_request.head.repo.full_name`); a path of [`GITHUB_PATHS`]
    /// that is not here is empty, as a missing property is to the runner.
    pub github: BTreeMap<String, String>,
}

/// The paths of the `github` context this runner knows (besides
/// `github.action_path`); any other is an error.
pub const GITHUB_PATHS: &[&str] = &[
    "action_ref",
    "action_repository",
    "actor",
    "api_url",
    "event_name",
    "repository",
    "repository_owner",
    "token",
    "event.pull_request.head.repo.full_name",
    "event.workflow_run.head_repository.full_name",
];

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
}

impl Value {
    fn truthy(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            Value::Str(s) => !s.is_empty(),
        }
    }

    fn into_text(self) -> String {
        match self {
            Value::Bool(b) => b.to_string(),
            Value::Str(s) => s,
        }
    }
}

/// Substitutes every `${{ expression }}` in `s`.
pub fn template(s: &str, ctx: &Context) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("unclosed `${{{{` in {s:?}"))?;
        out.push_str(&eval(&after[..end], ctx)?.0.into_text());
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// An `if:`: whether it holds, and whether it calls `always()`.
pub fn condition(c: &str, ctx: &Context) -> Result<(bool, bool), String> {
    let c = c.trim();
    let c = match c.strip_prefix("${{").and_then(|c| c.strip_suffix("}}")) {
        Some(inner) => inner,
        None if c.contains("${{") => return Err(format!("`if: {c}` mixes text and ${{{{ }}}}")),
        None => c,
    };
    let (v, always) = eval(c, ctx)?;
    Ok((v.truthy(), always))
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Str(String),
    Path(String),
    Call(String),
    Op(&'static str),
    Open,
    Close,
}

fn tokens(expr: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == '\'' {
            let mut s = String::new();
            i += 1;
            loop {
                match b.get(i) {
                    None => return Err(format!("unclosed string in `{expr}`")),
                    Some(b'\'') if b.get(i + 1) == Some(&b'\'') => {
                        s.push('\'');
                        i += 2;
                    }
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(_) => {
                        let ch = expr[i..].chars().next().unwrap();
                        s.push(ch);
                        i += ch.len_utf8();
                    }
                }
            }
            out.push(Token::Str(s));
        } else if let Some(op) = ["==", "!=", "&&", "||"]
            .into_iter()
            .find(|op| expr[i..].starts_with(op))
        {
            out.push(Token::Op(op));
            i += 2;
        } else if c == '(' {
            out.push(Token::Open);
            i += 1;
        } else if c == ')' {
            out.push(Token::Close);
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b"_-.".contains(&b[i])) {
                i += 1;
            }
            let word = expr[start..i].to_string();
            if expr[i..].starts_with("()") {
                out.push(Token::Call(word));
                i += 2;
            } else {
                out.push(Token::Path(word));
            }
        } else {
            return Err(format!(
                "`{c}` in `{expr}` is not understood by this runner"
            ));
        }
    }
    Ok(out)
}

/// Evaluates an expression; also says whether it called `always()`.
fn eval(expr: &str, ctx: &Context) -> Result<(Value, bool), String> {
    let toks = tokens(expr)?;
    let mut p = Parser {
        toks: &toks,
        at: 0,
        ctx,
        always: false,
        expr,
    };
    let v = p.or()?;
    if p.at != toks.len() {
        return Err(format!("unexpected {:?} in `{expr}`", toks[p.at]));
    }
    Ok((v, p.always))
}

struct Parser<'a> {
    toks: &'a [Token],
    at: usize,
    ctx: &'a Context,
    always: bool,
    expr: &'a str,
}

impl Parser<'_> {
    fn peek_op(&self, op: &str) -> bool {
        matches!(self.toks.get(self.at), Some(Token::Op(o)) if *o == op)
    }

    fn or(&mut self) -> Result<Value, String> {
        let mut v = self.and()?;
        while self.peek_op("||") {
            self.at += 1;
            let r = self.and()?;
            v = if v.truthy() { v } else { r };
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<Value, String> {
        let mut v = self.cmp()?;
        while self.peek_op("&&") {
            self.at += 1;
            let r = self.cmp()?;
            v = if v.truthy() { r } else { v };
        }
        Ok(v)
    }

    fn cmp(&mut self) -> Result<Value, String> {
        let l = self.primary()?;
        for op in ["==", "!="] {
            if self.peek_op(op) {
                self.at += 1;
                let r = self.primary()?;
                let eq = match (&l, &r) {
                    // The runner compares strings ignoring case.
                    (Value::Str(a), Value::Str(b)) => a.eq_ignore_ascii_case(b),
                    (Value::Bool(a), Value::Bool(b)) => a == b,
                    _ => {
                        return Err(format!(
                            "`{}` compares a boolean with a string (the runner would convert both to numbers)",
                            self.expr
                        ));
                    }
                };
                return Ok(Value::Bool(if op == "==" { eq } else { !eq }));
            }
        }
        Ok(l)
    }

    fn primary(&mut self) -> Result<Value, String> {
        let t = self
            .toks
            .get(self.at)
            .ok_or_else(|| format!("`{}` ends too soon", self.expr))?;
        self.at += 1;
        match t {
            Token::Str(s) => Ok(Value::Str(s.clone())),
            Token::Open => {
                let v = self.or()?;
                match self.toks.get(self.at) {
                    Some(Token::Close) => {
                        self.at += 1;
                        Ok(v)
                    }
                    _ => Err(format!("unbalanced `(` in `{}`", self.expr)),
                }
            }
            Token::Call(f) if f == "always" => {
                self.always = true;
                Ok(Value::Bool(true))
            }
            Token::Call(f) => Err(format!(
                "`{f}()` is not understood by this runner (only always())"
            )),
            Token::Path(p) => self.lookup(p).map(Value::Str),
            t => Err(format!("unexpected {t:?} in `{}`", self.expr)),
        }
    }

    fn lookup(&self, path: &str) -> Result<String, String> {
        let parts: Vec<&str> = path.split('.').collect();
        match parts.as_slice() {
            ["inputs", name] => self
                .ctx
                .inputs
                .get(*name)
                .cloned()
                .ok_or_else(|| format!("`{path}`: no input `{name}` in action.yml")),
            ["steps", id, "outputs", name] => self
                .ctx
                .steps
                .get(*id)
                .map(|o| o.get(*name).cloned().unwrap_or_default())
                .ok_or_else(|| format!("`{path}`: no step with id `{id}` before this point")),
            ["github", "action_path"] => Ok(self.ctx.action_path.clone()),
            ["github", rest @ ..] if GITHUB_PATHS.contains(&rest.join(".").as_str()) => Ok(self
                .ctx
                .github
                .get(&rest.join("."))
                .cloned()
                .unwrap_or_default()),
            ["runner", "temp"] => Ok(self.ctx.runner_temp.clone()),
            _ => Err(format!("`{path}` is not understood by this runner")),
        }
    }
}

#[test]
fn the_expression_subset_is_evaluated_as_the_runner_does_and_the_rest_refused() {
    let mut steps = BTreeMap::new();
    steps.insert(
        "run".to_string(),
        BTreeMap::from([("upload".to_string(), "true".to_string())]),
    );
    let ctx = Context {
        inputs: BTreeMap::from([
            ("cache".to_string(), "TRUE".to_string()),
            ("agent".to_string(), "exec".to_string()),
        ]),
        steps,
        action_path: "/a".into(),
        runner_temp: "/t".into(),
        github: BTreeMap::from([("actor".to_string(), "octocat".to_string())]),
    };
    assert_eq!(
        condition(
            "inputs.cache == 'true' && steps.run.outputs.upload != ''",
            &ctx
        ),
        Ok((true, false))
    );
    assert_eq!(
        condition(
            "${{ always() && steps.run.outputs.upload == 'false' }}",
            &ctx
        ),
        Ok((false, true))
    );
    assert_eq!(
        condition(
            "(inputs.agent == 'claude') || steps.run.outputs.nothing",
            &ctx
        ),
        Ok((false, false))
    );
    assert_eq!(
        template(
            "${{ runner.temp }}/w-${{ inputs.agent }} ${{ 'it''s' }}",
            &ctx
        )
        .unwrap(),
        "/t/w-exec it's"
    );
    // A known path of the github context: its value, or empty when the
    // event has none (no pull request).
    assert_eq!(
        template(
            "${{ github.actor }}:${{ github.event.pull_request.head.repo.full_name }}",
            &ctx
        ),
        Ok("octocat:".to_string())
    );
    for bad in [
        "${{ github.job }}",
        "${{ github.event.issue.title }}",
        "${{ inputs.nope }}",
        "${{ steps.later.outputs.x }}",
        "${{ failure() }}",
        "${{ format('{0}', inputs.agent) }}",
        "${{ !inputs.agent }}",
        "${{ inputs.agent == true }}",
        "${{ inputs.agent",
    ] {
        assert!(template(bad, &ctx).is_err(), "{bad} was accepted");
    }
}
