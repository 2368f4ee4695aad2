"""The SQL dialect every parse and every generated statement goes through:
sqlglot's MySQL dialect with the fixes MySQL 8 / MariaDB syntax needs.

``DIALECT`` (an instance of ``ShardgateMySQL``; ``rewriter.context.DIALECT`` is this
object) is what ``parse_one(read=...)`` and ``.sql(dialect=...)`` take in ``rewriter/``
and ``proxy/``.

sqlglot's parser and generator are mypyc-compiled (``sqlglot[c]``) and cannot be
subclassed from Python, so the fixes sit around them, in the (interpreted) dialect:

- **before parsing, on the token list** (``_prepare``): the nesting guard (see below);
  MySQL's ``/*! ... */`` executable comments become code, as MySQL runs them; select
  modifiers in any order (``SELECT HIGH_PRIORITY DISTINCT``; ``SQL_CACHE``, a query
  cache hint only, is dropped); ``INSERT``/``UPDATE``/``DELETE`` scheduling modifiers
  (``LOW_PRIORITY``, ``HIGH_PRIORITY``, ``QUICK``: no effect on results) are dropped,
  while ``UPDATE IGNORE``, ``DELETE IGNORE`` and ``INSERT DELAYED``, which change what
  a statement does and which no plan node can carry, are refused (1235);
  ``DELETE t.* FROM``; ``JSON_OBJECT(k, v, ...)`` arguments of any form (bind
  variables, comparisons); ``DEFAULT(c)``; ``0x41`` told apart from ``x'41'``; redundant
  nested parentheses ``((x))`` collapse.
- **after parsing, on the tree** (``_fix_tree``): ``INTERVAL 1 DAY + '2020-01-01'`` and
  the ``INTERVAL(N, N1, ...)`` function (sqlglot reads both as interval sums);
  ``SET c = DEFAULT`` (UPDATE, ON DUPLICATE KEY UPDATE); long ``AND``/``OR``/``XOR``
  chains are re-associated into balanced trees (same meaning, depth log n: 5,000 ``OR``
  terms plan without deep recursion); ``SELECT INTO`` is refused (sqlglot would turn it
  into ``CREATE TABLE``).
- **when generating** (handlers in the generator's dispatch table): ``LOCK IN SHARE
  MODE`` (MariaDB has no ``FOR SHARE``), ``a REGEXP b`` (MariaDB has no
  ``REGEXP_LIKE``), ``->>`` as ``JSON_UNQUOTE(JSON_EXTRACT())``, ``UTC_DATE()``, ``FROM
  DUAL`` unquoted, ``0x41`` as written (MariaDB reads it as a number in a numeric
  context, ``x'41'`` as a string).
- **when sqlglot cannot parse** a statement MySQL accepts, the constructs we know are
  named in a 1235 refusal instead of a 1064 (``_refuse_known``): ``PROCEDURE``,
  ``SELECT INTO``, ``GROUP BY ... ASC/DESC``, ``LIMIT ROWS EXAMINED``, ``VALUES``
  statements.

Deep statements. sqlglot's parser, generator and the planner's tree walks recurse
about twice per nesting level (parentheses, function calls, ``CASE``, unary
operators), and the compiled parser overflows the C stack (the process dies) when
the recursion limit is raised far enough. So the token list is measured before
parsing: a select nested more than 63 levels is refused as MySQL does (1473, "Too high
level of nesting for select"); other nesting deeper than ``MAX_NESTING`` is refused
with MySQL's 1436 "Thread stack overrun" (MariaDB itself refuses expression nesting
of 1,000 levels that way), and beyond ``PARSER_STACK_LIMIT`` with MySQL's parser
error (1064 "memory exhausted near ..."). Runs of redundant parentheses are collapsed
first, so ``((((x))))`` of any depth MySQL accepts is planned.
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.tokens import Token, TokenType

from rewriter import errors
from sqltext.lexer import masked_code

# -- limits ------------------------------------------------------------------------------

MAX_SELECT_NESTING = 63  # MySQL's and MariaDB's MAX_SELECT_NESTING
MAX_NESTING = 250  # deepest nesting planned: every planner path was measured to handle 400+
# levels with 150 frames already on the stack at the default recursion limit (1000)
PARSER_STACK_LIMIT = 31_990  # beyond this MariaDB's own parser answers "memory exhausted"
_BYTES_PER_LEVEL = 1024  # nominal stack per nesting level, for the 1436 message
_LONG_CHAIN = 32  # AND/OR/XOR chains longer than this are re-associated
EMULATED_VERSION = 80031  # /*!NNNNN ... */ runs when NNNNN <= this (proxy.session.SERVER_VERSION)

# -- token classes -----------------------------------------------------------------------

_UNARY = frozenset({TokenType.NOT, TokenType.DASH, TokenType.PLUS, TokenType.TILDE, TokenType.BINARY})
_CONNECTORS = frozenset({TokenType.AND, TokenType.OR, TokenType.XOR})
_SELECT_MODIFIERS = frozenset({
    "HIGH_PRIORITY", "STRAIGHT_JOIN", "SQL_SMALL_RESULT", "SQL_BIG_RESULT", "SQL_BUFFER_RESULT",
    "SQL_NO_CACHE", "SQL_CACHE", "SQL_CALC_FOUND_ROWS",
})
_SELECT_QUANTIFIERS = frozenset({"ALL", "DISTINCT", "DISTINCTROW"})
# after a modifier word, these make it a column name instead (``SELECT sql_cache FROM t``)
_NOT_AFTER_MODIFIER = frozenset({TokenType.COMMA, TokenType.FROM, TokenType.ALIAS, TokenType.DOT,
                                 TokenType.R_PAREN, TokenType.L_PAREN, TokenType.SEMICOLON})
_JSON_PAIR_FUNCTIONS = frozenset({"JSON_OBJECT", "JSON_OBJECTAGG"})
# a parenthesis directly after one of these is a grouping parenthesis (not a call, an IN
# list, a VALUES row, ...): a redundant pair inside it can go
_GROUPING_CONTEXT = frozenset({
    TokenType.L_PAREN, TokenType.COMMA, TokenType.SELECT, TokenType.WHERE, TokenType.HAVING,
    TokenType.ON, TokenType.WHEN, TokenType.THEN, TokenType.ELSE, TokenType.AND, TokenType.OR,
    TokenType.XOR, TokenType.NOT, TokenType.EQ, TokenType.NEQ, TokenType.NULLSAFE_EQ, TokenType.LT,
    TokenType.LTE, TokenType.GT, TokenType.GTE, TokenType.PLUS, TokenType.DASH, TokenType.STAR,
    TokenType.SLASH, TokenType.MOD, TokenType.DIV, TokenType.RETURNING, TokenType.SET,
})

_VERSIONED = re.compile(r"/\*!(\d{5,6})?")


_VINDEX_HINT = re.compile(r"\b(?:use|ignore)\s+vindex\s*\([^)]*\)", re.I)


def without_vindex_hints(sql: str) -> str:
    """Vitess's ``t USE VINDEX (v)`` / ``t IGNORE VINDEX (v)`` table hints taken out of the
    text (blanked, offsets hold): they only steer which vindex routes the table, the
    planner already picks the best one it can use, and the shards (MySQL) would not
    parse them. Done on the text because a one-route plan sends the client's text."""
    if "vindex" not in sql.lower():  # the common case first: this runs for every plan
        return sql
    code = masked_code(sql)
    out = sql
    for m in _VINDEX_HINT.finditer(code):
        out = out[:m.start()] + " " * (m.end() - m.start()) + out[m.end():]
    return out


