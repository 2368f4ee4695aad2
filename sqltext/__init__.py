"""SQL text without parsing, shared by the proxy (``proxy``) and the planner (``rewriter``):
the one quote-aware lexer (``sqltext.lexer``) and the one identifier quoter and literal
renderer (``sqltext.quoting``). Imports nothing but the standard library, so the CDC core and
the Spark source use it without loading sqlglot."""
