"""Text of the example pipelines: `dra-gitops` command lines of a shell script, shell variable expansion,
and the `${{ }}` expression subset the examples use. Pure: no files, no processes.

`dra_commands` extracts the `dra-gitops ...` command lines of a script (continuations joined, cut at the
first redirection, pipe, `||`, `;` or comment) so that the test can check each one ran.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

WILDCARD = "\x00"

# --------------------------------------------------------------------------------------------------------
# extraction


def dra_commands(script: str) -> list[str]:
    """The `dra-gitops ...` commands of a shell script, one string each, without redirections or tails."""
    joined = re.sub(r"\\\n\s*", " ", script)
    found = []
    for line in joined.splitlines():
        text = line.strip()
        if not text.startswith("dra-gitops "):
            continue
        lexer = shlex.shlex(text, posix=False, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = []
        for token in lexer:
            if token and set(token) <= set(";&|<>"):
                break
            words.append(token)
        found.append(" ".join(words))
    return found


_VAR = re.compile(r"\$\{(\w+):([+-])([^}]*)\}|\$\{(\w+)\}|\$(\w+)")


def expand(command: str, env: Mapping[str, str]) -> list[str]:
    """Shell words of `command` with `$VAR`, `${VAR}`, `${VAR:+w}`, `${VAR:-w}` expanded from `env`;
    a variable that is not in `env` (set by the script itself) becomes a wildcard."""

    def one(m: re.Match[str]) -> str:
        if m.group(1):
            name, op, word = m.group(1), m.group(2), m.group(3)
            if name not in env:
                return WILDCARD
            value = env[name]
            if op == "+":
                return _VAR.sub(one, word) if value else ""
            return value or _VAR.sub(one, word)
        name = m.group(4) or m.group(5)
        return env.get(name, WILDCARD)

    return shlex.split(_VAR.sub(one, command))


def matches(template: list[str], argv: list[str]) -> bool:
    return len(template) == len(argv) and all(
        t == a or (WILDCARD in t and re.fullmatch(re.escape(t).replace(WILDCARD, ".*"), a) is not None)
        for t, a in zip(template, argv, strict=True)
    )


# --------------------------------------------------------------------------------------------------------
# expressions: the `${{ }}` subset the examples use (contexts, 'strings', ==, !=, !, &&, ||, status calls)

_TOKEN = re.compile(
    r"\s*(?:(&&|\|\||==|!=|!|\(|\))|'((?:[^']|'')*)'|([A-Za-z_][\w.-]*\(\))|([A-Za-z_][\w.-]*))"
)


def evaluate(expr: str, lookup: Mapping[str, Any], status: Mapping[str, bool]) -> Any:
    tokens: list[tuple[str, str]] = []
    pos = 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"cannot parse expression {expr!r} at {pos}")
        op, string, call, name = m.groups()
        tokens.append(
            ("op", op)
            if op
            else ("str", string.replace("''", "'"))
            if string is not None
            else ("call", call[:-2])
            if call
            else ("name", name)
        )
        pos = m.end()
    index = 0

    def peek() -> tuple[str, str] | None:
        return tokens[index] if index < len(tokens) else None

    def take() -> tuple[str, str]:
        nonlocal index
        index += 1
        return tokens[index - 1]

    def primary() -> Any:
        kind, value = take()
        if (kind, value) == ("op", "!"):
            return not truthy(primary())
        if (kind, value) == ("op", "("):
            inner = disjunction()
            take()
            return inner
        if kind == "str":
            return value
        if kind == "call":
            return status[value]
        if value in ("true", "false"):
            return value == "true"
        if value not in lookup:
            raise KeyError(f"no test value for {value!r} (in {expr!r})")
        return lookup[value]

    def comparison() -> Any:
        left = primary()
        while peek() in (("op", "=="), ("op", "!=")):
            _, op = take()
            right = primary()
            left = (str(left).lower() == str(right).lower()) == (op == "==")
        return left

    def conjunction() -> Any:
        left = comparison()
        while peek() == ("op", "&&"):
            take()
            right = comparison()
            left = right if truthy(left) else left
        return left

    def disjunction() -> Any:
        left = conjunction()
        while peek() == ("op", "||"):
            take()
            right = conjunction()
            left = left if truthy(left) else right
        return left

    result = disjunction()
    if index != len(tokens):
        raise ValueError(f"trailing tokens in {expr!r}")
    return result


def truthy(value: Any) -> bool:
    return value not in (False, None, "", 0)


def as_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def substitute(text: str, lookup: Mapping[str, Any]) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: as_text(evaluate(m.group(1), lookup, {})), text)