def _unsupported(what: str) -> errors.Unsupported:
    return errors.unsupported(what)


def _upper(tok: Token) -> str:
    return tok.text.upper() if tok.token_type in (TokenType.VAR, TokenType.DISTINCT, TokenType.ALL,
                                                  TokenType.STRAIGHT_JOIN) else ""


# -- before parsing ----------------------------------------------------------------------


def _inline_executable_comments(sql: str, tokens: list[Token]) -> str | None:
    """``/*!NNNNN code */`` -> ``code`` (blanked to the same length, offsets hold); None
    when there is none outside string literals."""
    spans = [(t.start, t.end) for t in tokens]
    out = list(sql)
    changed = False
    k = 0
    for m in _VERSIONED.finditer(sql):
        at = m.start()
        while k < len(spans) and spans[k][1] < at:
            k += 1
        if k < len(spans) and spans[k][0] <= at <= spans[k][1]:
            continue  # inside a token (a string literal)
        version = m.group(1)
        if version is not None and int(version) > EMULATED_VERSION:
            continue
        close = sql.find("*/", m.end())
        if close < 0:
            continue
        for i in range(at, m.end()):
            out[i] = " "
        out[close] = out[close + 1] = " "
        changed = True
    return "".join(out) if changed else None


def _match_parens(tokens: list[Token]) -> list[int]:
    match = [-1] * len(tokens)
    stack: list[int] = []
    for i, t in enumerate(tokens):
        if t.token_type is TokenType.L_PAREN:
            stack.append(i)
        elif t.token_type is TokenType.R_PAREN and stack:
            j = stack.pop()
            match[i] = j
            match[j] = i
    return match


