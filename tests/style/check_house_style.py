#!/usr/bin/env python3
"""House rules that clang-format cannot see, over every C, C++ and CUDA source git tracks
(DEVELOPERS.md, "Rules"). Each is what the code base does everywhere:

  static-prefix  A static function of a source file has no `pk_` prefix: the prefix marks
                 the C API (a header's `static inline` functions are API, and keep it).
  sizeof-parens  `sizeof` takes parentheses only around a type: `sizeof x`, `sizeof *p`,
                 `sizeof s->buf`, but `sizeof(double)`, `sizeof(pk_ctx)`.
  one-line-braces The body of an `if`, `for` or `while` that is one statement on one line
                 (no comment, no nested control statement) has no braces, unless another
                 branch of its if/else chain has more.

Usage: check_house_style.py [FILE...] (default: every tracked source under PK_SOURCE_DIR or
the current directory). Prints one line per finding, `path:line: rule: text`; exits 1 when
there is any."""
import os
import re
import subprocess
import sys

EXTS = (".c", ".h", ".cu", ".cuh", ".cpp")
HEADER_EXTS = (".h", ".cuh")

# Type names that are not typedefs of this tree: C/C++ scalars and the toolkits' types.
BUILTIN_TYPES = {
    "char", "short", "int", "long", "float", "double", "void", "signed", "unsigned", "bool",
    "_Bool", "size_t", "uint4", "int4", "float2", "float4", "double2", "half", "ncclDevComm",
    "ncclComm", "ncclUniqueId", "msgpack_object", "msgpack_sbuffer", "json_t", "sigset_t",
    "pthread_t", "pthread_mutex_t",
}
TYPE_KEYWORDS = ("struct ", "union ", "enum ", "const ", "volatile ")


def tracked_sources(root):
    out = subprocess.run(["git", "-C", root, "ls-files", *("*" + e for e in EXTS)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"git ls-files failed in {root}: {out.stderr.strip()}")
    return [os.path.join(root, f) for f in out.stdout.split()]


def strip_comments_and_strings(text):
    """The text with comments, string and char literals blanked (newlines kept), so that the
    rules never match inside them."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def typedef_names(texts):
    """Type names the tree defines (typedef ... NAME; and } NAME;), to tell sizeof(type) from
    sizeof(variable)."""
    names = set()
    for t in texts:
        names.update(re.findall(r"typedef\b[^;{]*?\b(\w+)\s*;", t))
        names.update(re.findall(r"typedef\b[^;{]*\(\s*\*\s*(\w+)\s*\)", t))
        names.update(re.findall(r"\}\s*(\w+)\s*;", t))
        names.update(re.findall(r"\b(?:struct|class)\s+(\w+)\s*\{", t))
        names.update(re.findall(r"\busing\s+(\w+)\s*=", t))
    return names


def is_type_name(word, types):
    return (word in types or word in BUILTIN_TYPES or word.endswith("_t") or
            word[0].isupper() or word.startswith("__"))


def is_type(operand, types):
    op = operand.strip()
    if op.startswith(TYPE_KEYWORDS) or op.endswith("*"):
        return True
    words = op.split()  # "unsigned long long", "pk_ctx"
    return bool(words) and all(re.fullmatch(r"[A-Za-z_]\w*", w) and is_type_name(w, types)
                               for w in words)


def check_static_prefix(path, lines, report):
    if path.endswith(HEADER_EXTS):
        return
    for i, line in enumerate(lines):
        m = re.match(r"\s*static\b(?!.*\binline\b)[^=;(]*?\b(pk_\w+)\s*\(", line)
        if m and not line.rstrip().endswith(";"):
            report(i, "static-prefix", f"static function {m.group(1)} has the API's pk_ prefix")


def matching_paren(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def check_sizeof(path, lines, types, report):
    for i, line in enumerate(lines):
        for m in re.finditer(r"\bsizeof\s*\(", line):
            close = matching_paren(line, m.end() - 1)
            if close < 0:
                continue
            operand = line[m.end():close]
            after = line[close + 1:].lstrip()
            # sizeof(x)->f, sizeof(x)[i], sizeof(x).f: the parentheses belong to the operand.
            if after.startswith(("->", "[", ".")) or is_type(operand, types):
                continue
            report(i, "sizeof-parens", f"sizeof({operand}): write sizeof {operand}")


CONTROL = re.compile(r"(?:\}\s*else\s+)?(?:if|for|while)\b.*\{$|\}\s*else\s*\{$|else\s*\{$")


def block_end(lines, i):
    """The line that closes the block opened at the end of line i (same indentation)."""
    indent = len(lines[i]) - len(lines[i].lstrip())
    for j in range(i + 1, len(lines)):
        s = lines[j]
        if s.strip().startswith("}") and len(s) - len(s.lstrip()) == indent:
            return j
    return -1


def simple_statement(body_lines, raw_lines):
    """True when the body is one statement on one line that needs no braces: no comment, no
    nested control statement or block, one `;` at its end."""
    if len([s for s in raw_lines if s.strip()]) != 1:
        return False
    code = " ".join(s.strip() for s in body_lines).strip()
    raw = " ".join(s.strip() for s in raw_lines)
    if not code or "//" in raw or "/*" in raw:
        return False
    if re.match(r"(if|for|while|do|switch|else)\b", code) or "{" in code or "}" in code:
        return False
    return code.endswith(";") and code.count(";") == 1


def check_braces(path, lines, raw, report):
    i = 0
    n = len(lines)
    while i < n:
        s = lines[i].strip()
        starts_chain = re.match(r"(if|for|while)\b.*\{$", s) and not s.startswith("}")
        if not starts_chain:
            i += 1
            continue
        # Walk the chain: if {...} else if {...} else {...}
        branches, j, head = [], i, i
        while True:
            end = block_end(lines, j)
            if end < 0:
                break
            branches.append(simple_statement(lines[j + 1:end], raw[j + 1:end]))
            closing = lines[end].strip()
            if s.startswith("if") and re.match(r"\}\s*else\b.*\{$", closing):
                j = end
                continue
            if closing != "}":  # else without braces, do-while, ...: not ours to judge
                branches.append(False)
            break
        if branches and all(branches):
            report(head, "one-line-braces",
                   "braces around a one-statement body (and no branch of its chain needs them)")
        i += 1


def check_file(path, types):
    with open(path, errors="replace") as f:
        raw_text = f.read()
    text = strip_comments_and_strings(raw_text)
    lines, raw = text.split("\n"), raw_text.split("\n")
    findings = []

    def report(i, rule, what):
        findings.append(f"{path}:{i + 1}: {rule}: {what}: {raw[i].strip()}")

    check_static_prefix(path, lines, report)
    check_sizeof(path, lines, types, report)
    check_braces(path, lines, raw, report)
    return findings


def main(argv):
    root = os.environ.get("PK_SOURCE_DIR", os.getcwd())
    files = argv[1:] or tracked_sources(root)
    if not files:
        print("no sources found")
        return 1
    texts = {}
    for p in (tracked_sources(root) if argv[1:] else files):
        with open(p, errors="replace") as f:
            texts[p] = strip_comments_and_strings(f.read())
    types = typedef_names(texts.values())
    findings = []
    for p in files:
        findings += check_file(p, types)
    for line in findings:
        print(line)
    print(f"house style: {len(files)} files, {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