def _collapse_parens(tokens: list[Token]) -> list[Token]:
    """Drop a parenthesis pair that only wraps another pair: ``((x))`` -> ``(x)``, when the
    outer pair groups (is not a call's, an IN list's, a VALUES row's)."""
    match = _match_parens(tokens)
    drop = [False] * len(tokens)
    prev = None  # last kept token's type
    for i, t in enumerate(tokens):
        if drop[i]:
            continue
        if (t.token_type is TokenType.L_PAREN and i + 1 < len(tokens)
                and tokens[i + 1].token_type is TokenType.L_PAREN
                and match[i] > 0 and match[i + 1] == match[i] - 1
                and (prev is None or prev in _GROUPING_CONTEXT)):
            drop[i] = drop[match[i]] = True
            continue
        prev = t.token_type
    return [t for i, t in enumerate(tokens) if not drop[i]]


def _near(sql: str, tok: Token) -> str:
    line = sql.count("\n", 0, tok.start) + 1
    return f"'{sql[tok.start:tok.start + 80]}' at line {line}"


def _measure(tokens: list[Token], sql: str) -> int:
    """The deepest nesting (parentheses + CASE + a run of unary operators); raises the
    MySQL errors for selects nested too deep and nesting beyond the parser's stack."""
    lparen, rparen, select, case, end = (TokenType.L_PAREN, TokenType.R_PAREN, TokenType.SELECT,
                                         TokenType.CASE, TokenType.END)
    unary = _UNARY
    depth = case_depth = run = deepest = 0
    select_frames: list[bool] = []
    select_level = 0
    for i, tt in enumerate([t.token_type for t in tokens]):
        if tt is lparen:
            depth += 1
            select_frames.append(False)
        elif tt is rparen:
            depth -= 1
            if select_frames and select_frames.pop():
                select_level -= 1
        elif tt is select:
            if select_frames and not select_frames[-1]:
                select_frames[-1] = True
                select_level += 1
                if select_level > MAX_SELECT_NESTING:
                    raise errors.SelectNestingTooDeep()
        elif tt is case:
            case_depth += 1
        elif tt is end and case_depth:
            case_depth -= 1
        run = run + 1 if tt in unary else 0
        level = depth + case_depth + run
        if level > deepest:
            deepest = level
            if deepest > PARSER_STACK_LIMIT:
                raise errors.ParseError(f"memory exhausted near {_near(sql, tokens[i])}")
    return deepest


def _wrap_json_pairs(tokens: list[Token]) -> list[Token] | None:
    """``JSON_OBJECT(a, b, ...)`` -> ``JSON_OBJECT((a), (b), ...)``: sqlglot reads each
    key as a column and each value as a bitwise expression; parenthesised, any
    expression (``:v``, ``x = 1``) parses (``_fix_tree`` removes the parentheses).
    None: no such call."""
    match = _match_parens(tokens)
    out: list[Token] = []
    changed = False
    depth_of_call: list[int] = []  # paren depth of each open JSON_OBJECT( call
    depth = 0
    for i, t in enumerate(tokens):
        tt = t.token_type
        if tt is TokenType.R_PAREN:
            if depth_of_call and depth_of_call[-1] == depth:
                depth_of_call.pop()
                out.append(_paren(TokenType.R_PAREN, t))
            depth -= 1
            out.append(t)
            continue
        if tt is TokenType.COMMA and depth_of_call and depth_of_call[-1] == depth:
            out.append(_paren(TokenType.R_PAREN, t))
            out.append(t)
            out.append(_paren(TokenType.L_PAREN, t))
            continue
        out.append(t)
        if tt is TokenType.L_PAREN:
            depth += 1
            prev = tokens[i - 1] if i else None
            if (prev is not None and prev.token_type is TokenType.VAR and prev.text.upper() in _JSON_PAIR_FUNCTIONS
                    and match[i] > i + 1):
                depth_of_call.append(depth)
                out.append(_paren(TokenType.L_PAREN, t))
                changed = True
    return out if changed else None


def _mark_hex_numbers(tokens: list[Token], sql: str) -> list[Token]:
    """``0x41`` and ``x'41'`` are one token type to sqlglot, but not one value to MariaDB
    (``0x41 + 0`` is 65, ``x'41' + 0`` is 0): the ``0x`` form keeps its prefix in the
    node's text (``HexString(this='0x41')``; written back as is by ``_hex_sql``)."""
    out = list(tokens)
    for i, t in enumerate(tokens):
        if t.token_type is TokenType.HEX_STRING and sql[t.start:t.start + 2] in ("0x", "0X"):
            out[i] = Token(TokenType.HEX_STRING, "0x" + t.text, t.line, t.col, t.start, t.end, t.comments)
    return out


def _default_function(tokens: list[Token]) -> list[Token]:
    """``DEFAULT(col)`` is a function call (sqlglot reads only the bare keyword)."""
    out = list(tokens)
    for i, t in enumerate(tokens[:-1]):
        if t.token_type is TokenType.DEFAULT and tokens[i + 1].token_type is TokenType.L_PAREN:
            out[i] = Token(TokenType.VAR, t.text, t.line, t.col, t.start, t.end, t.comments)
    return out


def _paren(tt: TokenType, near: Token) -> Token:
    text = "(" if tt is TokenType.L_PAREN else ")"
    return Token(tt, text, near.line, near.col, near.start, near.start)


def _statement_modifiers(tokens: list[Token]) -> list[Token] | None:
    """Drop or refuse the modifiers after INSERT / UPDATE / DELETE (None: unchanged)."""
    head = tokens[0].token_type
    n = len(tokens)
    i = 2 if n > 1 and tokens[1].token_type is TokenType.HINT else 1
    start = i
    while i < n:
        t = tokens[i]
        word = t.text.upper() if t.token_type is TokenType.VAR else ""
        if head is TokenType.INSERT:
            if word == "DELAYED":
                raise _unsupported("INSERT DELAYED")
            if word not in ("LOW_PRIORITY", "HIGH_PRIORITY"):
                break
        else:
            if t.token_type is TokenType.IGNORE:
                raise _unsupported(f"{tokens[0].text.upper()} IGNORE")
            if not (word == "LOW_PRIORITY" or (word == "QUICK" and head is TokenType.DELETE)):
                break
        i += 1
    rest = _delete_star_targets(tokens[i:]) if head is TokenType.DELETE else None
    if i == start and rest is None:
        return None
    return tokens[:start] + (tokens[i:] if rest is None else rest)


def _delete_star_targets(tokens: list[Token]) -> list[Token] | None:
    """``DELETE t1.*, t2.* FROM ...`` -> ``DELETE t1, t2 FROM ...`` (None: unchanged)."""
    out: list[Token] = []
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i]
        if t.token_type in (TokenType.WHERE, TokenType.L_PAREN):
            out.extend(tokens[i:])
            break
        if (t.token_type is TokenType.DOT and i + 1 < n and tokens[i + 1].token_type is TokenType.STAR
                and out and out[-1].token_type in (TokenType.VAR, TokenType.IDENTIFIER)):
            i += 2
            continue
        out.append(t)
        i += 1
    return out if len(out) != n else None


def _select_modifiers(tokens: list[Token]) -> list[Token] | None:
    """``SELECT HIGH_PRIORITY DISTINCT`` -> ``SELECT DISTINCT HIGH_PRIORITY`` (sqlglot reads
    the quantifier first only); ``SQL_CACHE`` dropped. None: unchanged."""
    out: list[Token] = []
    changed = False
    n = len(tokens)
    i = 0
    while i < n:
        t = tokens[i]
        out.append(t)
        i += 1
        if t.token_type is not TokenType.SELECT:
            continue
        if i < n and tokens[i].token_type is TokenType.HINT:
            out.append(tokens[i])
            i += 1
        k = i
        while k < n:
            word = _upper(tokens[k])
            if not (word in _SELECT_QUANTIFIERS or (
                    word in _SELECT_MODIFIERS
                    and not (k + 1 < n and tokens[k + 1].token_type in _NOT_AFTER_MODIFIER))):
                break
            k += 1
        run = tokens[i:k]
        fixed = ([t for t in run if _upper(t) in _SELECT_QUANTIFIERS]
                 + [t for t in run if _upper(t) in _SELECT_MODIFIERS and _upper(t) != "SQL_CACHE"])
        if any(a is not b for a, b in zip(fixed, run, strict=False)) or len(fixed) != len(run):
            changed = True
        out.extend(fixed)
        i = k
    return out if changed else None


_DML_HEADS = frozenset({TokenType.INSERT, TokenType.UPDATE, TokenType.DELETE})
_SELECT_HEADS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN})
# cheap text checks (substrings of the lower-cased text) that say when a token pass can
# have anything to do
_MODIFIER_TEXT = ("high_priority", "straight_join", "sql_")
_SHALLOW = 16  # nesting at most this deep needs neither measuring nor collapsing


def _prepare(tokens: list[Token], sql: str) -> tuple[list[Token], dict[str, Any]]:
    """The token-level fixes and the nesting guard; returns the tokens to parse and what
    the tree pass needs to look at. Most statements need none of it: each step is
    skipped on a check done at C speed (a substring of the text, ``list.count``)."""
    if not tokens:
        return tokens, {}
    types = [t.token_type for t in tokens]
    head = types[0]
    changed = False
    if head in _DML_HEADS:
        fixed = _statement_modifiers(tokens)
        if fixed is not None:
            tokens, changed = fixed, True
    low = sql.lower()
    if any(word in low for word in _MODIFIER_TEXT):
        fixed = _select_modifiers(tokens)
        if fixed is not None:
            tokens, changed = fixed, True
    wrapped = _wrap_json_pairs(tokens) if "json_object" in low else None
    if wrapped is not None:
        tokens, changed = wrapped, True
    if "0x" in low and TokenType.HEX_STRING in types:
        tokens = _mark_hex_numbers(tokens, sql)
    if TokenType.DEFAULT in types:
        tokens = _default_function(tokens)
    if changed:
        types = [t.token_type for t in tokens]
    bound = types.count(TokenType.L_PAREN) + types.count(TokenType.CASE) + sum(types.count(u) for u in _UNARY)
    if bound > _SHALLOW:
        deepest = _measure(tokens, sql)
        if deepest > _SHALLOW:
            tokens = _collapse_parens(tokens)
            deepest = _measure(tokens, sql)
        if deepest > MAX_NESTING:
            raise errors.StackOverrun(deepest, MAX_NESTING, _BYTES_PER_LEVEL)
    connectors = types.count(TokenType.AND) + types.count(TokenType.OR) + types.count(TokenType.XOR)
    return tokens, {
        "json": wrapped is not None,
        "interval": TokenType.INTERVAL in types,
        "default": head in (TokenType.UPDATE, TokenType.INSERT) and TokenType.DEFAULT in types,
        "into": head in _SELECT_HEADS and TokenType.INTO in types,
        "chains": connectors > _LONG_CHAIN,
    }


# Tokens after which a FROM starts sqlglot's FROM-first query (DuckDB's ``FROM t``, read
# as ``SELECT * FROM t``): MySQL has no such syntax, so ``SELECT a FROM FROM t`` is its 1064.
_BEFORE_FROM_FIRST = frozenset({TokenType.FROM, TokenType.JOIN, TokenType.L_PAREN, TokenType.COMMA})


def _refuse_from_first(tokens: list[Token], sql: str) -> None:
    for i, t in enumerate(tokens):
        if t.token_type is TokenType.FROM and (i == 0 or tokens[i - 1].token_type in _BEFORE_FROM_FIRST):
            raise errors.ParseError("You have an error in your SQL syntax; check the manual that corresponds "
                                    f"to your MySQL server version for the right syntax to use near {_near(sql, t)}")


def _refuse_known(tokens: list[Token]) -> None:
    """sqlglot could not parse the statement: name a construct MySQL accepts that we do
    not plan (1235) instead of reporting a syntax error."""
    if not tokens:
        return
    head = tokens[0].token_type
    words = [t.text.upper() for t in tokens]
    is_select = head in (TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN)
    if head is TokenType.VALUES:
        raise _unsupported("VALUES statement")
    if is_select and "PROCEDURE" in words:
        raise _unsupported("SELECT ... PROCEDURE")
    if is_select and any(t.token_type is TokenType.INTO for t in tokens):
        raise _unsupported("SELECT INTO")
    for i in range(len(words) - 1):
        if words[i] == "ROWS" and words[i + 1] == "EXAMINED":
            raise _unsupported("LIMIT ROWS EXAMINED")
    depth = 0
    group_depth = -1
    for t in tokens:
        tt = t.token_type
        if tt is TokenType.L_PAREN:
            depth += 1
        elif tt is TokenType.R_PAREN:
            depth -= 1
            if group_depth > depth:
                group_depth = -1
        elif tt is TokenType.GROUP_BY:
            group_depth = depth
        elif group_depth == depth and tt in (TokenType.HAVING, TokenType.ORDER_BY, TokenType.LIMIT,
                                              TokenType.UNION, TokenType.WINDOW, TokenType.FOR):
            group_depth = -1
        elif group_depth == depth and tt in (TokenType.ASC, TokenType.DESC):
            raise _unsupported("GROUP BY ... ASC/DESC")


# -- after parsing -----------------------------------------------------------------------


def _fix_tree(tree: exp.Expression, todo: dict[str, Any]) -> exp.Expression:
    if todo.get("into") and tree.find(exp.Into) is not None:
        raise _unsupported("SELECT INTO")
    if todo.get("interval"):
        for node in list(tree.find_all(exp.Interval)):
            if node.args.get("unit") is not None:
                continue
            inner = node.this
            if isinstance(inner, exp.Tuple):  # INTERVAL(N, N1, N2, ...): the function
                new: exp.Expression = exp.Anonymous(this="INTERVAL", expressions=list(inner.expressions))
            elif isinstance(inner, exp.Paren) and not isinstance(node.parent, exp.Add | exp.Sub):
                new = exp.Anonymous(this="INTERVAL", expressions=[inner.this])  # INTERVAL(N): MySQL's error
            elif inner is not None:  # INTERVAL 1 DAY + x: x was read as a second interval
                new = inner
            else:
                continue
            if node is tree:
                tree = new
            else:
                node.replace(new)
    if todo.get("json"):
        for kv in list(tree.find_all(exp.JSONKeyValue)):
            for key in ("this", "expression"):
                v = kv.args.get(key)
                if isinstance(v, exp.Paren):
                    kv.set(key, v.this)
    if todo.get("default"):  # SET c = DEFAULT (UPDATE, ON DUPLICATE KEY UPDATE): not a column
        conflict = tree.args.get("conflict") if isinstance(tree, exp.Insert) else None
        assignments = tree.expressions if isinstance(tree, exp.Update) else conflict.expressions if conflict else []
        for a in assignments:
            v = a.args.get("expression") if isinstance(a, exp.EQ) else None
            if isinstance(v, exp.Column) and not v.table and v.name.lower() == "default" and not v.this.quoted:
                v.replace(exp.var("DEFAULT"))
    if todo.get("chains"):
        tree = _balance_chains(tree)
    _unwrap_parenthesised_joins(tree)
    return tree


def _unwrap_parenthesised_joins(tree: exp.Expression) -> None:
    """``FROM (a JOIN b ON x) JOIN c ...`` -> ``FROM a JOIN b ON x JOIN c ...``: joins
    associate left to right, so the parentheses around the first FROM item change
    nothing; sqlglot reads them as a derived table holding a join, which the planner
    took for its first table alone (the join was lost)."""
    for sel in list(tree.find_all(exp.Select)):
        src = sel.args.get("from_")
        if not isinstance(src, exp.From):
            continue
        while True:
            table = _parenthesised_join(src.this)
            if table is None:
                break
            joins = list(table.args["joins"])
            table.set("joins", None)
            src.set("this", table)
            sel.set("joins", joins + list(sel.args.get("joins") or []))
        # ``a JOIN (b JOIN c ON p) ON q`` of inner joins only: ``a JOIN b JOIN c ON p AND q``
        out: list[exp.Expression] = []
        for j in sel.args.get("joins") or []:
            table = _parenthesised_join(j.this)
            inner = list(table.args["joins"]) if table is not None else []
            if table is None or not all(_inner(x) for x in [j, *inner]) or j.args.get("using"):
                out.append(j)
                continue
            table.set("joins", None)
            out.append(exp.Join(this=table))
            out.extend(inner)
            q = j.args.get("on")
            if q is not None:
                last = out[-1]
                p = last.args.get("on")
                last.set("on", exp.and_(p, q) if p is not None else q)
        if sel.args.get("joins"):
            sel.set("joins", out)


def _parenthesised_join(node: exp.Expression | None) -> exp.Table | None:
    """The table holding the joins of ``(t JOIN u ...)`` (any number of parentheses)."""
    while isinstance(node, exp.Subquery) and not node.alias:
        node = node.this
        if isinstance(node, exp.Table) and node.args.get("joins"):
            return node
    return None


def _inner(j: exp.Join) -> bool:
    return not j.side and str(j.kind or "").upper() in ("", "INNER", "CROSS") and not j.method


def _balance_chains(tree: exp.Expression) -> exp.Expression:
    """``a OR b OR c OR ...`` parses left-deep (depth n); rebuild each long chain of one
    connector balanced (depth log n). AND, OR and XOR are associative: same meaning."""
    roots = [n for n in tree.walk()
             if isinstance(n, exp.And | exp.Or | exp.Xor) and type(n.parent) is not type(n)]
    for root in roots:
        kind = type(root)
        leaves: list[exp.Expression] = []
        stack = [root]
        while stack:
            node = stack.pop()
            if type(node) is kind and node.args.get("expression") is not None:
                stack.append(node.expression)
                stack.append(node.this)
            else:
                leaves.append(node)
        if len(leaves) <= _LONG_CHAIN:
            continue
        new = _balanced(kind, [leaf.pop() if leaf.parent is not None else leaf for leaf in leaves])
        if root is tree:
            tree = new
        else:
            root.replace(new)
    return tree


def _balanced(kind: type, items: list[exp.Expression]) -> exp.Expression:
    level = items
    while len(level) > 1:
        nxt = [kind(this=level[i], expression=level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


# -- when generating ---------------------------------------------------------------------
#
# A generator's ``_dispatch`` (expression class -> handler) is an instance attribute of the
# compiled generator: ``ShardgateMySQL.generator`` hands out MySQL generators whose table
# has these handlers in it (no tree walk, no copy).

# parents under which ``a REGEXP b`` needs no parentheses
_REGEXP_SAFE_PARENTS = (exp.Select, exp.Where, exp.Having, exp.Not, exp.And, exp.Or, exp.Xor, exp.Paren,
                        exp.Alias, exp.Join, exp.If, exp.Case)
_DISPATCH: dict[type, dict[type, Any]] = {}


def _lock_sql(gen: Any, e: exp.Lock, default: Any) -> str:
    """MariaDB has no ``FOR SHARE``; ``LOCK IN SHARE MODE`` means the same in MySQL 8."""
    if e.args.get("update") or e.args.get("expressions") or e.args.get("key"):
        return default(gen, e)
    wait = e.args.get("wait")
    if isinstance(wait, exp.Literal):
        return f"LOCK IN SHARE MODE WAIT {wait.name}"
    if wait is not None:
        return "LOCK IN SHARE MODE NOWAIT" if wait else "LOCK IN SHARE MODE SKIP LOCKED"
    return "LOCK IN SHARE MODE"


def _regexp_sql(gen: Any, e: exp.RegexpLike, default: Any) -> str:
    """MariaDB has no ``REGEXP_LIKE``: ``a REGEXP b`` (its synonym in MySQL 8)."""
    if e.args.get("flag") is not None:
        return default(gen, e)
    text = f"{gen.sql(e, 'this')} REGEXP {gen.sql(e, 'expression')}"
    return text if isinstance(e.parent, _REGEXP_SAFE_PARENTS) else f"({text})"


def _json_unquote_sql(gen: Any, e: exp.JSONExtractScalar, default: Any) -> str:
    """``j ->> p`` (MySQL only) as what it stands for, which MariaDB reads too."""
    return f"JSON_UNQUOTE(JSON_EXTRACT({gen.sql(e, 'this')}, {gen.sql(e, 'expression')}))"


def _table_sql(gen: Any, e: exp.Table, default: Any) -> str:
    """``FROM DUAL`` stays a keyword (sqlglot quotes it as a reserved word: a table)."""
    this = e.this
    if (isinstance(this, exp.Identifier) and not this.quoted and this.name.lower() == "dual"
            and len([v for v in e.args.values() if v]) == 1):
        return "DUAL"
    return default(gen, e)


def _hex_sql(gen: Any, e: exp.HexString, default: Any) -> str:
    """``0x41`` as written (``_mark_hex_numbers``), ``x'41'`` as sqlglot writes it."""
    digits = e.this or ""
    return digits if digits[:2] in ("0x", "0X") else default(gen, e)


def _utc_date_sql(gen: Any, e: exp.UtcDate, default: Any) -> str:
    return "UTC_DATE()"


_HANDLERS = {
    exp.Lock: _lock_sql,
    exp.RegexpLike: _regexp_sql,
    exp.JSONExtractScalar: _json_unquote_sql,
    exp.Table: _table_sql,
    exp.HexString: _hex_sql,
    exp.UtcDate: _utc_date_sql,
}


def _dispatch_for(gen: Any) -> dict[type, Any]:
    cls = type(gen)
    table = _DISPATCH.get(cls)
    if table is None:
        table = dict(gen._dispatch)
        for kind, handler in _HANDLERS.items():
            default = table.get(kind) or (lambda g, e: g.function_fallback_sql(e))
            table[kind] = (lambda h, d: lambda g, e: h(g, e, d))(handler, default)  # type: ignore[operator]  # sqlglot's generator handlers are untyped callables
        _DISPATCH[cls] = table
    return table


# -- the dialect -------------------------------------------------------------------------


class ShardgateMySQL(MySQL):
    """sqlglot's MySQL dialect with shardgate's fixes (see the module docstring)."""

    max_nesting = MAX_NESTING

    def _tokens(self, sql: str) -> tuple[list[Token], dict[str, Any], str]:
        tokens = self.tokenize(sql)
        if "/*!" in sql:
            inlined = _inline_executable_comments(sql, tokens)
            if inlined is not None:
                sql = inlined
                tokens = self.tokenize(sql)
        fixed, todo = _prepare(tokens, sql)
        return fixed, todo, sql

    def parse(self, sql: str, **opts: Any) -> list[exp.Expression | None]:  # type: ignore[override]  # forwards sqlglot's keyword options unchanged
        tokens, todo, text = self._tokens(sql)
        _refuse_from_first(tokens, text)
        try:
            trees = self.parser(**opts).parse(tokens, text)
        except SqlglotParseError:
            _refuse_known(tokens)
            raise
        return [None if t is None else _fix_tree(t, todo) for t in trees]  # type: ignore[arg-type]  # sqlglot types parses and parents as Expr, Expression's base

    def parse_into(self, expression_type: Any, sql: str, **opts: Any) -> list[exp.Expression | None]:  # type: ignore[override]  # forwards sqlglot's keyword options unchanged
        tokens, todo, text = self._tokens(sql)
        trees = self.parser(**opts).parse_into(expression_type, tokens, text)
        return [None if t is None else _fix_tree(t, todo) for t in trees]  # type: ignore[arg-type]  # sqlglot types parses and parents as Expr, Expression's base

    def generator(self, **opts: Any) -> Any:
        gen = super().generator(**opts)
        gen._dispatch = _dispatch_for(gen)
        return gen


DIALECT = ShardgateMySQL()
